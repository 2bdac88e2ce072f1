"""The paper presets that retrieve from wiki-18 name it, and without it stop before anything, naming the download."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT

WIKI18 = "retrieval-corpus/wiki18_100w.jsonl"


@pytest.mark.parametrize("experiment", ["prunerag_paper", "treerare_paper"])
def test_a_paper_preset_names_wiki18(compose_cfg, experiment):
    cfg = compose_cfg("eval", [f"+experiment={experiment}", "data=2wiki"])
    assert cfg.data.corpus == WIKI18 and cfg.data.index_dir == cfg.paths.index_dir  # read through its store
    assert compose_cfg("eval", [f"+experiment={experiment}", "data.corpus=null"]).data.corpus is None


def test_treerare_paper_without_wiki18_stops_naming_what_to_download_and_where(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")),
           "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    command = [sys.executable, "eval.py", "+experiment=treerare_paper", "data=hotpotqa", "limit=2", "llm=scripted",
               "~logger", f"hydra.run.dir={run_dir}"]  # fmt: skip
    proc = subprocess.run(command, check=False, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert f"{WIKI18} does not exist" in proc.stderr
    assert "hf download RUC-NLPIR/FlashRAG_datasets retrieval-corpus/wiki18_100w.zip" in proc.stderr
    assert not (run_dir / "predictions.jsonl").exists()
