"""`eval.py` run as users run it: the bundled HotpotQA sample, any FlashRAG pair, and the real default LLM."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hoprag.data import QADataset, pool_corpus, write_corpus, write_flashrag
from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT

FIELDS = {
    "id", "method", "question", "prediction", "golds", "gold_titles", "gold_passages", "retrieved", "parse_failed",
    "scores", "cost", "stats", "trace",
}  # fmt: skip


def eval_py(*overrides: str, tmp_path: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")),
           "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    command = [sys.executable, "eval.py", *overrides]
    proc = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_standard_rag_on_hotpotqa_writes_predictions_metrics_and_csv(tmp_path):
    run_dir = tmp_path / "run"
    proc = eval_py(
        "+method=standard_rag", "data=hotpotqa", "limit=20", "retriever=bm25", "llm=scripted", "logger=csv",
        f"hydra.run.dir={run_dir}", tmp_path=tmp_path,
    )  # fmt: skip
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == 20 and len({r["id"] for r in records}) == 20
    assert all(set(r) == FIELDS and len(r["retrieved"]) == 5 for r in records)
    report = json.loads((run_dir / "metrics.json").read_text())
    assert report["run"]["method"] == "standard_rag" and report["run"]["dataset"] == "hotpotqa"
    metrics = report["metrics"]
    assert metrics["n"] == 20 and metrics["cost/mean/llm_calls"] == 1 and metrics["parse_failures"] == 0
    assert metrics["retrieval/passage_recall@5"] > 50  # BM25 on the closed corpus finds most gold passages
    assert 0 < metrics["f1"] < 100  # the scripted LLM answers with the top passage's title
    assert "standard_rag on hotpotqa: 20 questions" in proc.stdout and "predicted:" in proc.stdout
    assert list((run_dir / "csv").rglob("metrics.csv")), "the csv logger wrote nothing"
    assert (run_dir / ".hydra" / "config.yaml").is_file()


def test_a_flashrag_pair_given_on_the_command_line(tmp_path):
    source = QADataset("hotpotqa", "hotpotqa/hotpot_dev_distractor_185.json", format="hotpotqa", limit=8)
    questions = write_flashrag(source.examples, tmp_path / "pair" / "dev.jsonl")
    corpus = write_corpus(pool_corpus(source.examples), tmp_path / "pair" / "corpus.jsonl")
    run_dir = tmp_path / "run"
    eval_py(
        "+method=standard_rag", "data=flashrag", f"data.questions={questions}", f"data.corpus={corpus}",
        "retriever=bm25", "llm=scripted", "~logger", f"hydra.run.dir={run_dir}", tmp_path=tmp_path,
    )  # fmt: skip
    report = json.loads((run_dir / "metrics.json").read_text())
    assert report["run"]["dataset"] == "flashrag" and report["metrics"]["n"] == 8
    assert "retrieval/passage_recall@5" in report["metrics"]  # gold titles survive the FlashRAG round trip

    missing = eval_py(
        "+method=standard_rag", "data=flashrag", "llm=scripted", f"hydra.run.dir={tmp_path / 'missing'}",
        tmp_path=tmp_path, check=False,
    )  # fmt: skip
    assert missing.returncode != 0 and "Missing mandatory value: data.questions" in missing.stderr
    assert not (tmp_path / "missing").exists()  # nothing produced: no run folder left behind


def test_a_rerun_with_another_k_is_refused_and_the_run_directory_kept(tmp_path):
    run_dir = tmp_path / "run"
    args = ["+method=standard_rag", "data=hotpotqa", "limit=4", "retriever=bm25", "llm=scripted", "~logger",
            f"hydra.run.dir={run_dir}"]  # fmt: skip
    eval_py(*args, tmp_path=tmp_path)
    assert "limit=4" in (run_dir / ".hydra" / "overrides.yaml").read_text()
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in run_dir.rglob("*") if p.is_file()}
    assert {"predictions.jsonl", "metrics.json", "run_fingerprint.json"} <= {p.name for p in before}

    refused = eval_py(*args, "method.k=3", "batch_size=2", tmp_path=tmp_path, check=False)
    assert refused.returncode == 2 and "method.k: saved 5, requested 3" in refused.stderr
    assert "batch_size" not in refused.stderr.split("ResumeRefused")[-1]  # run control may change
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in run_dir.rglob("*") if p.is_file()}
    assert after == before  # predictions, metrics, fingerprint and .hydra/ as they were


def test_no_method_stops_with_the_choices(tmp_path):
    proc = eval_py("llm=scripted", "~logger", f"hydra.run.dir={tmp_path / 'run'}", tmp_path=tmp_path, check=False)
    assert proc.returncode == 1
    choices = ",".join(sorted(p.stem for p in (PROJECT_ROOT / "conf" / "method").glob("*.yaml")))
    assert f"choose a method: +method={{{choices}}}" in proc.stderr and "standard_rag" in choices


def test_a_random_sample_of_questions_is_recorded_with_the_run(tmp_path):
    run_dir = tmp_path / "run"
    eval_py("+method=no_retrieval", "llm=scripted", "~logger", "data.sample=4", "data.seed=3",
            f"hydra.run.dir={run_dir}", tmp_path=tmp_path)  # fmt: skip
    report = json.loads((run_dir / "metrics.json").read_text())
    ids = [json.loads(line)["id"] for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert report["run"]["sample"] == {"n": 4, "seed": 3, "ids": ids} and len(ids) == 4


def test_nonsensical_numbers_are_refused_at_start_naming_the_key(tmp_path):
    run_dir = tmp_path / "run"
    proc = eval_py("+method=standard_rag", "llm=scripted", "~logger", "method.k=0", "batch_size=0",
                   f"hydra.run.dir={run_dir}", tmp_path=tmp_path, check=False)  # fmt: skip
    assert proc.returncode == 2
    assert "method.k=0 must be an integer >= 1" in proc.stderr and "batch_size=0" in proc.stderr
    assert not (run_dir / "predictions.jsonl").exists()


def test_main_returns_the_optimized_metric(compose_cfg, tmp_path):
    spec = importlib.util.spec_from_file_location("eval_entry", PROJECT_ROOT / "eval.py")
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    overrides = ["+method=no_retrieval", "llm=scripted", "limit=4", "~logger", "optimized_metric=acc", "show=0"]
    cfg = compose_cfg("eval", overrides)
    value = entry.main.__wrapped__(cfg)
    assert value == json.loads((tmp_path / "metrics.json").read_text())["metrics"]["acc"]


@pytest.mark.real
def test_standard_rag_with_the_real_default_llm(tmp_path):
    if not (PROJECT_ROOT / "conf" / "llm" / "smollm2.yaml").is_file():
        pytest.skip("conf/llm/smollm2.yaml (the real default LLM) is not there yet")
    run_dir = tmp_path / "run"
    eval_py(
        "+method=standard_rag", "data=hotpotqa", "limit=4", "retriever=bm25", "llm=smollm2", "~logger",
        f"hydra.run.dir={run_dir}", tmp_path=tmp_path,
    )  # fmt: skip
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert len(records) == 4
    assert all(r["cost"]["completion_tokens"] > 0 and r["cost"]["prompt_tokens"] > 100 for r in records)
    assert sum(bool(r["prediction"]) for r in records) >= 3  # SmolLM2 says something answer-like
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    assert metrics["n"] == 4 and "f1" in metrics
