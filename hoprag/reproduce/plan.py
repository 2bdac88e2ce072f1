"""The `eval.py` jobs a table needs at a scale, one per row with runs of its own and column group, each in a fixed
run directory (`<out>/runs/<row>/<group>`), so a rerun finds them: a job is skipped (with the reason, or the
preflight refuses it later), finished (nothing to do) or to run.

A job is finished when its run directory holds a metrics.json over every record of its predictions.jsonl,
written after the run last started (`.hydra/overrides.yaml`, which `eval.py` writes when a run starts) with the
same overrides as the job's, run-control ones (`show`, `logger`, paths, caches) aside. Anything else is run:
`eval.py` resumes what is there, refuses a directory started with other settings (`overwrite=true` starts it
afresh), and answers only what is missing."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from hoprag.compare.groups import is_run_control_override
from hoprag.reproduce.spec import Table

RUNS = "runs"
METRICS = "metrics.json"
PREDICTIONS = "predictions.jsonl"
OVERRIDES = Path(".hydra") / "overrides.yaml"


@dataclass(frozen=True)
class Job:
    """One `eval.py` run: the row whose run it is, the column group, its overrides and directory, and why it
    does not run at this scale ("" when it does)."""

    row: str
    group: str
    overrides: tuple[str, ...]
    directory: Path
    skip: str = ""

    @property
    def name(self) -> str:
        return f"{self.row}/{self.group}"

    def sweep_overrides(self) -> list[str]:
        """The job as the row sweeper launches it: its overrides and its run directory under the sweep's."""
        return [*self.overrides, f"hydra.sweep.subdir={self.name}"]

    def finished(self) -> bool:
        metrics, started = self.directory / METRICS, self.directory / OVERRIDES
        if not (metrics.is_file() and started.is_file()) or metrics.stat().st_mtime < started.stat().st_mtime:
            return False
        if _settings(yaml.safe_load(started.read_text(encoding="utf-8")) or []) != _settings(self.overrides):
            return False
        try:
            n = json.loads(metrics.read_text(encoding="utf-8"))["run"]["n"]
        except (ValueError, KeyError, TypeError):
            return False
        predictions = self.directory / PREDICTIONS
        if not predictions.is_file():
            return False
        with open(predictions, "rb") as f:
            return n == sum(1 for line in f if line.strip())


def _settings(overrides: Sequence[str]) -> list[str]:
    return [str(o) for o in overrides if not is_run_control_override(str(o))]


def plan(table: Table, scale: str, out_dir: Path, shared: Sequence[str] = ()) -> list[Job]:
    """Every job of `table` at `scale`, row by row in table order, each group in column order; `shared`
    overrides (the command line's `job_overrides`) follow the scale's. A job is skipped here for the reasons
    the table gives; what it needs to run (files, exports, models, ...) is the preflight's to check."""
    jobs = []
    for row in (r for r in table.rows if r.run == r.id):
        for g in table.run_groups():
            group = table.groups[g]
            reason = group.skip[scale] or row.skip[scale] or row.group_skip.get(g, {}).get(scale, "")
            overrides = (*table.scales[scale].overrides, *shared, *row.overrides[scale], *group.overrides[scale],
                         *row.group_overrides.get(g, {}).get(scale, ()))  # fmt: skip
            jobs.append(Job(row.id, g, overrides, out_dir / RUNS / row.id / g, reason))
    return jobs
