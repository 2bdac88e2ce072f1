"""PruneRAG end to end on the bundled HotpotQA sample: real questions, real BM25 retrieval, scripted LLM."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

from hoprag.data import QADataset, pool_corpus
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.llm.gguf import share_conversions
from hoprag.methods import PruneRAG
from hoprag.metrics import MetricSuite
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import BM25Retriever

NODE = re.compile(r"Parent query: ([^\n]*)\nQuery: ([^\n]*)\nOutput:$")


def policy(prompt: str) -> str:
    """Roots split into the question's halves; sub-queries extract two entities from their words."""
    parent, query = NODE.search(prompt).groups()
    words = query.rstrip("?").split()
    if parent == "ROOT":
        half = len(words) // 2
        sub1, sub2 = " ".join(words[:half]), " ".join(words[half:])
        return json.dumps({"type": "decomposition", "subquery1": sub1, "subquery2": sub2})
    return json.dumps({"type": "entity", "entity1": " ".join(words[:3]), "entity2": " ".join(words[-3:])})


def test_runner_writes_trees_and_prunerag_metrics(tmp_path):
    dataset = QADataset("hotpotqa", "hotpotqa/hotpot_dev_distractor_185.json", format="hotpotqa", limit=6)
    retriever = BM25Retriever(pool_corpus(dataset.examples), cache_dir=str(tmp_path / "bm25"))
    llm = ScriptedLLM(rules=[(r"### Inference Tree", r"\\boxed{Rush}"), (NODE, policy)], default_logprob=-0.1)
    method = PruneRAG(llm, retriever)
    metrics = run(
        method, dataset.examples, tmp_path / "run", batch_size=4,
        suite=MetricSuite(passage_match="token_overlap"),
    )  # fmt: skip
    records = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert [r["prediction"] for r in records] == ["Rush"] * 6 and records[0]["scores"]["em"] == 1.0
    tree = records[0]["trace"]["tree"]
    assert tree["status"] == "decomposed" and [c["status"] for c in tree["children"]] == ["entity_parent"] * 2
    assert all(r["cost"]["retrieval_calls"] == 7 and r["stats"]["retrieval_calls"] == 7 for r in records)
    assert [len(c.prompts) for c in llm.calls] == [4, 8, 4, 2, 4, 2]  # roots, sub-queries, finals: 3 calls a batch
    assert metrics["em"] == round(100 * sum(r["scores"]["em"] for r in records) / 6, 1)
    assert metrics["method/decision_calls"] == 3 and metrics["method/tree_nodes"] == 7
    assert metrics["cost/mean/retrieval_calls"] == 7 and metrics["parse_failures"] == 0
    for key in ("retrieval/passage_recall_macro", "retrieval/all_gold_retrieved", "forget_rate"):
        assert key in metrics
    assert metrics["retrieval/passage_recall_macro"] > 50  # BM25 with 7 queries finds most gold paragraphs


def test_eval_py_runs_prunerag_with_unparseable_llm_output_and_counts_it(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")),
           "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    command = [
        sys.executable, "eval.py", "+experiment=prunerag", "data=hotpotqa", "limit=4", "retriever=bm25", "llm=scripted",
        "aids=small_model", "~logger", f"hydra.run.dir={run_dir}",  # the small model's lenient parsing, counted f"paths.index_dir={tmp_path / 'indexes'}",
        "method.builder.retry_actions=[decomposition,entity]",  # the paper-literal retry: answer no longer offered
    ]  # fmt: skip
    proc = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    # the scripted config answers "Answer: yes" (log-prob -1 a token) to everything, after every prefill: the
    # root's first decision is a free-text answer attempt (confidence 0.37, rejected), its retry (answer no
    # longer offered) a parse error, and the final reply never closes the prefilled box
    assert metrics["parse_failures"] == 4 and metrics["method/decision_parse_errors"] == 1
    assert metrics["method/decision_fallbacks"] == 1 and metrics["method/answers_rejected"] == 1
    assert metrics["cost/mean/retrieval_calls"] == 1 and metrics["cost/mean/llm_calls"] == 3
    assert "efr" in metrics or "forget_rate" in metrics
    show = subprocess.run(
        [sys.executable, "scripts/runs/show_trees.py", str(run_dir), "-n", "2", "--outputs"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert show.returncode == 0, show.stderr[-2000:]
    assert show.stdout.count("[Q1 parse_error, 1 free-text]") == 2 and 'llm: {"type": "Answer: yes' in show.stdout
    assert "method/decision_parse_errors" in show.stdout


def test_show_trees_refuses_a_run_without_trees():
    with tempfile.TemporaryDirectory() as empty:
        proc = subprocess.run(
            [sys.executable, "scripts/runs/show_trees.py", empty], cwd=PROJECT_ROOT, capture_output=True, text=True
        )
    assert proc.returncode != 0 and "not found" in proc.stderr
