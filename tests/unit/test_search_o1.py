"""Search-o1 with the scripted LLM: searches inside the reasoning, Reason-in-Documents, limits, the boxed answer."""

from __future__ import annotations

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm import ScriptedLLM
from hoprag.llm.scripted import render
from hoprag.methods import ChatPrompt, SearchO1
from hoprag.methods.search_o1 import last_boxed, previous_steps
from tests.fakes import KeywordRetriever
from tests.unit.test_methods import CORPUS

PROMPT = ChatPrompt("Reason and search.", "At most {max_searches} searches.\nQuestion:\n{question}")
RID = ChatPrompt("Extract.", "Previous:\n{previous}\n\nQuery:\n{query}\n\nDocuments:\n{documents}")
Q = "<|begin_search_query|>"
RULES = [
    ("Query:\ncapital of France", "Reading... **Final Information** Paris is the capital."),
    ("<\\|end_search_result\\|>\n\n$", lambda t: "So the answer is \\boxed{\\text{Paris}}. Trailing"),
    (
        "Question:\nWhat is the capital of France\\?$",
        f"I need the capital. {Q}capital of France<|end_search_query|> no",
    ),
    ("Question:\nWhich city is in France\\?$", lambda t: "I know it: \\boxed{Lyon}"),  # a callable: no template escapes
]


def test_a_search_is_condensed_into_the_reasoning_which_then_continues_to_a_boxed_answer():
    llm = ScriptedLLM(rules=RULES, default_reply="")
    retriever = KeywordRetriever(CORPUS)
    examples = [
        QAExample("q1", "What is the capital of France?", ["Paris"]),
        QAExample("q2", "Which city is in France?", ["Lyon"]),
    ]
    costs = [Cost(), Cost()]
    first, second = SearchO1(llm, retriever, PROMPT, RID, k=2).answer(examples, costs)

    assert [len(c.prompts) for c in llm.calls] == [2, 1, 1]  # turn 1, Reason-in-Documents (q1), turn 2 (q1)
    assert llm.calls[0].params.stop == ("<|end_search_query|>",) and retriever.batches == [["capital of France"]]
    assert (
        "Step 1: I need the capital. <|begin_search_query|>capital of France<|end_search_query|>"
        in (llm.calls[1].texts[0])
    )
    continued = llm.calls[2].prompts[0]
    assert continued[-1] == {  # the model continues its own reasoning (an assistant prefill)
        "role": "assistant",
        "content": "I need the capital. <|begin_search_query|>capital of France<|end_search_query|>\n\n"
        "<|begin_search_result|>Paris is the capital.<|end_search_result|>\n\n",
    }
    assert (first.prediction, first.parse_failed, second.prediction) == ("Paris", False, "Lyon")
    assert first.stats == {
        "search_limit_hits": 0,
        "repeated_searches": 0,
        "rid_format_failures": 0,
        "turns": 2,
        "retrievals": 1,
        "max_turns_reached": 0,
        "stalled": 0,
    }
    assert first.trace["turns"][0]["query"] == "capital of France" and first.trace["turns"][0]["passages"] == [
        "p1",
        "p3",
    ]
    assert [p.id for p in first.retrieved] == ["p1", "p3"] and second.retrieved == []
    assert [(c.llm_calls, c.retrieval_calls) for c in costs] == [(3, 1), (1, 0)]
    assert SearchO1(llm, retriever, PROMPT, RID).required_capabilities().keys() == {"prefill"}


def test_the_search_limit_and_repeated_queries_get_the_official_notes_and_max_turns_ends_without_a_box():
    def reply(text: str) -> str:
        return (
            f"{Q}capital of France<|end_search_query|>" if text.count(Q) % 2 == 0 else f"{Q}Paris<|end_search_query|>"
        )

    llm = ScriptedLLM(rules=[("Query:\n", "no marker"), (lambda t: True, reply)])
    retriever = KeywordRetriever(CORPUS)
    (out,) = SearchO1(llm, retriever, PROMPT, RID, max_turns=4, max_searches=2).answer(
        [QAExample("q", "What is the capital of France?", ["Paris"])], [Cost()]
    )
    reasoning = render(llm.calls[-1].prompts[0]).split("assistant: ", 1)[1]
    assert retriever.batches == [["capital of France"], ["Paris"]]
    assert "You have searched this query" not in reasoning and reasoning.count("The maximum search limit") == 1
    assert out.stats["search_limit_hits"] == 2 and out.stats["rid_format_failures"] == 2  # turns 3 and 4
    assert (out.prediction, out.parse_failed, out.stats["max_turns_reached"]) == ("", True, 1)
    assert "<|begin_search_result|>no marker<|end_search_result|>" in reasoning  # its last 5 lines


def test_boxed_answers_and_the_official_step_truncation():
    assert last_boxed("a \\boxed{x} b \\boxed{\\text{New {York}}} c") == "New {York}"
    assert last_boxed("\\boxed{(B)}") == "B" and last_boxed("\\boxed{open") is None and last_boxed("none") is None
    steps = previous_steps("\n".join(["one", "two", f"{Q}q", "four", "five", "six", "seven", "eight", "nine"]))
    assert steps.split("\n\n") == [
        "Step 1: one",
        "...",
        f"Step 3: {Q}q",
        "...",
        "Step 6: six",
        "Step 7: seven",
        "Step 8: eight",
        "Step 9: nine",
    ]
