"""The index-building and retrieval-evaluation entry points, run as users run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT


def run_entry(script: str, *overrides: str, cache: Path, run_dir: Path) -> str:
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(cache)), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, script, *overrides, f"hydra.run.dir={run_dir}"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_build_index_builds_once_then_reuses_the_cache(tmp_path):
    args = ("data=musique", "retriever=bm25")
    first = run_entry("build_index.py", *args, cache=tmp_path / "cache", run_dir=tmp_path / "r1")
    assert "corpus of musique: 3141 passages" in first
    assert "BM25Retriever index built" in first
    index_dirs = list((tmp_path / "cache" / "indexes" / "bm25").iterdir())
    assert len(index_dirs) == 1 and (index_dirs[0] / "manifest.json").is_file()

    second = run_entry("build_index.py", *args, cache=tmp_path / "cache", run_dir=tmp_path / "r2")
    assert "BM25Retriever index already in cache" in second

    forced = run_entry("build_index.py", *args, "force=true", cache=tmp_path / "cache", run_dir=tmp_path / "r3")
    assert "BM25Retriever index built" in forced


def test_eval_retrieval_writes_metrics_json(tmp_path):
    out = run_entry(
        "eval_retrieval.py",
        "data=2wiki",
        "limit=30",
        "~retrievers.dense",
        "~retrievers.rrf",
        "logger=csv",
        cache=tmp_path / "cache",
        run_dir=tmp_path / "run",
    )
    report = json.loads((tmp_path / "run" / "retrieval_metrics.json").read_text())
    assert report["questions"] == 30 and report["corpus_passages"] == 1249  # the whole closed corpus
    bm25 = report["results"]["bm25"]
    assert 0 < bm25["retrieval/passage_recall@2"] <= bm25["retrieval/passage_recall@5"] <= bm25["retrieval/passage_recall@10"]
    assert "bm25" in out and "P@10" in out  # the printed table
    assert list((tmp_path / "run" / "csv").rglob("metrics.csv")), "the csv logger wrote nothing"


@pytest.mark.slow
def test_demo_dense_bm25_rrf_on_hotpotqa_with_minilm(tmp_path):
    """The demo's job on a slice of the bundled HotpotQA sample, real MiniLM embeddings."""
    run_entry("eval_retrieval.py", "data=hotpotqa", "limit=40", cache=tmp_path / "cache", run_dir=tmp_path / "run")
    report = json.loads((tmp_path / "run" / "retrieval_metrics.json").read_text())
    results = report["results"]
    assert set(results) == {"dense", "bm25", "rrf"}
    for metrics in results.values():
        assert metrics["retrieval/passage_recall@10"] >= 60.0  # every retriever finds most gold passages
    assert results["dense"]["index/build_seconds"] > 0 and not results["dense"]["index/from_cache"]


def test_compare_runs_from_the_root_and_names_what_it_could_not_read(tmp_path):
    proc = subprocess.run(
        [sys.executable, "compare.py", str(tmp_path / "nowhere")], cwd=PROJECT_ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert f"error: {tmp_path / 'nowhere'}: no run directory, multirun directory or glob match" in proc.stderr
