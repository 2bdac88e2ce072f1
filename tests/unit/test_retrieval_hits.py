"""A retriever returns only real hits (issue #27 §1.1): a lexical score of 0 is no hit, a query with none
retrieves nothing and is counted per question, and fusion, pools and rerankers take hits only."""

from __future__ import annotations

import numpy as np
import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, StandardRAG
from hoprag.retrieval import BM25Retriever, DenseRetriever, FusionRetriever
from hoprag.retrieval.rerankers import NoReranker
from hoprag.retrieval.sparse import lexical_hits
from hoprag.search.treerare import SyntaxTree, from_bracketed
from hoprag.search.treerare.tree_retrieval import TreeRetrieval
from hoprag.selectors import HybridFrontEnd
from hoprag.selectors.tfidf import TfidfRetriever
from tests.fakes import HashEmbedder

CORPUS = [
    Passage("a", "Neil Peart", "Neil Peart was the drummer and lyricist of the rock band Rush."),
    Passage("b", "Toto", "Toto is an American rock band formed in 1977 in Los Angeles."),
    Passage("c", "Paris", "Paris is the capital and most populous city of France."),
    Passage("d", "Running", "Running is a method of terrestrial locomotion by which humans run quickly."),
    Passage("e", "Baking", "Baking uses dry heat, typically in an oven, to cook bread."),
]
STOP_WORDS = "who was it and what is the one"  # every term a BM25 stop word
GERMAN = "Wer war der Schlagzeuger von Rush?"  # only "Rush" is in the corpus
FOREIGN = "Wer war der Schlagzeuger?"  # no term in the corpus at all


@pytest.fixture(scope="module")
def dense() -> DenseRetriever:
    return DenseRetriever(CORPUS, HashEmbedder(), index={"use_gpu": False})


def test_lexical_hits_keeps_positive_scores_of_real_rows_in_order():
    scores = np.array([[2.5, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.5, -0.3]])
    rows = np.array([[3, 0, 1], [0, 1, 2], [2, -1, 4]])
    assert lexical_hits(scores, rows) == [[(3, 2.5)], [], [(2, 1.0)]]


@pytest.mark.parametrize("make", [BM25Retriever, TfidfRetriever], ids=["bm25", "tfidf"])
def test_a_question_without_a_corpus_term_retrieves_nothing_and_is_counted(make):
    retriever = make(CORPUS)
    questions = [FOREIGN, STOP_WORDS, "drummer"] if make is BM25Retriever else [FOREIGN, "drummer"]
    costs = [Cost() for _ in questions]
    hits = retriever.search(questions, 5, costs=costs)
    assert [[h.passage.id for h in q] for q in hits] == [[]] * (len(questions) - 1) + [["a"]]  # k=5, one match
    assert all(h.score > 0 for q in hits for h in q)
    assert [c.empty_results for c in costs] == [1] * (len(questions) - 1) + [0]
    assert [c.to_dict()["empty_results"] for c in costs] == [c.empty_results for c in costs]
    assert all(c.retrieval_calls == 1 for c in costs) and costs[0].to_dict()["passages_read"] == 0


def test_rrf_over_an_empty_sparse_ranking_is_the_dense_ranking(dense):
    fusion = FusionRetriever(CORPUS, dense, BM25Retriever(CORPUS), rrf_k=60, depth=3)
    costs = [Cost()]
    (fused,) = fusion.search([FOREIGN], 3, costs=costs)
    (alone,) = dense.search([FOREIGN], 3)
    assert [h.passage.id for h in fused] == [h.passage.id for h in alone]
    assert [h.score for h in fused] == pytest.approx([1 / 61, 1 / 62, 1 / 63])  # no sparse share at all
    assert costs[0].empty_results == 0  # the fused search found hits


def test_the_fused_front_end_pool_takes_no_zero_score_sparse_passages(dense):
    front = HybridFrontEnd(dense, mode="textbook", sparse="bm25", dense_depth=2, pool_size=10)
    costs = [Cost(), Cost()]
    foreign, german = front.pools([FOREIGN, GERMAN], costs=costs)
    top2 = [h.passage.id for h in dense.search([FOREIGN], 2)[0]]
    assert [p.id for p in foreign.passages] == top2  # the union adds no sparse passage
    assert {p.id for p in german.passages} == {*[h.passage.id for h in dense.search([GERMAN], 2)[0]], "a"}
    assert [c.empty_results for c in costs] == [1, 0]  # the sparse search of the first found nothing


def test_given_passages_without_a_question_term_are_outside_the_sparse_ranking(dense):
    front = HybridFrontEnd(dense, mode="textbook", pool_size=10)  # TF-IDF sparse side
    given = [CORPUS[2], CORPUS[4]]
    (pool,) = front.pools_over([FOREIGN], [given])
    assert pool.fusion.tolist() == pytest.approx([1 / 61, 1 / 62])  # the dense ranking alone


class OneTree:
    """Parses every question as the same small constituency tree."""

    def parse(self, questions):
        tree = "(ROOT (S (NP (NNP Wer)) (VP (VBD war) (NP (DT der) (NN Schlagzeuger) (PP (IN von) (NP (NNP Rush)))))))"
        return [SyntaxTree(q, from_bracketed(tree), "ct") for q in questions]


def test_tree_retrievals_pool_takes_no_zero_score_passages():
    search = TreeRetrieval(BM25Retriever(CORPUS), OneTree(), NoReranker(), kind="ct", k=10, keep=15, min_tokens=1)
    costs = [Cost()]
    trees, (result,) = search.search([GERMAN], costs)
    assert [h.passage.id for h in result] == ["a"]  # only "Rush" matches: one passage, not the corpus
    assert [[p.id for p in n.passages] for n in trees[0].nodes] == [["a"] if "Rush" in n.phrase else []
                                                                    for n in trees[0].nodes]  # fmt: skip
    assert costs[0].empty_results == sum("Rush" not in n.phrase for n in trees[0].nodes) == 5  # Wer, war, ...


def test_the_run_summary_counts_questions_with_an_empty_search(tmp_path):
    examples = [QAExample("q1", FOREIGN, ["Neil Peart"]), QAExample("q2", "the drummer of Rush", ["Neil Peart"])]
    llm = ScriptedLLM(default_reply="Neil Peart")
    method = StandardRAG(llm, BM25Retriever(CORPUS), prompt=ChatPrompt("Be brief.", "{passages}\n{question}"), k=5)
    metrics = run(method, examples, tmp_path)
    assert metrics["retrieval/empty_results"] == 1  # questions with at least one search that found nothing
    assert metrics["cost/mean/empty_results"] == 0.5 and metrics["cost/total/empty_results"] == 1
    assert metrics["retrieval/passages_read"] == pytest.approx(0.5)
