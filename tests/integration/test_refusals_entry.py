"""Settings that would lose a run are refused before anything is read or deleted, in a few lines, and nothing a
refused or failed run prints holds a secret (the entry points as a user runs them)."""

from __future__ import annotations

import os
import subprocess
import sys

from hoprag.paths import PROJECT_ROOT

SECRET = "sk-FAKE0123456789abcdef"
RUN = ["+method=no_retrieval", "llm=scripted", "data=hotpotqa", "limit=1", "show=0", "logger=csv"]


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run([sys.executable, script, *args], cwd=PROJECT_ROOT, env=env, capture_output=True,
                          text=True, timeout=600)  # fmt: skip


def test_overwrite_no_is_refused_before_a_finished_run_is_touched(tmp_path):
    run = tmp_path / "run"
    done = _run("eval.py", *RUN, f"hydra.run.dir={run}", f"paths.cache_dir={tmp_path / 'cache'}")
    assert done.returncode == 0, done.stderr[-2000:]
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    refused = _run("eval.py", *RUN[:2], "data=2wiki", "limit=1", "overwrite=no", f"hydra.run.dir={run}")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-2:] == [
        "refused: invalid config: overwrite='no' must be true or false", "(HYDRA_FULL_ERROR=1 shows the traceback)"]
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_reproduce_refuses_a_string_for_a_boolean_and_a_key_it_does_not_have(tmp_path):
    out = f"out_dir={tmp_path / 'table'}"
    refused = _run("reproduce.py", "table=sc_rag_t3", "overwrite=no", out)
    assert refused.returncode == 2 and "overwrite='no' must be true or false" in refused.stderr
    unknown = _run("reproduce.py", "table=sc_rag_t3", f"+llm.api_key={SECRET}", out)
    assert unknown.returncode == 2 and "reproduce has no setting llm.api_key" in unknown.stderr
    assert SECRET not in unknown.stdout + unknown.stderr and not (tmp_path / "table" / "jobs.json").exists()


def test_a_failed_run_prints_no_secret_in_hydras_error_line(tmp_path):
    failed = _run("eval.py", "+method=no_retrieval", "llm=openai", f"llm.api_key={SECRET}", "llm.timeout=-1",
                  "data=hotpotqa", "limit=1", f"hydra.run.dir={tmp_path / 'run'}")  # fmt: skip
    assert failed.returncode == 1 and "Error executing job with overrides" in failed.stderr
    assert "llm.api_key=***" in failed.stderr and SECRET not in failed.stdout + failed.stderr
