"""A real `kill -9` of `eval.py` midway, then a rerun in the same run directory: nothing lost or repeated."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT

N = 10


def command(run_dir: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "eval.py", "+method=standard_rag", "data=hotpotqa", f"limit={N}", "batch_size=2",
        "retriever=bm25", "llm=scripted", "~logger", f"hydra.run.dir={run_dir}", *extra,
    ]  # fmt: skip


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def metrics_of(run_dir: Path) -> dict:
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    return {k: v for k, v in metrics.items() if "seconds" not in k}


def test_sigkill_midway_then_rerun_gives_every_question_once(tmp_path):
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")), "HF_HUB_OFFLINE": "1"}
    slow = command(tmp_path / "killed", "llm.delay=0.4")
    predictions = tmp_path / "killed" / "predictions.jsonl"

    proc = subprocess.Popen(slow, cwd=PROJECT_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while not lines(predictions) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        _, stderr = proc.communicate()
    assert proc.returncode == -signal.SIGKILL, stderr.decode()[-2000:]
    assert 1 <= len(lines(predictions)) < N
    assert not (tmp_path / "killed" / "metrics.json").exists()

    subprocess.run(slow, cwd=PROJECT_ROOT, env=env, check=True, capture_output=True)
    ids = [json.loads(line)["id"] for line in lines(predictions)]
    assert len(ids) == N and len(set(ids)) == N

    subprocess.run(command(tmp_path / "whole"), cwd=PROJECT_ROOT, env=env, check=True, capture_output=True)
    assert metrics_of(tmp_path / "killed") == metrics_of(tmp_path / "whole")
    whole_ids = [json.loads(line)["id"] for line in lines(tmp_path / "whole" / "predictions.jsonl")]
    assert ids == whole_ids
