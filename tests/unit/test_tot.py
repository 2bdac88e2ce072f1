"""Tree of Thoughts with the scripted LLM: BFS steps of batched thought and value calls, selection, stopping."""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import ToT
from hoprag.search.tot import value_of
from tests.fakes import KeywordRetriever

CORPUS = [Passage("p1", "Jaws", "Jaws is a 1975 film directed by Steven Spielberg.")]
EXAMPLES = [QAExample("a", "Who directed Jaws?", ["Steven Spielberg"]), QAExample("b", "What is 2+2?", ["4"])]
FIRST = ["Jaws is a 1975 film.", "1. Jaws was directed by Steven Spielberg.", "Jaws is a 1975 film.", ""]


def thought(text: str) -> str | list[str]:
    so_far = text.split("Steps so far:\n")[-1]
    if "2+2" in text:
        return "#FINAL: The answer is 4."
    if "none yet" in so_far:
        return FIRST  # sample j gets FIRST[j]: a repeat and an empty thought among them
    if "Spielberg" in so_far:
        return "#FINAL: The answer is Steven Spielberg."
    return "#FINAL: The answer is Jaws." if text.endswith("Final answer:") else "It was a shark film."


def value(text: str) -> str:
    steps = text.split("Steps:\n")[-1]
    return "Sure." if "Spielberg" in steps or "2+2" in text else ("impossible" if "shark" in steps else "likely")


RULES = [
    (lambda t: t.endswith("Judgement (sure, likely or impossible):"), value),
    (lambda t: t.endswith("answer:") or t.endswith("Final answer:"), thought),
]


def test_bfs_expands_values_keeps_the_best_and_stops_when_every_kept_state_has_answered():
    llm = ScriptedLLM(rules=RULES)
    costs = [Cost(), Cost()]
    method = ToT(llm, KeywordRetriever(CORPUS), depth=3, branching=4, breadth=2, evaluations=2, with_documents=False,
                 generation={"temperature": 0.7, "stop": ["\n"]}, value_generation={"temperature": 0.7})  # fmt: skip
    outputs = method.answer(EXAMPLES, costs)

    # per step: one thought call (n = branching) and one value call (n = evaluations) for all questions
    assert [(len(c.prompts), c.params.n) for c in llm.calls] == [(2, 4), (3, 2), (2, 4), (2, 2), (1, 4), (1, 2)]
    assert llm.calls[0].texts[0].endswith("Steps so far:\nnone yet\nNext step or final answer:")
    assert llm.calls[4].texts[0].endswith("2. It was a shark film.\nWrite the final line now:\n"
                                          "#FINAL: The answer is <a short answer of a few words>.\nFinal answer:")  # fmt: skip
    jaws, sums = outputs
    assert (jaws.prediction, jaws.parse_failed) == ("Steven Spielberg.", False)
    assert jaws.trace["answer_state"] == ["Jaws was directed by Steven Spielberg.", "#FINAL: The answer is Steven Spielberg."]
    assert jaws.trace["value"] == 40.0 and len(jaws.trace["steps"]) == 3
    assert [s["value"] for s in jaws.trace["steps"][0]["states"]] == [2.0, 40.0, 0.0]  # the repeat scores 0
    assert jaws.stats == {
        "thoughts": 16.0, "evaluations": 10.0, "depth": 3.0, "duplicate_thoughts": 10.0, "empty_thoughts": 1.0,
        "value_unparsed": 0.0, "max_depth_reached": 0.0, "retrievals": 0.0,
    }  # fmt: skip
    assert (sums.prediction, sums.stats["depth"], sums.stats["thoughts"]) == ("4.", 1.0, 4.0)  # answered at step 1
    assert [c.llm_calls for c in costs] == [9, 2]  # one per prompt: 1 + 2, 2 + 2, 1 + 1 for Jaws


def test_a_search_that_never_answers_falls_back_to_its_best_thought_counted_with_documents_shown():
    llm = ScriptedLLM(rules=[(lambda t: t.endswith("answer:"), "Sharks swim."), (lambda t: "Judgement" in t, "maybe")])
    retriever = KeywordRetriever(CORPUS)
    out = ToT(llm, retriever, depth=1, branching=2, breadth=1, evaluations=1, k=1,
              generation={"temperature": 0.7}, value_generation={"temperature": 0.7}).answer(EXAMPLES[:1], [Cost()])[0]  # fmt: skip
    assert retriever.batches == [["Who directed Jaws?"]] and [p.id for p in out.retrieved] == ["p1"]
    assert llm.calls[0].texts[0].count("[1] Jaws\nJaws is a 1975 film") == 1
    assert (out.prediction, out.parse_failed) == ("Sharks swim.", True)
    assert out.stats["max_depth_reached"] == 1.0 and out.stats["value_unparsed"] == 1.0


def test_value_replies_follow_tots_map_on_their_last_line_and_settings_must_be_positive():
    assert [value_of(t) for t in ("sure", "Thinking...\nLikely.", "IMPOSSIBLE", "sure but", "")] == [20.0, 1.0, 0.001, None, None]
    with pytest.raises(ValueError, match="method.breadth must be positive"):
        ToT(ScriptedLLM(), KeywordRetriever(CORPUS), breadth=0)
