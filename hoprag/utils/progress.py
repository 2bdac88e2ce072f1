"""The one place that decides how progress shows, and makes the bars.

Every loop that runs for minutes (the evaluation runner's questions, encoding, index building, TreeRare
levels, PruneRAG rounds, MCTS simulations) draws its bar with `progress.bar`, so all of them agree. On a
terminal it is a tqdm bar. On a log file or a pipe it is a plain line of the same text (`LineBar`): at most
one line every `INTERVAL` seconds across all bars, plus the final state of a bar that stays (`leave=True`), so
a piped run of hours is never silent and its log is not flooded with carriage returns. A step that does not
tick for longer (one batched LLM call of minutes) still gets a line every `INTERVAL` seconds: a heartbeat
thread writes the innermost open bar's line, its elapsed time updated. Under `CI=true` nothing
shows. `HOPRAG_PROGRESS` (what the entry points' `progress=` key sets, see `configure`) forces the choice:
`1`/`true`/`on` shows progress even under CI, `0`/`false`/`off` never, `auto` (or unset) decides as above.
Callers use the module (`progress.bar(...)`), not the bare names, so one patch reaches every loop.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
import weakref
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING, Any, ClassVar

from tqdm.auto import tqdm
from tqdm.std import tqdm as plain_tqdm

if TYPE_CHECKING:
    from hoprag.cost import Cost

OVERRIDE = "HOPRAG_PROGRESS"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
AUTO = "auto"
BAR, LINES, OFF = "bar", "lines", "off"
INTERVAL = 60.0  # seconds between two progress lines on a log or a pipe (all bars together): a long run stays short
HEARTBEAT_POLL = 1.0  # how often the heartbeat looks whether a line is due
LINE_FORMAT = "{desc}: {n_fmt}/{total_fmt} {unit} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"


def configure(setting: bool | str | None) -> None:
    """Apply an entry point's `progress` key to this process (and those it starts): true or false force
    progress on or off through `HOPRAG_PROGRESS`; `auto` (or None) leaves that variable as it is."""
    value = AUTO if setting is None else str(setting).strip().lower()
    if value == AUTO:
        return
    if value not in _TRUE + _FALSE:
        raise ValueError(f"progress must be true, false or auto, got {setting!r}")
    os.environ[OVERRIDE] = value


def style(stream: IO[str] | None = None, show: bool | None = None) -> str:
    """How progress shows on `stream` (default stderr): BAR on a terminal, LINES on a log or a pipe, OFF when
    `show` is False or, with `show` None, when `HOPRAG_PROGRESS` says off (or is unset/auto and `CI=true`)."""
    if show is None:
        forced = os.environ.get(OVERRIDE, "").strip().lower()
        if forced and forced not in _TRUE + _FALSE + (AUTO,):
            raise ValueError(f"{OVERRIDE} must be one of {_TRUE + _FALSE + (AUTO,)} or unset, got {forced!r}")
        show = forced in _TRUE or (forced not in _FALSE and os.environ.get("CI", "").strip().lower() not in _TRUE)
    if not show:
        return OFF
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return BAR if isatty and isatty() else LINES


def enabled(stream: IO[str] | None = None) -> bool:
    """Whether a drawn bar suits `stream` (default stderr): progress is on and it is a terminal. For libraries
    that draw their own tqdm bars (bm25s), which on a log would write carriage returns."""
    return style(stream) == BAR


def bar(*, total: int | None, desc: str, unit: str, show: bool | None = None, **kwargs: Any) -> tqdm:
    """A tqdm bar on a terminal, a `LineBar` on a log or a pipe, and a hidden one (same calls, draws nothing)
    when progress is off, so a loop updates it the same way either way. `show` overrides the decision."""
    shown = style(kwargs.get("file"), show)
    if shown == LINES:
        return LineBar(total=total, desc=desc, unit=unit, **kwargs)
    return tqdm(total=total, desc=desc, unit=unit, disable=shown == OFF, dynamic_ncols=True, **kwargs)


def spent(costs: Iterable[Cost | None]) -> dict[str, int]:
    """The LLM calls and tokens (prompt + completion) of these cost records so far, for a bar's postfix."""
    kept = [c for c in costs if c is not None]
    return {"llm_calls": sum(c.llm_calls for c in kept),
            "tokens": sum(c.prompt_tokens + c.completion_tokens for c in kept)}  # fmt: skip


class LineBar(plain_tqdm):
    """A bar for a log or a pipe: each display is one plain line (`LINE_FORMAT`: no bar graphic, no carriage
    return), written only when `INTERVAL` seconds have passed since any bar's last line; a bar that stays
    (`leave=True`) writes its final state when it closes. While a bar is open, the heartbeat writes the
    innermost one's line whenever `INTERVAL` seconds pass without a line. Overriding `display` is tqdm's
    documented way."""

    last_line: ClassVar[float] = -math.inf  # when the last line was written, by any bar
    lock: ClassVar[threading.RLock] = threading.RLock()  # one line at a time, from the loops and the heartbeat
    # innermost last; weak, so that a bar dropped without `close` (a loop left early) is collected and closed by
    # tqdm rather than kept beating forever
    open_bars: ClassVar[list[weakref.ref[LineBar]]] = []
    heartbeat: ClassVar[threading.Thread | None] = None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(bar_format=LINE_FORMAT, **kwargs)
        if not self.disable:
            with LineBar.lock:
                LineBar.open_bars.append(weakref.ref(self))
            _start_heartbeat()

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        """As given (tqdm's own adds ": ", which `LINE_FORMAT` already puts after it)."""
        self.desc = desc or ""
        if refresh:
            self.refresh()

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if msg is not None:  # tqdm clearing a finished bar: nothing to clear on a log
            return False
        if time.monotonic() - LineBar.last_line < INTERVAL:
            return False
        self.write_line()
        return True

    def write_line(self) -> None:
        with LineBar.lock:
            LineBar.last_line = time.monotonic()
            self.written = self.n
            self.fp.write(str(self) + "\n")
            self.fp.flush()

    def close(self) -> None:
        """The final state of a bar that stays, as its last line unless the last line already showed it; then
        tqdm's bookkeeping, nothing to clear."""
        with LineBar.lock:
            LineBar.open_bars[:] = [ref for ref in LineBar.open_bars if (bar := ref()) is not None and bar is not self]
            if not self.disable and self.leave and getattr(self, "written", None) != self.n:
                self.write_line()
        self.leave = False
        super().close()


def _start_heartbeat() -> None:
    """Start the heartbeat thread once per process (a daemon: it never holds the process open)."""
    with LineBar.lock:
        if LineBar.heartbeat is None or not LineBar.heartbeat.is_alive():
            LineBar.heartbeat = threading.Thread(target=_beat, name="hoprag-progress-heartbeat", daemon=True)
            LineBar.heartbeat.start()


def innermost() -> LineBar | None:
    """The most recently opened bar still open (None when none is)."""
    with LineBar.lock:
        LineBar.open_bars[:] = [ref for ref in LineBar.open_bars if ref() is not None]
        return LineBar.open_bars[-1]() if LineBar.open_bars else None


def _beat() -> None:
    while True:
        time.sleep(min(HEARTBEAT_POLL, max(INTERVAL, 0.05)))
        with LineBar.lock:
            bar = innermost()
            if bar is not None and time.monotonic() - LineBar.last_line >= INTERVAL:
                try:
                    bar.write_line()
                except (ValueError, OSError):  # its stream was closed under it: that bar shows no more
                    LineBar.open_bars.pop()
                del bar  # no strong reference kept while asleep
