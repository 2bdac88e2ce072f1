"""Self-Ask with the scripted LLM: follow-ups answered from retrieval, the final answer, the closing rule."""

from __future__ import annotations

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, SelfAsk
from tests.fakes import KeywordRetriever
from tests.unit.test_methods import CORPUS

PROMPT = ChatPrompt("Exemplars.", "Question: {question}\nAre follow up questions needed here:{transcript}")
ANSWER = ChatPrompt("Answer from the passages.", "{passages}\n\nQuestion: {question}\nAnswer:")
EXAMPLES = [
    QAExample("q1", "Which capital is in France?", ["Paris"]),
    QAExample("q2", "Which capital is in Germany?", ["Berlin"]),
    QAExample("q3", "Where is Lyon?", ["France"]),
]
RULES = [
    ("Answer from the passages", r"Answer: Paris"),  # the intermediate answer (from passage [1])
    ("So the final answer is:$", " Lyon"),  # the closing call
    ("Intermediate answer: Paris\n$", "So the final answer is: Paris\nQuestion: invented"),
    (
        "in France\\?\nAre follow up questions needed here:$",
        " Yes.\nFollow up: What is the capital of France?\nIntermediate answer: invented",
    ),
    ("Germany\\?\nAre follow up questions needed here:$", " No.\nSo the final answer is: Berlin"),
]


def test_follow_ups_are_answered_from_retrieval_and_a_turn_without_either_is_closed():
    llm = ScriptedLLM(rules=RULES, default_reply=" I am not sure.")
    retriever = KeywordRetriever(CORPUS)
    costs = [Cost(), Cost(), Cost()]
    outputs = SelfAsk(llm, retriever, PROMPT, ANSWER, k=2).answer(EXAMPLES, costs)

    # turn 1 (all three), q1's intermediate answer, turn 2 (q1), then q3's closing call
    assert [len(c.prompts) for c in llm.calls] == [3, 1, 1, 1]
    assert llm.calls[0].params.stop == ("Intermediate answer:",) and llm.calls[1].params.stop == ()
    assert retriever.batches == [["What is the capital of France?"]]
    assert (
        llm.calls[1]
        .texts[0]
        .endswith("[2] Berlin\nBerlin is the capital of Germany.\n\nQuestion: What is the capital of France?\nAnswer:")
    )
    assert (
        llm.calls[2]
        .texts[0]
        .endswith(
            "Are follow up questions needed here: Yes.\nFollow up: What is the capital of France?\n"
            "Intermediate answer: Paris\n"
        )
    )
    assert llm.calls[3].texts[0].endswith("needed here: I am not sure.\nSo the final answer is:")
    assert [(o.prediction, o.parse_failed) for o in outputs] == [("Paris", False), ("Berlin", False), ("Lyon", False)]
    assert [o.stats["turns"] for o in outputs] == [2, 1, 1] and [o.stats["stalled"] for o in outputs] == [0, 0, 1]
    assert outputs[0].trace["turns"][0]["intermediate_answer"] == "Paris"
    assert [p.id for p in outputs[0].retrieved] == ["p1", "p3"] and outputs[1].retrieved == []
    assert [(c.llm_calls, c.retrieval_calls) for c in costs] == [(3, 1), (1, 0), (2, 0)]


def test_a_question_still_asking_after_max_turns_is_closed_and_counted():
    llm = ScriptedLLM(
        rules=[("Answer from the passages", "Answer: Paris"), ("final answer is:$", " Paris")],
        default_reply=" Yes.\nFollow up: What is the capital of France?",
    )
    (out,) = SelfAsk(llm, KeywordRetriever(CORPUS), PROMPT, ANSWER, max_turns=2).answer(EXAMPLES[:1], [Cost()])
    assert [len(c.prompts) for c in llm.calls] == [1, 1, 1, 1, 1]  # turn, answer, turn, answer, closing call
    assert out.prediction == "Paris" and out.stats["max_turns_reached"] == 1 and out.stats["retrievals"] == 2
    assert llm.calls[-1].texts[0].count("Intermediate answer: Paris\n") == 2
