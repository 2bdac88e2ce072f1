"""HyDE with the scripted LLM: hypothetical passages written in one batched call, the search they feed (a dense
retriever: document-side vectors averaged with the question's; any other: one text query), the answer."""

from __future__ import annotations

import numpy as np
import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, HyDE
from hoprag.retrieval import DenseRetriever
from tests.fakes import HashEmbedder, KeywordRetriever

PROMPT = ChatPrompt("Answer briefly.", "{passages}\n\nQuestion: {question}\nAnswer:")
WRITER = ChatPrompt("Write.", "Please write a passage.\n{time}Question: {question}\nPassage:")
CORPUS = [
    Passage("p1", "Rome", "Rome is the capital of Italy."),
    Passage("p2", "Tiber", "The Tiber river flows through Rome."),
    Passage("p3", "Paris", "Paris lies on the Seine."),
]
SAMPLING = {"temperature": 0.7, "max_new_tokens": 64}


def test_passages_are_written_in_one_call_and_searched_with_the_question_as_text():
    llm = ScriptedLLM(
        rules=[("Please write", ["The Tiber flows through Rome.", "Rome has a river."]), ("Answer briefly", "Tiber")]
    )
    retriever = KeywordRetriever(CORPUS)
    method = HyDE(llm, retriever, PROMPT, WRITER, n_passages=2, writer_generation=SAMPLING, k=2)
    examples = [
        QAExample("a", "Which river?", ["Tiber"]),
        QAExample("b", "Which city?", ["Rome"], metadata={"query_time": "03/01/2024, 10:00:00 PT"}),
    ]
    costs = [Cost(), Cost()]
    outputs = method.answer(examples, costs)

    writing, answering = llm.calls
    assert len(writing.prompts) == 2 and writing.params.n == 2 and len(writing.seeds) == 2
    assert "Query time" not in writing.texts[0] and "Query time: 03/01/2024, 10:00:00 PT\n" in writing.texts[1]
    assert retriever.batches == [
        [
            "Which river?\nThe Tiber flows through Rome.\nRome has a river.",
            "Which city?\nThe Tiber flows through Rome.\nRome has a river.",
        ]
    ]
    assert len(answering.prompts) == 2 and outputs[0].prediction == "Tiber"
    assert outputs[0].trace["hypothetical_passages"] == ["The Tiber flows through Rome.", "Rome has a river."]
    assert outputs[0].trace["passages"] == [p.id for p in outputs[0].retrieved] == ["p2", "p1"]
    assert outputs[0].stats == {"hypothetical_passages": 2.0, "retrieval_calls": 1.0, "empty_passages": 0.0}
    assert [(c.llm_calls, c.retrieval_calls) for c in costs] == [(2, 1), (2, 1)]


def test_a_dense_retriever_searches_with_the_mean_of_document_side_and_question_vectors():
    class Recording(HashEmbedder):
        def __init__(self):
            super().__init__(query_prefix="query: ")
            self.texts: list[str] = []

        def _encode(self, texts, batch_size):
            self.texts += texts
            return super()._encode(texts, batch_size)

    embedder = Recording()
    retriever = DenseRetriever(CORPUS, embedder)
    llm = ScriptedLLM(rules=[("Please write", "Paris lies on the Seine."), ("Answer briefly", "Seine")])
    method = HyDE(llm, retriever, PROMPT, WRITER, n_passages=1, writer_generation={"max_new_tokens": 16}, k=3)
    embedder.texts.clear()
    costs = [Cost()]
    (out,) = method.answer([QAExample("a", "Which river?", ["Seine"])], costs)

    assert embedder.texts == ["\nParis lies on the Seine.", "query: Which river?"]  # passage side, no prefix
    written = embedder.encode_passages([Passage("x", "", "Paris lies on the Seine.")])
    expected = np.vstack([written, embedder.encode_queries(["Which river?"])]).mean(axis=0)
    (hits,) = retriever.search_vectors(expected[None], 3)
    assert [p.id for p in out.retrieved] == [h.passage.id for h in hits] and out.retrieved[0].id == "p3"
    assert costs[0].retrieval_calls == 1 and "hyde_encode" in costs[0].seconds


def test_batching_by_question_writes_and_searches_one_question_at_a_time():
    llm = ScriptedLLM(rules=[("Please write", "Rome."), ("Answer briefly", "Rome")])
    retriever = KeywordRetriever(CORPUS)
    method = HyDE(llm, retriever, PROMPT, WRITER, n_passages=1, writer_generation={}, batching="question")
    method.answer([QAExample("a", "Q1?", ["x"]), QAExample("b", "Q2?", ["y"])], [Cost(), Cost()])
    assert [len(c.prompts) for c in llm.calls[:2]] == [1, 1] and retriever.batches == [["Q1?\nRome."], ["Q2?\nRome."]]
    with pytest.raises(ValueError, match="n_passages"):
        HyDE(llm, retriever, PROMPT, WRITER, n_passages=0)
    assert HyDE(llm, retriever, PROMPT, WRITER).required_capabilities() == {
        "n": "method.n_passages=1, or a server that returns n choices"
    }
