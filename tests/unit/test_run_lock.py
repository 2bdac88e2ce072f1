"""One writer per directory (`hoprag.utils.run_lock`): a second process is refused at once naming the holder, a
killed holder's record is taken over, a held directory is never removed as an empty run."""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import subprocess
import sys

import pytest
from filelock import FileLock

from hoprag.utils import run_lock
from hoprag.utils.run_dirs import remove_if_empty

TRY_HOLD = "import sys\nfrom hoprag.utils import run_lock\nwith run_lock.hold(sys.argv[1], 'second'): pass"


def dead_pid() -> int:
    finished = subprocess.Popen([sys.executable, "-c", ""])
    finished.wait()
    return finished.pid


def record(directory, pid: int) -> None:
    held = {"what": "eval.py", "pid": pid, "host": socket.gethostname(), "started": "2026-01-01T00:00:00+00:00"}
    (directory / run_lock.RECORD).write_text(json.dumps(held))


def test_a_second_process_is_refused_at_once_naming_the_holder_then_the_lock_is_free(tmp_path):
    with run_lock.hold(tmp_path, "eval.py"):
        second = subprocess.run([sys.executable, "-c", TRY_HOLD, str(tmp_path)], capture_output=True, text=True,
                                timeout=60)  # fmt: skip
        holder = f"eval.py (pid {os.getpid()} on {socket.gethostname()}, started "
        assert second.returncode == 1 and f"DirectoryInUse: {tmp_path} is in use by {holder}" in second.stderr
    assert {p.name for p in tmp_path.iterdir()} == {run_lock.LOCK}  # the record goes with the holder
    again = subprocess.run([sys.executable, "-c", TRY_HOLD, str(tmp_path)], capture_output=True, timeout=60)
    assert again.returncode == 0, again.stderr


def test_a_dead_holders_record_is_taken_over_with_a_log_line(tmp_path, caplog):
    pid = dead_pid()
    record(tmp_path, pid)  # a run killed outright: the kernel freed its lock, its record stayed
    with caplog.at_level(logging.WARNING, logger=run_lock.__name__), run_lock.hold(tmp_path, "eval.py"):
        assert run_lock.holder(tmp_path).pid == os.getpid()
    assert f"taking over the lock of pid {pid} (dead)" in caplog.text


def test_a_lock_kept_by_a_dead_holders_child_says_so(tmp_path):
    with run_lock.hold(tmp_path, "eval.py"):
        record(tmp_path, dead_pid())  # as if the holder died and a process it forked kept the lock
        with pytest.raises(run_lock.DirectoryInUse, match="which has exited; `fuser .*hoprag.lock` names it"):
            with run_lock.hold(tmp_path, "eval.py"):
                pass


def test_a_held_directory_is_not_removed_as_an_empty_run_but_a_released_one_is(tmp_path):
    run = tmp_path / "run"
    with run_lock.hold(run, "eval.py"):
        (run / "eval.log").write_text("")
        assert not remove_if_empty(run)  # a refused second process must not remove the holder's directory
    assert remove_if_empty(run) and not run.exists()  # the lock file alone is bookkeeping


def test_a_filesystem_without_flock_runs_unlocked_with_a_warning(tmp_path, monkeypatch, caplog):
    def no_flock(self, *args, **kwargs):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(FileLock, "acquire", no_flock)
    with caplog.at_level(logging.WARNING, logger=run_lock.__name__), run_lock.hold(tmp_path, "eval.py"):
        pass
    assert "is not locked (its filesystem has no flock): start no second eval.py on it" in caplog.text
