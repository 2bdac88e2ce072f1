"""ReAct with the scripted LLM: Search/Finish turns batched over questions, the stop at Finish or at max_turns."""

from __future__ import annotations

import re

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, ReAct
from tests.fakes import KeywordRetriever
from tests.unit.test_methods import CORPUS

PROMPT = ChatPrompt("Use Search[query] or Finish[answer].", "Question: {question}\n{transcript}Thought {turn}:")
EXAMPLES = [QAExample("q1", "What is the capital of France?", ["Paris"]), QAExample("q2", "Where is Lyon?", ["France"])]


def turn_of(text: str) -> int:
    return int(re.search(r"Thought (\d+):$", text).group(1))


def reply(text: str) -> str:
    """q1 searches, then finishes after its first observation; q2 searches for ever; the model runs on past the
    action into an invented observation, which the stop string cuts off."""
    turn = turn_of(text)
    first = "Question: What is the capital" in text
    if first and "Observation 1: [1] Paris" in text:
        return f"Paris is the capital.\nAction {turn}: Finish[Paris]"
    query = "capital France" if first else f"Lyon {turn}"
    return f"I should search.\nAction {turn}: Search[{query}]\nObservation {turn}: invented"


def test_react_stops_at_finish_or_after_max_turns_with_one_batched_call_per_turn():
    llm = ScriptedLLM(rules=[(lambda t: True, reply)])
    retriever = KeywordRetriever(CORPUS)
    method = ReAct(llm, retriever, PROMPT, max_turns=3, k=2)
    costs = [Cost(), Cost()]
    first, second = method.answer(EXAMPLES, costs)

    assert [len(c.prompts) for c in llm.calls] == [2, 2, 1]  # q1 leaves the batch after Finish at turn 2
    assert [c.params.stop for c in llm.calls] == [("Observation 1:",), ("Observation 2:",), ("Observation 3:",)]
    assert retriever.batches == [["capital France", "Lyon 1"], ["Lyon 2"], ["Lyon 3"]]
    assert llm.calls[1].prompts[0][1]["content"] == (
        "Question: What is the capital of France?\nThought 1: I should search.\nAction 1: Search[capital France]\n"
        "Observation 1: [1] Paris\nParis is the capital of France.\n\n[2] Lyon\nLyon is a city in France.\n"
        "Thought 2:"
    )
    assert (first.prediction, first.parse_failed) == ("Paris", False)
    assert first.stats == {"invalid_actions": 0, "turns": 2, "retrievals": 1, "max_turns_reached": 0, "stalled": 0}
    assert [p.id for p in first.retrieved] == ["p1", "p2"]
    assert first.trace["turns"] == [
        {
            "turn": 1,
            "thought": "I should search.",
            "action": "Search[capital France]",
            "query": "capital France",
            "passages": ["p1", "p2"],
        },
        {"turn": 2, "thought": "Paris is the capital.", "action": "Finish[Paris]"},
    ]
    # the official pipeline's finish[] at max_turns: the empty answer, a parse failure, counted
    assert (second.prediction, second.parse_failed, second.trace["max_turns_reached"]) == ("", True, True)
    assert second.stats["max_turns_reached"] == 1 and second.stats["turns"] == 3 and second.stats["retrievals"] == 3
    assert [(c.llm_calls, c.retrieval_calls) for c in costs] == [(2, 1), (3, 3)]


def test_an_output_without_a_labelled_action_is_an_invalid_action_unless_lenient():
    llm = ScriptedLLM(default_reply="I think Finish[Paris]")
    retriever = KeywordRetriever(CORPUS)
    (strict,) = ReAct(llm, retriever, PROMPT, max_turns=2).answer(EXAMPLES[:1], [Cost()])
    assert strict.stats["invalid_actions"] == 2 and strict.prediction == "" and retriever.batches == []
    assert "Action 1: Invalid[no action]\nObservation 1: Invalid action.\nThought 2:" in llm.calls[1].texts[0]
    (lenient,) = ReAct(llm, retriever, PROMPT, lenient_actions=True).answer(EXAMPLES[:1], [Cost()])
    assert (lenient.prediction, lenient.stats["turns"], lenient.stats["invalid_actions"]) == ("Paris", 1, 0)


def test_batching_by_question_makes_one_call_per_prompt_with_the_same_answers():
    batched, single = ScriptedLLM(rules=[(lambda t: True, reply)]), ScriptedLLM(rules=[(lambda t: True, reply)])
    a = ReAct(batched, KeywordRetriever(CORPUS), PROMPT, max_turns=3).answer(EXAMPLES, [Cost(), Cost()])
    b = ReAct(single, KeywordRetriever(CORPUS), PROMPT, max_turns=3, batching="question").answer(
        EXAMPLES, [Cost(), Cost()]
    )
    assert [o.prediction for o in a] == [o.prediction for o in b] and [o.trace for o in a] == [o.trace for o in b]
    assert (len(batched.calls), len(single.calls)) == (3, 5)
