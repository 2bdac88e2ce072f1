"""One writer per directory: a run directory (eval.py, train.py), a table's `out_dir`, an index cache being built.

Two processes writing one directory interleave their files (two `eval.py` on one `hydra.run.dir` answered each
question twice and left a metrics.json of neither), so `hold` takes an exclusive lock on `<dir>/.hoprag.lock` and a
second process is refused at once, naming the holder from `<dir>/.hoprag.lock.json` (what it runs, its pid, host
and start time), which the holder writes once the lock is its own and removes when it lets go. The lock is
`flock` (filelock's `UnixFileLock`): the kernel drops it when its holder dies, however it dies, so a killed run
never blocks the next one; the record a killed holder leaves is taken over with a log line naming it. The lock
file itself stays after release (unlinking it would let two processes lock two files of one name); it counts as
bookkeeping (`hoprag.utils.run_dirs`), its holder's record does not, so a held directory is never removed. (A
cache that a sweep's jobs open together waits instead: one builds the corpus store, the others then open it,
`hoprag.data.store_build`.)

On a network filesystem: Linux NFS clients emulate `flock` with byte-range locks kept by the server, which hold
across machines; a mount with `local_lock=flock` (or `all`), or a filesystem whose `flock` is per machine, lets a
process on another machine take the lock too: the takeover's log line then names a live holder on another host,
the one sign of it. A filesystem without `flock` (ENOSYS, e.g. Lustre mounted without `-o flock`) is not locked
at all, with a warning.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

import psutil
from filelock import FileLock, Timeout

from hoprag.utils.refusals import Refusal

log = logging.getLogger(__name__)

LOCK = ".hoprag.lock"
RECORD = ".hoprag.lock.json"  # the holder, beside the lock: a flock carries no owner


class DirectoryInUse(Refusal, RuntimeError):
    """Another live process holds the directory."""


@dataclass(frozen=True)
class Holder:
    """Who holds a directory, as its record says: enough to find the process (`ps`, `kill`) or wait for it."""

    what: str
    pid: int
    host: str
    started: str

    def __str__(self) -> str:
        return f"{self.what} (pid {self.pid} on {self.host}, started {self.started})"


@contextmanager
def hold(directory: str | os.PathLike, what: str) -> Iterator[Path]:
    """Hold `directory` (created if missing) for this process while the block runs, `what` naming the holder
    (e.g. "eval.py"); `DirectoryInUse` at once when another process holds it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    lock = _acquire(directory, what)
    if lock is None:  # no flock on this filesystem
        yield directory
        return
    try:
        _take_over(directory)
        _write_record(directory, Holder(what, os.getpid(), socket.gethostname(), _now()))
        yield directory
    finally:
        (directory / RECORD).unlink(missing_ok=True)  # before the lock goes: the next holder finds no record
        lock.release()


def holder(directory: str | os.PathLike) -> Holder | None:
    """The holder recorded in `directory`: the live one while its lock is held, a dead one's after a kill."""
    try:
        return Holder(**json.loads((Path(directory) / RECORD).read_text()))
    except (OSError, ValueError, TypeError):  # none, or half-written by a holder that is just starting
        return None


def _acquire(directory: Path, what: str) -> FileLock | None:
    # fallback_to_soft=False: filelock's fallback (a marker file) would outlive a killed run and block the next one
    lock = FileLock(directory / LOCK, blocking=False, fallback_to_soft=False)
    try:
        lock.acquire()
    except Timeout:
        raise DirectoryInUse(_in_use(directory)) from None
    except OSError as err:
        if err.errno != errno.ENOSYS:
            raise
        log.warning("%s is not locked (its filesystem has no flock): start no second %s on it", directory, what)
        return None
    return lock


def _in_use(directory: Path) -> str:
    found = holder(directory)
    if found is None:
        by = "another process (it has not recorded itself yet)"
    elif found.host == socket.gethostname() and not psutil.pid_exists(found.pid):  # a child it forked holds it
        by = f"a process started by {found}, which has exited; `fuser {directory / LOCK}` names it"
    else:
        by = str(found)
    return (f"{directory} is in use by {by}: two processes would interleave its files. Wait for that one to end or "
            f"stop it, or give this run another directory")  # fmt: skip


def _take_over(directory: Path) -> None:
    """Log the record a holder left when it died without letting go (the lock is ours, so it no longer holds it)."""
    left = holder(directory)
    if left is None:
        return
    if left.host != socket.gethostname():
        state = f"on {left.host}: dead, or this filesystem's locks do not reach across machines"
    elif psutil.pid_exists(left.pid):
        state = "gone, its pid reused"
    else:
        state = "dead"
    log.warning("%s: taking over the lock of pid %d (%s), left by %s", directory, left.pid, state, left)


def _write_record(directory: Path, holder: Holder) -> None:
    partial = directory / f"{RECORD}.{os.getpid()}"
    partial.write_text(json.dumps(asdict(holder)))
    partial.replace(directory / RECORD)  # whole or absent for a reader


def _now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")
