"""One job per GPU group when several jobs run at once on one machine (`gpus_per_job`).

Hydra's joblib launcher runs a multirun's jobs in a pool of worker processes, all of which would otherwise see
every GPU and start their engines on GPU 0. With `gpus_per_job=N`, the visible GPUs are cut into groups of N
and each worker claims a free group before its first job (an exclusive `flock` on a lock file per group, which
the kernel drops when the process ends) and sets `CUDA_VISIBLE_DEVICES` to it, before anything starts CUDA.
A worker keeps its group while it lives, because CUDA reads `CUDA_VISIBLE_DEVICES` once per process; a worker
that never started CUDA gives its group back when its job ends. Independent `eval.py` processes with the same
setting share out the GPUs the same way. The Hydra callback `GPUSlots` (conf/hydra/default.yaml) does this;
without `gpus_per_job` it does nothing."""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)

SLOT = "HOPRAG_GPU_SLOT"  # the group this process holds, e.g. "2,3"
_held: dict[str, Any] = {}  # the open lock file and the CUDA_VISIBLE_DEVICES it replaced


def visible_gpus() -> list[str]:
    """The GPUs this process may use: `CUDA_VISIBLE_DEVICES` when set, else every GPU `nvidia-smi` lists."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g.strip() for g in given.split(",") if g.strip() and g.strip() != "-1"]
    try:
        listed = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                                text=True, timeout=30, check=True).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listed.splitlines() if line.strip()]


def groups(gpus: list[str], per_job: int) -> list[list[str]]:
    """Consecutive groups of `per_job` GPUs (tensor parallelism wants neighbours); a remainder is left idle."""
    if not isinstance(per_job, int) or isinstance(per_job, bool) or per_job < 1:
        raise ValueError(f"gpus_per_job={per_job!r} must be an integer >= 1 (or null: every job sees every GPU)")
    if len(gpus) < per_job:
        raise RuntimeError(f"gpus_per_job={per_job}, but {len(gpus)} GPU(s) are visible ({','.join(gpus) or 'none'})")
    return [gpus[i : i + per_job] for i in range(0, len(gpus) - per_job + 1, per_job)]


def lock_dir() -> Path:
    """Per machine and user: the locks guard this machine's GPUs."""
    return Path(os.environ.get("HOPRAG_GPU_LOCKS", Path(tempfile.gettempdir()) / f"hoprag-gpu-slots-{os.getuid()}"))


def claim(per_job: int, wait: float = 600.0, poll: float = 1.0) -> list[str]:
    """The GPU group this process runs on, claimed on first call (waiting up to `wait` seconds for one to free)."""
    if os.environ.get(SLOT):
        return os.environ[SLOT].split(",")
    candidates = groups(visible_gpus(), per_job)
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    deadline, said = time.monotonic() + wait, False
    while True:
        for group in candidates:
            handle = open(folder / f"gpus-{'-'.join(group)}.lock", "a+")  # noqa: SIM115 (held while the process lives)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            handle.truncate(0)
            handle.write(f"pid {os.getpid()}\n")
            handle.flush()
            _held.update(handle=handle, previous=os.environ.get("CUDA_VISIBLE_DEVICES"))
            os.environ["CUDA_VISIBLE_DEVICES"] = os.environ[SLOT] = ",".join(group)
            log.info("GPUs %s for this job (%d groups of %d; pid %d)", ",".join(group), len(candidates), per_job,
                     os.getpid())  # fmt: skip
            return group
        if time.monotonic() > deadline:
            raise RuntimeError(f"no free group of {per_job} GPU(s) in {wait:.0f} s: every one of the {len(candidates)} "
                               f"is held by another process (lock files in {folder})")  # fmt: skip
        if not said:
            log.info("waiting for a free group of %d GPU(s) (all %d held)", per_job, len(candidates))
            said = True
        time.sleep(poll)


def release_unless_cuda_started() -> bool:
    """Give the group back when this process never started CUDA (a later job may then run on any group); a
    process that did keeps it, since its CUDA context is bound to those devices. Whether it was given back."""
    torch = sys.modules.get("torch")
    if not _held or (torch is not None and torch.cuda.is_initialized()):
        return False
    handle = _held.pop("handle")
    previous = _held.pop("previous")
    fcntl.flock(handle, fcntl.LOCK_UN)
    handle.close()
    os.environ.pop(SLOT, None)
    if previous is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = previous
    return True


class GPUSlots(Callback):
    """Hydra callback: with `gpus_per_job` set, each job claims a GPU group in the process that runs it.
    `claims` false for a driver that runs no model itself (reproduce.py): it passes `gpus_per_job` on to its
    rows' runs, which would otherwise inherit its claimed group and all run on it."""

    def __init__(self, gpus_per_job: int | None = None, claims: bool = True) -> None:
        self.gpus_per_job = gpus_per_job
        self.claims = claims

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        """Refuse a pool with more workers than GPU groups before any job starts (the rest would only wait)."""
        if self.gpus_per_job is None:
            return
        n_jobs = config.hydra.launcher.get("n_jobs")
        if isinstance(n_jobs, int) and n_jobs < 0:  # joblib's convention: -1 is one worker per CPU
            n_jobs = (os.cpu_count() or 1) + 1 + n_jobs
        available = groups(visible_gpus(), self.gpus_per_job)
        if isinstance(n_jobs, int) and n_jobs > len(available):
            raise ValueError(f"hydra.launcher.n_jobs={n_jobs} workers, but gpus_per_job={self.gpus_per_job} makes "
                             f"{len(available)} GPU group(s): set n_jobs={len(available)}")  # fmt: skip

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        """The job's own setting decides: a sweeper may give it per job (reproduce.py's rows), which the
        callback, made once for the whole multirun, never sees."""
        per_job = OmegaConf.select(config, "gpus_per_job", default=self.gpus_per_job)
        if per_job is not None and self.claims:
            claim(per_job)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        release_unless_cuda_started()
