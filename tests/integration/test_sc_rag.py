"""Self-Correcting RAG end to end on the bundled HotpotQA sample: the shipped configs, the runner, and the
faithfulness and cost figures it reports; a scripted LLM and verifier (and one slow run of the real LLM)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hydra.utils import instantiate

from hoprag.cost import Cost
from hoprag.data import QADataset
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods import SCRAG, SCRAGSearch
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import DenseRetriever
from hoprag.search import MCTSConfig
from hoprag.verifiers import ScriptedVerifier
from hoprag.verifiers.reward import EvidenceExtractor
from tests.fakes import HashEmbedder

SEARCH = ["method.search.simulations=4", "method.search.max_depth=2", "method.search.seed=3"]
REPLY = (
    r"\[doc_id=1\] title=([^\n]*)",
    r'Here: {"answer": "\1", "evidence_doc_ids": [1], "reasoning": "Snippet 1 is about \1. It answers it."}',
    -0.3,
)


@pytest.fixture(scope="module")
def dataset():
    return QADataset("hotpotqa", "hotpotqa/hotpot_dev_distractor_185.json", format="hotpotqa", limit=4)


@pytest.fixture(scope="module")
def dense(dataset):
    return DenseRetriever(dataset.corpus(), HashEmbedder(), index={"use_gpu": False})


def verifier() -> ScriptedVerifier:
    """Entails the answer claim when the premise names the answer; contradicts a claim about "Snippet 1"."""
    return ScriptedVerifier(rules=[(".", "Snippet 1", (0.1, 0.2, 0.7))], default=(0.6, 0.3, 0.1))


@pytest.mark.parametrize("name, cls", [("sc_rag_search", SCRAGSearch), ("sc_rag", SCRAG)])
def test_shipped_config_runs_through_the_runner(compose_cfg, dataset, dense, tmp_path, name, cls):
    cfg = compose_cfg("eval", [f"+method={name}", "verifier@method.verifier=scripted", *SEARCH])
    factory = instantiate(cfg.method)
    llm = ScriptedLLM(rules=[REPLY], default_reply="no snippets")
    nli = verifier()
    method = factory(llm=llm, retriever=dense, verifier=nli, evidence=EvidenceExtractor(HashEmbedder()))
    assert isinstance(method, cls) and method.search.config.simulations == 4
    metrics = run(method, dataset.examples, tmp_path / name, batch_size=4)

    # one batched expansion call per simulation step for all four questions, plus one batched rollout call
    # for the step that created the augment children (spec §5.5); depth 2 stops augments after the first step
    assert [(call.params.n, len(call.prompts)) for call in llm.calls] == [(3, 4), (1, 4), (3, 4), (3, 4), (3, 4)]
    for key in ("attribution_precision", "contradiction_rate", "support"):
        assert 0 <= metrics[f"method/{key}"] <= 1
    assert metrics["method/contradiction_rate"] > 0  # the scripted "Snippet 1" claims are contradicted
    assert metrics["method/llm_samples"] == 13 and metrics["cost/mean/llm_calls"] == 5
    assert metrics["method/nli_pairs"] > 0 and metrics["method/nli_forwards"] <= metrics["method/nli_pairs"]
    assert {"em", "f1", "parse_failures", "retrieval/passage_recall@5"} <= set(metrics)
    assert metrics["parse_failures"] == 0  # the JSON is found inside the surrounding text
    if name == "sc_rag":
        assert metrics["method/select/tokens_used"] > 0

    record = json.loads((tmp_path / name / "predictions.jsonl").read_text().splitlines()[0])
    tree = record["trace"]["tree"]
    assert tree["chosen"] in {n["id"] for n in tree["nodes"]}
    assert max(n["depth"] for n in tree["nodes"]) <= 2
    assert record["stats"]["tree_nodes"] == len(tree["nodes"])
    assert record["prediction"] == next(n["answer"] for n in tree["nodes"] if n["id"] == tree["chosen"])
    assert set(record["trace"]["claim_labels"]) <= {"supported", "contradicted", "neutral"}


def test_default_config_uses_the_trained_verifier_and_the_paper_budget(compose_cfg):
    cfg = compose_cfg("eval", ["+method=sc_rag"])
    verifier = instantiate(cfg.method.verifier)  # loads lazily: nothing is read here
    assert type(verifier).__name__ == "CrossEncoderVerifier" and verifier.model.endswith("verifiers/minilm-nli")
    search = MCTSConfig(**{k: v for k, v in cfg.method.search.items() if not k.startswith("_")})
    assert (search.simulations, search.branching, search.max_depth, search.c) == (24, 3, 3, 1.4)
    assert search.selection == "uct" and search.augment and search.augment_add_k == 3
    assert (search.temperature, search.top_p, search.max_new_tokens) == (0.7, 0.9, 256)
    assert list(cfg.method.reward.weights) == [1.0, -0.2, -2.0] and cfg.method.reward.aggregation == "eq2"
    assert (cfg.method.evidence.per_passage, cfg.method.evidence.total) == (3, 8)


@pytest.mark.slow
def test_eval_py_with_the_real_llm(tmp_path):
    """`eval.py +method=sc_rag_search` as users run it, with SmolLM2 and a tiny search budget."""
    run_dir = tmp_path / "run"
    command = [
        sys.executable, "eval.py", "+method=sc_rag_search", "data=hotpotqa", "limit=1", "retriever=bm25",
        "verifier@method.verifier=scripted", "method.search.simulations=2", "method.search.branching=2",
        "method.search.max_new_tokens=16", "~logger", f"hydra.run.dir={run_dir}",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    # 2 steps x 2 samples, plus one rollout for each augment child the steps created (0 to 2)
    assert 4 <= metrics["method/llm_samples"] <= 6 and metrics["cost/mean/completion_tokens"] > 0
    assert metrics["cost/mean/truncated_prompts"] == 0 and metrics["cost/mean/missing_logprobs"] == 0
    assert "method/attribution_precision" in metrics and "method/support" in metrics


def test_an_answer_prefix_is_prefilled_and_read_back_in_front_of_the_continuation(compose_cfg, dataset, dense):
    cfg = compose_cfg("eval", ["+method=sc_rag_search", "verifier@method.verifier=scripted", *SEARCH])
    prefix = '{"answer": "'
    continuation = (r"\[doc_id=1\] title=([^\n]*)", r'\1", "evidence_doc_ids": [1], "reasoning": "It says so."}', -0.3)
    llm = ScriptedLLM(rules=[continuation], default_reply="nothing")
    method = instantiate(cfg.method)(
        llm=llm, retriever=dense, verifier=verifier(), evidence=EvidenceExtractor(HashEmbedder()), answer_prefix=prefix
    )
    outputs = method.answer(dataset.examples[:1], [Cost()])
    prompt = llm.calls[0].prompts[0]
    assert prompt[-1] == {"role": "assistant", "content": prefix}
    # the scripted continuation names the first snippet's title: a whole JSON answer once the prefix is back
    assert not outputs[0].parse_failed and outputs[0].prediction in {p.title for p in dense.passages}
    assert method.parse('Paris", "evidence_doc_ids": [2], "reasoning": "r"}').answer == "Paris"


SEARCHED = ("llm_samples", "tree_nodes", "tree_depth", "answer_reward", "answer_value", "answer_visits")


def contradicting_judge() -> ScriptedVerifier:
    """An independent judge that disagrees with the search's verifier: every claim is contradicted."""
    return ScriptedVerifier(default=(0.05, 0.05, 0.9))


