"""The one place that decides whether progress bars show, and makes them.

Every loop that runs for minutes (encoding, index building, MCTS simulations, PruneRAG rounds) draws its bar
with `progress.bar`, so all of them agree: bars show on a terminal, and stay quiet under `CI=true` or when
stderr (where tqdm writes) is a file or a pipe, keeping logs free of carriage-return noise. `HOPRAG_PROGRESS`
forces the choice either way (`1`/`true`/`on`: always, `0`/`false`/`off`: never), e.g. to watch a job's log.
Callers use the module (`progress.bar(...)`), not the bare names, so one patch reaches every loop.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Any

from tqdm.auto import tqdm

OVERRIDE = "HOPRAG_PROGRESS"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def enabled(stream: IO[str] | None = None) -> bool:
    """Whether bars show: the `HOPRAG_PROGRESS` override when set, else off under `CI=true` (or 1), else
    whether `stream` (default stderr) is a terminal."""
    forced = os.environ.get(OVERRIDE, "").strip().lower()
    if forced in _TRUE:
        return True
    if forced in _FALSE:
        return False
    if forced:
        raise ValueError(f"{OVERRIDE} must be one of {_TRUE + _FALSE} or unset, got {forced!r}")
    if os.environ.get("CI", "").strip().lower() in _TRUE:
        return False
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def bar(*, total: int | None, desc: str, unit: str, show: bool | None = None, **kwargs: Any) -> tqdm:
    """A tqdm bar, drawn only when `show` (None: `enabled()`); a hidden one takes the same calls and draws
    nothing, so a loop updates it the same way either way."""
    hidden = not (enabled() if show is None else show)
    return tqdm(total=total, desc=desc, unit=unit, disable=hidden, dynamic_ncols=True, **kwargs)
