"""Rewrite-Retrieve-Read with the scripted LLM: the rewrite's ';'-separated queries, one batched search for all
of them, passages merged rank by rank, the fallback to the question when a rewrite has no query."""

from __future__ import annotations

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import RRR, ChatPrompt
from hoprag.methods.rrr import parse_queries
from tests.fakes import KeywordRetriever

PROMPT = ChatPrompt("Answer briefly.", "{passages}\n\nQuestion: {question}\nAnswer:")
REWRITER = ChatPrompt("Give search queries ending with '**'.", "Question: {question}\nQueries:")
CORPUS = [
    Passage("p1", "Blur", "Blur debut album Leisure 1991."),
    Passage("p2", "Oasis", "Oasis debut album Definitely Maybe 1994."),
    Passage("p3", "Other", "Unrelated text."),
]


def test_each_query_of_the_rewrite_is_searched_in_one_batch_and_read_rank_by_rank():
    llm = ScriptedLLM(
        rules=[
            ("Answer briefly", "Blur"),
            ("Question: Who was first", "Blur debut album; Oasis debut album** and more"),
            ("Question: Empty", "  **"),
        ]
    )
    retriever = KeywordRetriever(CORPUS)
    examples = [QAExample("a", "Who was first, Blur or Oasis?", ["Blur"]), QAExample("b", "Empty?", ["x"])]
    costs = [Cost(), Cost()]
    outputs = RRR(llm, retriever, PROMPT, REWRITER, k=2).answer(examples, costs)

    assert [len(c.prompts) for c in llm.calls] == [2, 2] and llm.calls[0].params.stop == ("**",)
    assert retriever.batches == [["Blur debut album", "Oasis debut album", "Empty?"]]
    first = outputs[0]
    assert [p.id for p in first.retrieved] == ["p1", "p2"]  # each query's first hit, then each second
    assert first.trace["queries"] == [
        {"query": "Blur debut album", "passages": ["p1", "p2"]},
        {"query": "Oasis debut album", "passages": ["p2", "p1"]},
    ]
    assert first.stats == {"queries": 2.0, "retrieval_calls": 2.0, "rewrite_fallback": 0.0}
    assert outputs[1].stats == {"queries": 1.0, "retrieval_calls": 1.0, "rewrite_fallback": 1.0}
    assert first.prediction == "Blur"
    assert [(c.llm_calls, c.retrieval_calls) for c in costs] == [(2, 2), (2, 1)]


def test_queries_are_split_at_semicolons_and_cut_at_the_end_mark():
    assert parse_queries('Query: "a b"; c ;; a b** d; e') == ["a b", "c"]
    assert parse_queries(" ** ") == []


def test_batching_by_question_searches_one_query_at_a_time():
    llm = ScriptedLLM(rules=[("Queries:", "x; y**")], default_reply="z")
    retriever = KeywordRetriever(CORPUS)
    RRR(llm, retriever, PROMPT, REWRITER, batching="question").answer([QAExample("a", "Q?", ["z"])], [Cost()])
    assert retriever.batches == [["x"], ["y"]]
