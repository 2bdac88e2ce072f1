"""A refused run says why in a few lines.

A refusal (an exception class marked `Refusal`: a setting no run can mean, a resume under other settings, a
malformed record, a table that cannot be read, a missing file) is the user's to fix, and its message says how;
Hydra would print it under ~30 lines of traceback. `reported` prints the message alone (secrets redacted) and
exits with status 2; `HYDRA_FULL_ERROR=1` or `verbose=true` keeps the traceback, a multirun's job raises as
before, so its launcher records the failure, and a call outside a Hydra run (a test, a script) raises."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from hoprag.utils.secrets import redact_text

T = TypeVar("T")


class Refusal(Exception):
    """Marks an exception class whose message is for the user, who can act on it (mixed in before its base)."""


def reported(task: Callable[[Any], T]) -> Callable[[Any], T]:
    """Wrap a Hydra task function (under `@hydra.main`) so a refusal prints its message, not a traceback."""

    @functools.wraps(task)
    def wrapped(cfg: Any) -> T:
        try:
            return task(cfg)
        except (Refusal, FileNotFoundError) as err:
            if _wants_trace(cfg):
                raise
            sys.stderr.write(f"refused: {redact_text(str(err))}\n(HYDRA_FULL_ERROR=1 shows the traceback)\n")
            raise SystemExit(2) from None

    return wrapped


def _wants_trace(cfg: Any) -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized():  # called as a function (a test, a script), not from the command line
        return True
    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    return os.environ.get("HYDRA_FULL_ERROR") == "1" or multirun or bool(cfg.get("verbose"))
