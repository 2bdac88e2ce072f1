"""Finding the runs that command-line arguments name: run directories, multirun folders (their finished jobs,
in job order) or glob patterns; an eval run has a metrics.json, a train run a composed config and a Lightning CSV
log."""

from __future__ import annotations

import glob
import logging
from collections.abc import Iterable
from pathlib import Path

from hoprag.compare.runs import CONFIG, METRICS, TRAIN_LOGS, CompareError, natural_order

log = logging.getLogger(__name__)


def is_train_run(path: Path) -> bool:
    """A `train.py` run: no metrics.json, but a composed config and a Lightning CSV log."""
    return not (path / METRICS).is_file() and (path / CONFIG).is_file() and any(path.glob(TRAIN_LOGS))


def _finished(path: Path) -> bool:
    return (path / METRICS).is_file() or is_train_run(path)


def _jobs(folder: Path) -> list[Path]:
    """The finished runs directly under a multirun folder, in job order (unfinished ones skipped, with a word)."""
    jobs = []
    for sub in sorted((d for d in folder.iterdir() if d.is_dir()), key=natural_order):
        if _finished(sub):
            jobs.append(sub)
        elif (sub / "predictions.jsonl").is_file():
            log.warning("skipping %s: no %s (the run has not finished)", sub, METRICS)
    return jobs


def find_runs(args: Iterable[str]) -> list[Path]:
    """The eval and train run directories that `args` name: run directories, multirun directories, or glob
    patterns."""
    found: list[Path] = []
    for arg in args:
        path = Path(arg)
        explicit = path.exists()
        matches = [path] if explicit else sorted((Path(m) for m in glob.glob(arg)), key=natural_order)
        if not matches:
            raise CompareError(f"{arg}: no run directory, multirun directory or glob match")
        for match in matches:
            if _finished(match):
                found.append(match)
            elif match.is_dir() and (jobs := _jobs(match)):
                found.extend(jobs)
            elif explicit:
                what = "has not finished" if (match / "predictions.jsonl").is_file() else "is not an eval or train run"
                raise CompareError(f"{match} {what}: no {METRICS} nor {TRAIN_LOGS} in it or in its job folders")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise CompareError(f"no finished eval or train runs in {' '.join(args)}")
    return unique