@pytest.mark.parametrize("name", ["sc_rag_search", "sc_rag"])
def test_a_separate_judge_scores_faithfulness_and_leaves_the_search_alone(compose_cfg, dataset, dense, tmp_path, name):
    cfg = compose_cfg("eval", [f"+method={name}", "verifier@method.verifier=scripted", *SEARCH])
    assert cfg.method.judge is None  # the default: the search's own verifier judges
    factory = instantiate(cfg.method)
    runs = {}
    for judged, judge in (("search_verifier", None), ("ScriptedVerifier", contradicting_judge())):
        llm = ScriptedLLM(rules=[REPLY], default_reply="no snippets")
        method = factory(llm=llm, retriever=dense, verifier=verifier(), evidence=EvidenceExtractor(HashEmbedder()), judge=judge)
        metrics = run(method, dataset.examples, tmp_path / judged, batch_size=4)
        report = json.loads((tmp_path / judged / "metrics.json").read_text())
        records = [json.loads(line) for line in (tmp_path / judged / "predictions.jsonl").read_text().splitlines()]
        assert method.run_info()["judge"] == report["run"]["judge"] == judged
        runs[judged] = metrics, records, judge

    (own, own_records, _), (judged, judged_records, judge) = runs["search_verifier"], runs["ScriptedVerifier"]
    assert own["method/attribution_precision"] > 0 and own["method/contradiction_rate"] < 1
    faithfulness = ("method/attribution_precision", "method/contradiction_rate", "method/support")
    assert tuple(judged[key] for key in faithfulness) == (0.0, 1.0, 0.0)
    assert judge.calls == 1  # the batch's faithfulness pairs only: the reward never asked the judge
    for a, b in zip(own_records, judged_records):  # the same search, answers and rewards
        assert (a["prediction"], a["trace"]["tree"]) == (b["prediction"], b["trace"]["tree"])
        assert [a["stats"][key] for key in SEARCHED] == [b["stats"][key] for key in SEARCHED]
        assert set(b["trace"]["claim_labels"]) == {"contradicted"}


def test_a_judge_from_the_verifier_group_is_named_by_its_model(compose_cfg, dense):
    overrides = ["+method=sc_rag_search", "verifier@method.verifier=scripted", "+verifier@method.judge=roberta_large_mnli"]
    cfg = compose_cfg("eval", overrides)
    method = instantiate(cfg.method)(llm=ScriptedLLM(), retriever=dense, evidence=EvidenceExtractor(HashEmbedder()))
    assert isinstance(method.verifier, ScriptedVerifier) and method.reward.verifier is method.verifier
    assert method.faithfulness.verifier is method.judge and type(method.judge).__name__ == "CrossEncoderVerifier"
    assert method.run_info()["judge"] == "FacebookAI/roberta-large-mnli"  # loads lazily: nothing is read here
