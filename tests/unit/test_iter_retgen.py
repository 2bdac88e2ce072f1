"""The iterative chain baseline with the scripted LLM: rounds, queries built from generations, costs."""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, IterRetGen
from hoprag.retrieval import Hit, Retriever


class StubRetriever(Retriever):
    """k passages per query, made from the query string; records every batch."""

    def __init__(self) -> None:
        super().__init__([])
        self.batches: list[list[str]] = []

    def _search(self, queries, k):
        self.batches.append(list(queries))
        return [[Hit(Passage(f"{q}#{i}", f"Title {i} of {q}", "."), 1.0, i) for i in range(1, k + 1)] for q in queries]


PROMPT = ChatPrompt("Answer briefly.", "{passages}\n\nQuestion: {question}\nAnswer:")


def test_each_round_retrieves_with_the_question_and_the_last_generation_batched_over_questions():
    llm = ScriptedLLM(rules=[(r"\[1\] Title 1 of ([^\n]*)", r"Answer: from \1")])
    retriever = StubRetriever()
    method = IterRetGen(llm, retriever, PROMPT, rounds=3, k=2)
    examples = [QAExample("a", "Q1?", ["x"]), QAExample("b", "Q2?", ["y"])]
    costs = [Cost(), Cost()]
    outputs = method.answer(examples, costs)

    assert retriever.batches == [
        ["Q1?", "Q2?"],
        ["Q1? Answer: from Q1?", "Q2? Answer: from Q2?"],
        ["Q1? Answer: from Q1? Answer: from Q1?", "Q2? Answer: from Q2? Answer: from Q2?"],
    ]
    assert [len(c.prompts) for c in llm.calls] == [2, 2, 2]
    assert outputs[0].prediction == "from Q1? Answer: from Q1? Answer: from Q1?"  # round 3 read round 2's query
    assert [len(o.trace["rounds"]) for o in outputs] == [3, 3]
    assert len(outputs[0].retrieved) == 6 and len({p.id for p in outputs[0].retrieved}) == 6
    assert outputs[0].stats == {"retrieval_calls": 3.0, "rounds": 3.0}
    assert [(c.llm_calls, c.retrieval_calls) for c in costs] == [(3, 3), (3, 3)]
    assert set(costs[0].seconds) == {"generation", "answer", "retrieval"}


def test_one_round_is_standard_rag_and_rounds_must_be_positive():
    llm = ScriptedLLM(default_reply="Answer: x")
    retriever = StubRetriever()
    (out,) = IterRetGen(llm, retriever, PROMPT, rounds=1).answer([QAExample("a", "Q?", ["x"])], [Cost()])
    assert out.prediction == "x" and retriever.batches == [["Q?"]] and len(llm.calls) == 1
    with pytest.raises(ValueError, match="rounds"):
        IterRetGen(llm, retriever, PROMPT, rounds=0)
