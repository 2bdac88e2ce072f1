"""Two `eval.py` on one run directory: the second is refused at once, naming the first, and changes nothing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from hoprag.paths import PROJECT_ROOT
from hoprag.utils import run_lock

RUN = ["+method=no_retrieval", "llm=scripted", "data=hotpotqa", "show=0", "logger=csv"]


def eval_py(run, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, "eval.py", *RUN, *args, f"hydra.run.dir={run}",
                           f"paths.cache_dir={run.parent / 'cache'}"], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def files(run) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in run.rglob("*") if p.is_file()}


def test_a_second_eval_on_a_held_run_directory_is_refused_and_changes_nothing(tmp_path):
    run = tmp_path / "run"
    first = eval_py(run, "limit=1")
    assert first.returncode == 0, first.stderr[-2000:]
    before = files(run)
    with run_lock.hold(run, "eval.py"):  # the first writer, still at work
        second = eval_py(run, "limit=2")
        held = files(run)
    assert second.returncode == 2, second.stderr[-2000:]
    refusal = second.stderr.strip().splitlines()[-2]
    assert refusal.startswith(f"refused: {run} is in use by eval.py (pid {os.getpid()} on {socket.gethostname()}, ")
    assert held.pop(run_lock.RECORD) and held == before and files(run) == before
    predictions = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    metrics = json.loads((run / "metrics.json").read_text())
    assert len(predictions) == len({p["id"] for p in predictions}) == metrics["run"]["n"] == 1
