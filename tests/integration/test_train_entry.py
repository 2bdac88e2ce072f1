"""`train.py` as users run it: the model choice, the DDP trainer config, a resume with another lr refused, and
TreeHop trained end to end, killed after its first checkpoint and resumed from `last.ckpt`."""

from __future__ import annotations

import csv
import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate

from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT

# a shrunken TreeHop: 90 questions of the bundled 2Wiki train sample (~57 trees), MiniLM, small widths, no open corpus
SHRUNK = [
    "+model=treehop",
    "threads=1",
    "~logger.wandb",
    "model.datamodule.train.limit=90",
    "~model.datamodule.open_corpus",  # validate over the training pool: the 13k-passage index takes minutes to encode
    "model.datamodule.batch_size=8",
    "model.module.model.gate_dim=64",
    "trainer.max_epochs=3",
    "callbacks.early_stopping.patience=10",
]


def train(*overrides: str, run_dir: Path, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(cache)), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "train.py", *overrides, f"hydra.run.dir={run_dir}"],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_train_without_a_model_lists_the_choices(tmp_path):
    proc = train(run_dir=tmp_path / "run", cache=tmp_path / "cache")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode != 0
    assert "choose a model: +model={" in out and "treehop" in out
    assert not (tmp_path / "run").exists()  # a command that failed before producing anything leaves no folder


def test_a_resume_with_another_lr_is_refused_before_anything_is_built(compose_cfg, tmp_path):
    spec = importlib.util.spec_from_file_location("train_entry", PROJECT_ROOT / "train.py")
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    assert entry.resume_path(compose_cfg("train", SHRUNK)) is None  # the first start records its settings
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"the first run's weights")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    proc = train(*SHRUNK, "model.module.lr=1e-3", run_dir=tmp_path, cache=tmp_path / "cache")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2 and "model.module.lr: saved 6e-05, requested 0.001" in out
    assert "trainer.max_epochs" not in out.split("ResumeRefused")[-1]
    assert {p: p.read_bytes() for p in before} == before and not (tmp_path / ".hydra").exists()


def test_ddp_trainer_composes_with_treehop(compose_cfg):
    cfg = compose_cfg("train", ["+model=treehop", "trainer=ddp"])
    assert cfg.trainer.strategy == "ddp" and cfg.trainer.accelerator == "gpu"
    assert cfg.model.monitor == "val/recall@5_hop2" and cfg.optimized_metric == cfg.model.monitor
    assert callable(instantiate(cfg.model.module.model))


def test_experiment_configs_compose(compose_cfg):
    paper = compose_cfg("train", ["+experiment=treehop_2wiki_bge_m3"])
    assert paper.embedder.name == "bge-m3-title-context" and paper.model.module.lr == 6e-5
    assert paper.model.module.in_batch_negatives is False and paper.model.datamodule.batch_size == 64
    assert instantiate(paper.model.module.model)(dim=1024).config["gate_dim"] == 2048  # 2 × BGE-M3's width
    assert paper.trainer.accelerator == "gpu" and paper.trainer.precision == 32
    settings = compose_cfg("train", ["+experiment=treehop_paper"])
    assert settings.model.module.lr == 6e-5 and settings.embedder.name == "all-MiniLM-L6-v2"
    musique = compose_cfg("train", ["+experiment=treehop_2wiki_musique"])
    assert [d.name for d in musique.model.datamodule.extra] == ["musique_train"]


@pytest.mark.slow
def test_treehop_trains_is_killed_and_resumes_from_last_ckpt(tmp_path):
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    last = run_dir / "checkpoints" / "last.ckpt"
    first = train(*SHRUNK, "trainer.max_epochs=50", run_dir=run_dir, cache=cache)
    deadline = time.time() + 600
    while not last.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    assert last.exists(), first.communicate()[0][-3000:]
    time.sleep(1.0)  # let the save finish
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    killed_at = last.stat().st_mtime
    done = torch.load(last, map_location="cpu", weights_only=False)["epoch"]  # last.ckpt: every finished epoch
    assert list((cache / "treehop").glob("all-MiniLM-L6-v2-*.npz"))  # embeddings are cached for the rerun

    second = train(*SHRUNK, f"trainer.max_epochs={done + 3}", run_dir=run_dir, cache=cache)
    out, _ = second.communicate(timeout=600)
    assert second.returncode == 0, out[-3000:]
    assert f"resuming from {last} after epoch {done} ({done + 1} of {done + 3} epochs done)" in out
    assert "TreeHop: " in out and "parameters" in out
    assert "exported: " in out and "the best val/recall@5_hop2" in out  # what the export scored leads the summary
    assert last.stat().st_mtime > killed_at
    assert (run_dir / "export" / "treehop.pt").is_file()
    rows = [r for r in csv.DictReader(open(run_dir / "csv" / "version_1" / "metrics.csv")) if r["val/recall@5_hop2"]]
    assert rows and int(rows[0]["epoch"]) == done + 1  # the resumed run went on with the epoch in flight
    assert all(0 <= float(r["val/recall@5_hop2"]) <= 100 for r in rows)
