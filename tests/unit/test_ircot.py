"""IRCoT with the scripted LLM: retrieve with the question, then with each new CoT sentence, until "answer is"."""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, IRCoT
from tests.fakes import KeywordRetriever

CORPUS = [
    Passage(f"p{i}", f"T{i}", text)
    for i, text in enumerate(
        ["alpha beta", "beta gamma", "gamma delta", "delta epsilon", "epsilon zeta", "zeta eta"], 1
    )
]
PROMPT = ChatPrompt("Reason one sentence at a time.", "{paragraphs}\n\nQ: {question}\nA:{cot}")


def reply(text: str) -> str:
    """Two sentences per output (only the first is kept); the answer after two steps."""
    if "A: Beta leads to gamma. Gamma leads to delta." in text:
        return "So the answer is: delta. More."
    if "A: Beta leads to gamma." in text:
        return "Gamma leads to delta. Ignored sentence."
    return "Beta leads to gamma. Ignored sentence."


def test_each_new_sentence_retrieves_until_a_sentence_gives_the_answer():
    llm = ScriptedLLM(rules=[(lambda t: True, reply)])
    retriever = KeywordRetriever(CORPUS)
    cost = Cost()
    (out,) = IRCoT(llm, retriever, PROMPT, k=2).answer([QAExample("q", "What follows alpha?", ["delta"])], [cost])

    assert retriever.batches == [["What follows alpha?"], ["Beta leads to gamma."], ["Gamma leads to delta."]]
    assert len(llm.calls) == 3 and llm.calls[0].texts[0].endswith("Q: What follows alpha?\nA:")
    assert llm.calls[2].texts[0].endswith("Q: What follows alpha?\nA: Beta leads to gamma. Gamma leads to delta.")
    assert (out.prediction, out.parse_failed) == ("delta", False)
    assert [p.id for p in out.retrieved] == ["p1", "p2", "p3"]  # each paragraph once, in reading order
    assert [s.get("sentence") for s in out.trace["turns"]] == [
        None,
        "Beta leads to gamma.",
        "Gamma leads to delta.",
        "So the answer is: delta.",
    ]
    assert out.stats == {"paragraphs_capped": 0, "turns": 3, "retrievals": 3, "max_turns_reached": 0, "stalled": 0}
    assert (cost.llm_calls, cost.retrieval_calls) == (3, 3)


def test_paragraphs_beyond_the_cap_are_counted_and_a_chain_without_answer_is_closed():
    llm = ScriptedLLM(rules=[("So the answer is:$", " delta"), (lambda t: True, reply)])
    retriever = KeywordRetriever(CORPUS)
    (out,) = IRCoT(llm, retriever, PROMPT, k=2, max_turns=2, max_paragraphs=2).answer(
        [QAExample("q", "What follows alpha?", ["delta"])], [Cost()]
    )
    assert [p.id for p in out.retrieved] == ["p1", "p2"] and out.stats["paragraphs_capped"] == 1  # p3
    assert llm.calls[-1].texts[0].endswith("A: Beta leads to gamma. Gamma leads to delta. So the answer is:")
    assert out.prediction == "delta" and out.stats["max_turns_reached"] == 1
    with pytest.raises(ValueError, match="max_paragraphs"):
        IRCoT(llm, retriever, PROMPT, k=4, max_paragraphs=2)
