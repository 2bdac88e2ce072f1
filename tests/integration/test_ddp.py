"""`train.py ... trainer=ddp_cpu`: two CPU processes (gloo), Lightning starting the Hydra command again for the second.
TreeHop and the reranker each train an epoch: the data's caches are made once, before the second process starts,
and the config's batch is the global one (the same steps per epoch as on one device, the split said at the start)."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT


TREEHOP = ["+model=treehop", "embedder=hashing", "model.datamodule.train.limit=60", "~model.datamodule.open_corpus"]


def run(*overrides: str, run_dir: Path, cache: Path) -> subprocess.CompletedProcess:
    """Progress lines on even under `CI=true`: the reranker test counts the encoding bar's."""
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(cache)), "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline",
           "OMP_NUM_THREADS": "1", "HOPRAG_PROGRESS": "1"}  # fmt: skip
    return subprocess.run([sys.executable, "train.py", *overrides, "trainer=ddp_cpu", "threads=1", "logger=csv",
                           "trainer.max_epochs=1", f"hydra.run.dir={run_dir}"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip


def train(*overrides: str, run_dir: Path, cache: Path) -> subprocess.CompletedProcess:
    proc = run(*overrides, run_dir=run_dir, cache=cache)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert (run_dir / "train_ddp_process_1.log").is_file()  # the second process ran the job in the same run dir
    return proc


def steps_taken(run_dir: Path) -> int:
    return torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["global_step"]


def test_treehop_encodes_once_and_trains_on_the_global_batch(tmp_path):
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    in_batch = "model.module.in_batch_negatives=true"  # not the paper's (+model=treehop_small_data's): its DDP caveat
    out = train(*TREEHOP, "model.datamodule.batch_size=8", in_batch, run_dir=run_dir, cache=cache).stdout
    assert out.count("treehop data: encoded") == 1  # one process encoded; the other read the file
    files = list((cache / "treehop").iterdir())
    assert len(files) == 1 and files[0].match("hashing-*.npz")  # and no temporary is left beside it
    assert "batch 8 trees = 2 devices × 4" in out
    assert "in-batch negatives come from each device's share of the batch (2 devices)" in out
    trees = int(re.search(r"treehop data: (\d+) trees", out).group(1))
    train_trees = trees - max(1, round(0.15 * trees))  # dev_fraction's held-aside trees
    assert steps_taken(run_dir) == math.ceil(train_trees / 8)  # one device's steps at 8 trees a step, not 2 × 8
    assert (run_dir / "export" / "treehop.pt").is_file()


def test_a_batch_the_devices_cannot_share_is_refused_by_every_process(tmp_path):
    proc = run(*TREEHOP, "model.datamodule.batch_size=7", run_dir=tmp_path / "run", cache=tmp_path / "cache")
    assert proc.returncode == 2  # a refusal, and no process left waiting for the other
    refusal = "refused: batch_size=7 trees is the global batch (one step, over all devices) and does not split evenly"
    assert refusal in proc.stderr and "over 2 devices" in proc.stderr


@pytest.mark.real
def test_the_reranker_mines_once_and_trains_on_the_global_batch(tmp_path):
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    proc = train(
        "+model=reranker", "embedder=hashing", "model.datamodule.sources.hotpotqa.limit=6",
        "model.datamodule.sources.twowiki.limit=6", "model.datamodule.sources.musique.limit=6",
        "model.datamodule.held_back=0.34", "model.datamodule.val_pool=4", "model.datamodule.ks=[1,2,4]",
        "model.monitor=val/recall@2", "model.datamodule.bm25_negatives=1", "model.datamodule.dense_negatives=1",
        "model.datamodule.max_length=48", "model.datamodule.groups_per_epoch=4", "model.datamodule.batch_size=2",
        f"paths.cache_dir={cache}", run_dir=run_dir, cache=cache,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert len(re.findall(r"encoding with hashing: (\d+)/\1 passage", out)) == 1  # the dense index, built once
    assert [len(list((cache / "indexes" / kind).iterdir())) for kind in ("bm25", "dense")] == [1, 1]
    assert "batch 2 groups = 2 devices × 1" in out
    assert steps_taken(run_dir) == 2  # groups_per_epoch 4 at 2 groups a step, shared by the two processes
    assert (cache / "rerankers" / "minilm-ce" / "reranker.json").is_file()
