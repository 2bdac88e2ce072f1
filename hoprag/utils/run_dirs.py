"""No litter: an entry point that fails before producing anything leaves no dated run folder behind.

Hydra creates the run directory (and its `<job>.log`) before the entry point runs, so a typo on the command line
(an unknown method, a missing file, a refused setting) would leave `logs/<task>/runs/<time>/` holding only
bookkeeping. When the entry point raises, that directory is removed if it holds nothing but bookkeeping
(`BOOKKEEPING`); a directory with any result in it (predictions, metrics, checkpoints, logger output, a file of
the user's) is never touched, so a refused rerun or a crash mid-run keeps everything it had.
"""

from __future__ import annotations

import functools
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from hoprag.utils import run_lock

log = logging.getLogger(__name__)

# What a run directory holds before the run has produced anything: Hydra's job log and saved config, the
# settings fingerprint written when a run starts afresh, and the lock file that stays after a run lets go (its
# holder's record is not bookkeeping: a directory another process holds is never removed).
BOOKKEEPING = frozenset({".hydra", "run_fingerprint.json", run_lock.LOCK})
T = TypeVar("T")


def holds_results(directory: Path) -> bool:
    """Whether `directory` holds anything beyond a run's bookkeeping (`BOOKKEEPING` and top-level `*.log`)."""
    return any(p.name not in BOOKKEEPING and not (p.suffix == ".log" and p.is_file()) for p in directory.iterdir())


def remove_if_empty(directory: Path) -> bool:
    """Remove a run directory that holds no result; whether it was removed."""
    if not directory.is_dir() or holds_results(directory):
        return False
    shutil.rmtree(directory, ignore_errors=True)
    log.debug("removed %s: the run failed before producing anything", directory)
    return True


def leaves_no_empty_run(task: Callable[[DictConfig], T]) -> Callable[[DictConfig], T]:
    """Wrap an entry point's `main(cfg)` so that a failure (an exception, a SystemExit, Ctrl-C) before the run
    produced anything removes its run directory (`cfg.paths.output_dir`) before the error goes on."""

    @functools.wraps(task)
    def wrapper(cfg: DictConfig) -> T:
        try:
            return task(cfg)
        except BaseException:
            directory = _output_dir(cfg)
            if directory is not None:
                remove_if_empty(directory)
            raise

    return wrapper


def _output_dir(cfg: DictConfig) -> Path | None:
    try:
        return Path(cfg.paths.output_dir)
    except (OmegaConfBaseException, ValueError):  # too broken to name its run directory: nothing is removed
        return None
