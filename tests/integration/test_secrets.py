"""Secrets never leave the process (issue 27, item 8): a fake API key given on the command line is in no file
that an evaluation, a sweep, a training run or a compare report writes (.hydra/, multirun.yaml, fingerprints,
CSV hparams, wandb's offline runs, logs, caches), nor in what they print."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from hoprag.compare import main as compare_main
from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT

KEY = "sk-FAKE-7c41d2e9"  # a judge's API key, inside a dict override
TOKEN = "hf_FAKE-0b5a93"  # a top-level token no component reads
JUDGE = (
    "+metrics.crag_judge={_target_:hoprag.evaluation.judges.LLMJudge,"
    f"llm:{{_target_:hoprag.llm.OpenAICompatLLM,model:gpt-3.5-turbo,api_key:{KEY}}}}}"
)
EVAL = ["llm=scripted", "limit=2", "show=0", JUDGE, f"+hf_token={TOKEN}"]
HASH_EMBEDDER = ["embedder._target_=tests.fakes.HashEmbedder", "embedder.name=hash-bow", "++embedder.dim=256",
                 "~embedder.model", "~embedder.device", "~embedder.max_length"]  # fmt: skip


def launch(script: str, *overrides: str, tmp_path: Path) -> str:
    """Run an entry point as users do; its stdout and stderr."""
    wandb = str(tmp_path / "wandb_home")
    env = {
        **os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true", "OMP_NUM_THREADS": "1",
        "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")), "WANDB_DIR": wandb, "WANDB_DATA_DIR": wandb,
        "WANDB_CACHE_DIR": wandb, "WANDB_CONFIG_DIR": wandb,
    }  # fmt: skip
    command = [sys.executable, script, *overrides]
    proc = subprocess.run(command, check=False, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def holding_secrets(root: Path) -> list[str]:
    """The files under `root` whose bytes hold either fake secret."""
    return [str(p) for p in root.rglob("*") if p.is_file() and any(s.encode() in p.read_bytes() for s in (KEY, TOKEN))]


def test_a_key_on_the_command_line_is_in_no_file_of_a_run_a_sweep_a_training_run_or_a_compare_report(tmp_path):
    (tmp_path / "wandb_home").mkdir()
    printed = [
        launch("eval.py", "+method=no_retrieval", *EVAL, "logger=csv", f"hydra.run.dir={tmp_path / 'run'}",
               tmp_path=tmp_path),
        launch("eval.py", "-m", "+method=no_retrieval", "+llm.default.seed=1,2", *EVAL,
               f"hydra.sweep.dir={tmp_path / 'sweep'}", tmp_path=tmp_path),
        launch("train.py", "+model=router_classifier", *HASH_EMBEDDER, "threads=1", "+trainer.fast_dev_run=true",
               f"+openai_api_key={KEY}", f"hydra.run.dir={tmp_path / 'train'}", tmp_path=tmp_path),
    ]  # fmt: skip
    assert compare_main([str(tmp_path / "run"), str(tmp_path / "sweep"), "--out", str(tmp_path / "report"),
                         "--resamples", "50"]) == 0  # fmt: skip

    assert list((tmp_path / "sweep").glob("*/wandb/offline-run-*/run-*.wandb")), "the sweep logged to wandb"
    assert (tmp_path / "sweep" / "multirun.yaml").is_file() and (tmp_path / "train" / "csv").is_dir()
    assert holding_secrets(tmp_path) == []
    assert not [text for text in printed if KEY in text or TOKEN in text]
    # what was given stays visible, redacted; the fingerprint has no key at all
    config = yaml.safe_load((tmp_path / "run" / ".hydra" / "config.yaml").read_text())
    assert config["metrics"]["crag_judge"]["llm"]["api_key"] == "***" and config["hf_token"] == "***"
    assert "+hf_token=***" in yaml.safe_load((tmp_path / "run" / ".hydra" / "overrides.yaml").read_text())
    assert "api_key" not in (tmp_path / "run" / "run_fingerprint.json").read_text()
