"""Capabilities a method needs of its LLM (issue 14): declared by the method, checked before any work,
recorded in metrics.json; and the runner's resume log line."""

from __future__ import annotations

import json
import logging

import pytest

from hoprag.data import QADataset
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, PruneRAG, SCRAGSearch, StandardRAG
from hoprag.methods.base import MissingCapability
from hoprag.retrieval import BM25Retriever
from tests.unit.test_prunerag import prunerag


class ServedLLM(ScriptedLLM):
    """A scripted LLM standing in for a server probed to lack some capabilities."""

    def __init__(self, capabilities: dict, **kw) -> None:
        super().__init__(**kw)
        self.capabilities = capabilities

    def missing_capabilities(self, needs):
        return [n for n in needs if not self.capabilities.get(n, False)]


LLAMA_CPP_NO_TOKENIZER = {"logprobs": False, "n": True, "prefill": False}


@pytest.fixture(scope="module")
def dataset():
    return QADataset("hotpotqa", "hotpotqa/hotpot_dev_distractor_185.json", format="hotpotqa", limit=3)


@pytest.fixture(scope="module")
def retriever(dataset):
    return BM25Retriever(dataset.corpus())


def test_prunerag_declares_logprobs_and_prefill_by_its_switches(retriever):
    llm = ScriptedLLM()
    assert PruneRAG(llm, retriever).required_capabilities() == {
        "logprobs": "method.builder.use_confidence=false (ablation w/o Con.), or a server returning them"
    }
    needs = prunerag(llm, retriever, decision_prefix='{"type": "', aggregator={"answer_prefix": "\\boxed{"})
    assert set(needs.required_capabilities()) == {"logprobs", "prefill"}
    prefill = needs.required_capabilities()["prefill"]
    assert "method.builder.decision_prefix=null" in prefill and "method.aggregator.answer_prefix=null" in prefill
    assert prunerag(llm, retriever, use_confidence=False).required_capabilities() == {}
    prunerag(llm, retriever, decision_prefix="{").check_capabilities()  # in process: everything is there


def test_sc_rag_search_declares_prefill_for_its_answer_prefix():
    method = SCRAGSearch.__new__(SCRAGSearch)
    method.answer_prefix = ""
    assert method.required_capabilities() == {}
    method.answer_prefix = "The answer is"
    assert "method.answer_prefix=null" in method.required_capabilities()["prefill"]


def test_a_missing_capability_fails_the_run_before_any_work(dataset, retriever, tmp_path):
    llm = ServedLLM(LLAMA_CPP_NO_TOKENIZER)
    method = prunerag(llm, retriever, decision_prefix='{"type": "')
    with pytest.raises(MissingCapability, match="method.builder.use_confidence=false") as info:
        run(method, dataset.examples, tmp_path)
    assert "method.builder.decision_prefix=null" in str(info.value) and "llm.tokenizer" in str(info.value)
    assert llm.calls == [] and not (tmp_path / "predictions.jsonl").exists()
    with_logprobs = ServedLLM({**LLAMA_CPP_NO_TOKENIZER, "logprobs": True})
    PruneRAG(with_logprobs, retriever).check_capabilities()  # no prefix: no prefill needed


def test_capabilities_go_into_metrics_and_a_resume_is_logged(dataset, retriever, tmp_path, caplog):
    prompt = ChatPrompt("Use the passages.", "{passages}\n\nQuestion: {question}\nAnswer:")

    def method():
        llm = ServedLLM(LLAMA_CPP_NO_TOKENIZER, rules=[(r"\[1\] ([^\n]*)", r"Answer: \1", -0.5)])
        return StandardRAG(llm, retriever, prompt=prompt, k=5)

    run(method(), dataset.examples[:2], tmp_path)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["run"]["llm_capabilities"] == LLAMA_CPP_NO_TOKENIZER
    assert "llm_capabilities" not in StandardRAG(ScriptedLLM(), retriever, prompt=prompt).run_info()
    with caplog.at_level(logging.INFO, logger="hoprag.evaluation.runner"):
        run(method(), dataset.examples, tmp_path)
    assert "resuming: 2 of 3 answers kept" in caplog.text
