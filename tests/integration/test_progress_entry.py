"""Issue 27 item 7 as users meet it: `eval.py` piped into a log prints plain progress lines (questions, LLM calls,
tokens), and `progress=false` prints none. The scripted LLM on two bundled HotpotQA questions."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT


@pytest.mark.parametrize("setting", ["auto", "false"])
def test_a_piped_eval_shows_progress_lines_unless_progress_is_false(tmp_path, setting):
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")),
           "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    env.pop("CI", None)
    env.pop("HOPRAG_PROGRESS", None)
    command = [sys.executable, "eval.py", "+method=no_retrieval", "llm=scripted", "data=hotpotqa", "limit=2",
               "~logger", f"hydra.run.dir={tmp_path / 'run'}", f"progress={setting}"]  # fmt: skip
    proc = subprocess.run(command, check=False, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if setting == "false":
        assert proc.stderr == ""
    else:  # stderr is a pipe: lines, no carriage returns; the last one with the run's LLM calls and tokens
        assert "\r" not in proc.stderr
        assert proc.stderr.splitlines()[-1].startswith("no_retrieval: 2/2 q")
        assert "llm_calls=2, tokens=" in proc.stderr.splitlines()[-1]
