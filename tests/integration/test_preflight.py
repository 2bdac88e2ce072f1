"""Nothing is written or removed before the preflight passes (issue 27, §2): `limit=0` is refused at config check,
and `overwrite=true` deletes nothing until the data, the config and the LLM's capability probe have passed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hoprag.data import QADataset
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.llm.gguf import share_conversions
from hoprag.methods import ChatPrompt, NoRetrieval
from hoprag.methods.base import MissingCapability
from hoprag.paths import PROJECT_ROOT


def eval_py(*overrides: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "eval.py", *overrides, "~logger", "show=0"]
    return subprocess.run(command, check=False, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)


def files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def test_limit_zero_is_refused_before_anything_is_written(tmp_path):
    run_dir = tmp_path / "run"
    proc = eval_py("+method=no_retrieval", "llm=scripted", "limit=0", f"hydra.run.dir={run_dir}", tmp_path=tmp_path)
    assert proc.returncode == 2 and "limit=0 must be an integer >= 1 or null" in proc.stderr
    assert not run_dir.exists()  # not even Hydra's empty job log: a refused run leaves no folder behind


def test_overwrite_leaves_the_old_run_as_it_was_when_the_llm_probe_fails(tmp_path):
    run_dir = tmp_path / "run"
    first = eval_py("+method=no_retrieval", "llm=scripted", "limit=2", f"hydra.run.dir={run_dir}", tmp_path=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    before = files(run_dir)
    assert {"predictions.jsonl", "metrics.json", "run_fingerprint.json", ".hydra/config.yaml"} <= before.keys()

    with socket.socket() as closed:  # a port that refuses connections: the server is down
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        rerun = eval_py("+method=no_retrieval", "llm=openai", f"llm.base_url={url}", "llm.max_retries=0", "limit=2",
                        "overwrite=true", f"hydra.run.dir={run_dir}", tmp_path=tmp_path)  # fmt: skip
    assert rerun.returncode == 2 and "cannot reach the OpenAI-compatible server" in rerun.stderr
    assert files(run_dir) == before  # predictions, metrics, fingerprint and .hydra/ byte for byte


def test_the_runner_probes_before_it_removes_or_writes_anything(tmp_path):
    dataset = QADataset("hotpotqa", "hotpotqa/hotpot_dev_distractor_185.json", format="hotpotqa", limit=3)
    method = NoRetrieval(ScriptedLLM(), prompt=ChatPrompt("Answer.", "{question}"))
    run(method, dataset.examples, tmp_path, fingerprint={"llm": "scripted"})
    before = files(tmp_path)

    def no_logprobs() -> None:
        raise MissingCapability("no_retrieval needs ['logprobs'] from a server without them")

    method.check_capabilities = no_logprobs
    started = []
    with pytest.raises(MissingCapability):
        run(method, dataset.examples, tmp_path, overwrite=True, fingerprint={"llm": "served"},
            on_start=lambda: started.append(True))  # fmt: skip
    assert files(tmp_path) == before and not started
