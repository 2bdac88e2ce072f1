"""`train.py` run for 2 epochs, then rerun in the same run directory for 4 (a larger max_epochs extends a run, as
after a kill): `last.ckpt` holds the last finished epoch, the resume says after which epoch it goes on, and the
closing summary's exported epoch and figures are the exported model's, though that epoch came before the resume.

The monitored metric is `q − c`'s recall, which no training changes: the best checkpoint stays epoch 0's (a tie
keeps the first), so the export differs from the last epoch's weights and its epoch comes before the resume. Every
trainer's config (conf/model/*.yaml) saves its last state the same way."""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT

MONITOR = "val/qc_recall@5_hop2"
TREEHOP = [
    "+model=treehop", "embedder=hashing", "threads=1", "~logger.wandb", "model.datamodule.train.limit=60",
    "~model.datamodule.open_corpus", "model.datamodule.batch_size=8", "model.module.model.gate_dim=64",
    f"model.monitor={MONITOR}", "callbacks.early_stopping.patience=10",
]  # fmt: skip


def train(max_epochs: int, run_dir: Path) -> str:
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(run_dir.parent / "cache")),
           "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "train.py", *TREEHOP, f"trainer.max_epochs={max_epochs}", f"hydra.run.dir={run_dir}"]
    proc = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return proc.stdout


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


@pytest.fixture(scope="module")
def resumed(tmp_path_factory):
    """The run directory, the first run's `last.ckpt`, and the second run's output."""
    run_dir = tmp_path_factory.mktemp("resume") / "run"
    train(2, run_dir)
    first_last = load(run_dir / "checkpoints" / "last.ckpt")
    return run_dir, first_last, train(4, run_dir)


def test_last_ckpt_holds_the_last_finished_epoch(resumed):
    run_dir, first_last, _ = resumed
    best = load(run_dir / "checkpoints" / "epoch_000.ckpt")
    assert best["epoch"] == 0  # the best, kept apart
    assert first_last["epoch"] == 1 and first_last["global_step"] == 2 * best["global_step"]
    assert load(run_dir / "checkpoints" / "last.ckpt")["epoch"] == 3
    resumed_rows = list(csv.DictReader(open(run_dir / "csv" / "version_1" / "metrics.csv")))
    assert min(int(r["epoch"]) for r in resumed_rows if r["epoch"]) == 2  # epoch 1 was not trained again


def test_the_resume_names_the_epoch_it_goes_on_after_and_the_best_so_far(resumed):
    run_dir, _, out = resumed
    states = load(run_dir / "checkpoints" / "epoch_000.ckpt")["callbacks"].values()
    score = next(float(s["best_model_score"]) for s in states if s.get("monitor") == MONITOR)
    last = run_dir / "checkpoints" / "last.ckpt"
    expected = f"resuming from {last} after epoch 1 (2 of 4 epochs done), best {MONITOR} {score:.4f} at epoch 0"
    assert expected in out.splitlines()


def test_the_summary_names_the_exported_epoch_and_its_figures(resumed):
    run_dir, _, out = resumed
    assert f"exported: epoch 0, the best {MONITOR} of 4 epochs" in out
    header = next(re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.split()[:1] == ["metric"])
    assert header == ["metric", "untrained", "exported (epoch 0)", "last (epoch 3)"]  # the untrained start kept too
    shown = {line.split()[0]: line.split()[2] for line in out.splitlines() if line.startswith("  val/")}
    rows = csv.DictReader(open(run_dir / "csv" / "version_0" / "metrics.csv"))
    logged = next(r for r in rows if r["epoch"] == "0" and r[MONITOR])  # the first run's epoch 0, before the resume
    assert shown and shown == {key: f"{float(logged[key]):.4f}" for key in shown}

    exported = load(run_dir / "export" / "treehop.pt")["state_dict"]
    best = load(run_dir / "checkpoints" / "epoch_000.ckpt")["state_dict"]
    last = load(run_dir / "checkpoints" / "last.ckpt")["state_dict"]
    assert all(torch.equal(value, best[f"model.{key}"]) for key, value in exported.items())
    assert not all(torch.equal(value, last[f"model.{key}"]) for key, value in exported.items())  # not the last epoch's
    assert f"exported best weights (epoch 0) to {run_dir / 'export'}" in out  # the export's own line names it too


@pytest.mark.parametrize("model", sorted(p.stem for p in (PROJECT_ROOT / "conf" / "model").glob("*.yaml")))
def test_every_trainer_saves_its_last_state_every_epoch_beside_its_best(compose_cfg, model):
    callbacks = compose_cfg("train", [f"+model={model}"]).callbacks
    best, last = callbacks.model_checkpoint, callbacks.last_checkpoint
    assert best.monitor and not best.get("save_last")  # Lightning's save_last: only when the best improves
    assert last.get("monitor") is None and last.filename == "last" and last.dirpath == best.dirpath
