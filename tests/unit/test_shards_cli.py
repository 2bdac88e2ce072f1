"""`python build_index.py` with shards: a worker's share, the rest + merge, a no-op rerun."""

from __future__ import annotations

import os
import subprocess
import sys

from hoprag.data import QADataset
from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import DenseRetriever
from hoprag.retrieval.embedders import HashingEmbedder

ARGS = ["data=musique", "retriever=dense", "embedder=hashing", "shards.size=1000"]


def build_index(tmp_path, *overrides: str) -> str:
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "build_index.py", *ARGS, *overrides, f"hydra.run.dir={tmp_path / 'run'}"],
        check=False,
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_a_worker_encodes_its_shards_and_the_next_build_resumes_merges_then_stops(tmp_path):
    worker = build_index(tmp_path, "shard=0/2")
    assert "DenseRetriever index encoded (this worker's shards)" in worker and "2 shards still missing" in worker
    shard_dir = next((tmp_path / "cache" / "indexes" / "dense-shards").iterdir())
    assert sorted(p.name for p in shard_dir.glob("*.npy")) == ["shard-00000.npy", "shard-00001.npy"]

    rest = build_index(tmp_path)
    assert "resuming at shard 2: 2 of 4 shards already encoded" in rest and "DenseRetriever index built" in rest
    assert "DenseRetriever index already in cache" in build_index(tmp_path)

    corpus = QADataset(name="musique", questions="musique/musique_ans_dev_200.jsonl", format="musique").corpus()
    retriever = DenseRetriever(corpus, HashingEmbedder(), cache_dir=str(tmp_path / "cache" / "indexes"))
    assert retriever.from_cache and retriever.index.ntotal == 3141
