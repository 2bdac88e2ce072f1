"""The trainable reranker's parts without a model: hard-negative mining and its false-negative filter, the listwise
and pairwise losses, the ranking figures validation logs, the training groups a batch is made of, and the
cross-encoder's score cache that Tree-Retrieval's level-by-level reranking relies on."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest
import torch

from hoprag.data import QAExample, make_passage
from hoprag.rerankers.data import Group, GroupCollator
from hoprag.rerankers.losses import listwise_loss, pairwise_loss
from hoprag.rerankers.mining import drop_false_negatives, gold_passages, mine
from hoprag.rerankers.ranking import metrics, order_metrics, question_row
from hoprag.retrieval import BM25Retriever, CrossEncoderReranker, Hit
from hoprag.retrieval import embedders as embedders_module

PARIS = make_passage("Paris", "Paris is the capital of France, on the Seine.")
PARIS_AGAIN = make_passage("Paris", "Paris, capital of France, has about two million inhabitants.")  # another id
SEINE = make_passage("Seine", "The Seine flows through Paris and Rouen to the English Channel.")
LYON = make_passage("Lyon", "Lyon is a city in France on the Rhone, far from the capital.")
ROME = make_passage("Rome", "Rome is the capital of Italy.")


def question(supporting: list[str], context: list) -> QAExample:
    return QAExample("q1", "Which river flows through the capital of France?", ["Seine"],
                     supporting_titles=supporting, context=context)  # fmt: skip


def hits(*passages) -> list[Hit]:
    return [Hit(p, 1.0 / rank, rank) for rank, p in enumerate(passages, start=1)]


def test_gold_passages_are_the_questions_own_gold_titled_paragraphs():
    ex = question(["Paris", "Seine"], [LYON, SEINE, PARIS, ROME])
    assert gold_passages(ex) == [SEINE, PARIS]


def test_the_filter_drops_every_gold_titled_hit_whatever_its_id():
    kept, dropped = drop_false_negatives(hits(PARIS_AGAIN, LYON, SEINE, ROME), ["Paris", "Seine"])
    assert kept == [LYON, ROME] and dropped == 2  # PARIS_AGAIN is not the question's paragraph, yet gold by title


def test_mining_searches_the_pooled_corpus_and_counts_what_it_dropped():
    ex = question(["Paris", "Seine"], [PARIS, SEINE, LYON])
    retriever = BM25Retriever([PARIS, PARIS_AGAIN, SEINE, LYON, ROME])  # no cache_dir: nothing written
    mined = mine([ex], retriever, depth=5)
    assert mined.dropped == 3  # both Paris paragraphs and the Seine one are hits of this question
    assert [p.title for p in mined.negatives[0]] and {p.title for p in mined.negatives[0]} <= {"Lyon", "Rome"}
    assert mine([ex], retriever, depth=1).negatives == [[]]  # the top hit was gold: fewer negatives, none gold


def test_listwise_loss_is_the_positives_softmax_cross_entropy_and_ignores_padding():
    scores = torch.tensor([[2.0, 1.0, 0.0], [0.5, 1.5, 99.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    expected = -(torch.log_softmax(torch.tensor([2.0, 1.0, 0.0]), 0)[0]
                 + torch.log_softmax(torch.tensor([0.5, 1.5]), 0)[0]) / 2  # fmt: skip
    assert listwise_loss(scores, mask) == pytest.approx(float(expected))


def test_pairwise_loss_averages_the_logistic_loss_over_real_pairs():
    scores = torch.tensor([[1.0, 1.0, -1.0], [0.0, 2.0, 99.0]])
    mask = torch.tensor([[True, True, True], [True, True, False]])
    softplus = torch.nn.functional.softplus
    expected = (softplus(torch.tensor(0.0)) + softplus(torch.tensor(-2.0)) + softplus(torch.tensor(2.0))) / 3
    assert pairwise_loss(scores, mask) == pytest.approx(float(expected))


@pytest.mark.parametrize("loss", [listwise_loss, pairwise_loss])
def test_both_losses_push_the_positive_up_and_the_negatives_down(loss):
    scores = torch.zeros(2, 4, requires_grad=True)
    loss(scores, torch.ones(2, 4, dtype=torch.bool)).backward()
    assert (scores.grad[:, 0] < 0).all() and (scores.grad[:, 1:] > 0).all()  # descent raises column 0


def test_ranking_rows_count_gold_titles_per_cutoff_and_the_first_golds_reciprocal_rank():
    row = question_row(["Lyon", "Paris", "Rome", "Seine"], ["Paris", "Seine", "Nile"], ks=[1, 2, 10])
    assert row.tolist() == [0, 1, 2, 0.5, 3]  # the Nile is not in the pool: missed at every cut-off
    assert question_row(["Lyon"], ["Paris"], ks=[1]).tolist() == [0, 0.0, 1]  # no gold in the pool: rank 0
    figures = metrics(row + question_row(["Paris"], ["Paris"], ks=[1, 2, 10]), 2, [1, 2, 10], "val/")
    assert figures == {"val/recall@1": 25.0, "val/recall@2": 50.0, "val/recall@10": 75.0, "val/mrr": 0.75}
    assert order_metrics([["Paris"]], [["Paris"]], [1], "x/") == {"x/recall@1": 100.0, "x/mrr": 1.0}


def test_a_group_batches_its_positive_first_then_distinct_negatives_and_masks_the_padding():
    tokenized = []

    def tokenize(queries, passages):
        tokenized.append((queries, passages))
        return {"input_ids": torch.zeros(len(queries), 3, dtype=torch.long)}

    ex = question(["Paris", "Seine"], [PARIS, SEINE, LYON])
    data = SimpleNamespace(bm25_negatives=2, dense_negatives=2, train_questions=[ex], tokenize=tokenize,
                           bm25_mined=[[LYON, ROME]], dense_mined=[[ROME]])  # fmt: skip
    batch = GroupCollator(data, seed=0)([Group(0, SEINE), Group(0, PARIS)])
    assert batch["mask"].tolist() == [[True, True, True, False, False]] * 2  # Rome is drawn once: no dense one left
    queries, passages = tokenized[0]
    assert set(queries) == {ex.question} and len(passages) == 10
    assert passages[0] == SEINE.contents and passages[5] == PARIS.contents
    assert sorted(passages[1:3]) == sorted([LYON.contents, ROME.contents])


class CountingCrossEncoder:
    """Stands in for sentence-transformers' CrossEncoder: scores a pair by its shared words, recording each call."""

    predicted: ClassVar[list[list[tuple[str, str]]]] = []

    def __init__(self, path, device=None, max_length=None):
        pass

    def predict(self, pairs, batch_size=32, show_progress_bar=None, convert_to_numpy=True):
        CountingCrossEncoder.predicted.append(list(pairs))
        return np.array([len(set(q.lower().split()) & set(p.lower().split())) for q, p in pairs], dtype=np.float32)


def test_a_cached_cross_encoder_scores_each_pair_once_across_tree_levels(monkeypatch):
    monkeypatch.setattr(embedders_module, "_MODELS", {})
    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(CrossEncoder=CountingCrossEncoder))
    CountingCrossEncoder.predicted = []
    q = "which river flows through paris"
    cached, plain = (
        CrossEncoderReranker("local/ce", device="cpu", cache_size=10),
        CrossEncoderReranker("local/ce", device="cpu"),
    )
    for reranker in (cached, plain):
        leaf = reranker.rerank([q], [hits(SEINE, LYON)], k=2)[0]  # a child node's list ...
        root = reranker.rerank([q], [hits(PARIS) + leaf], k=2)[0]  # ... reranked again at its parent
        assert [h.passage for h in root] == [SEINE, PARIS]  # the same order with or without the cache
    cached_calls, plain_calls = CountingCrossEncoder.predicted[:2], CountingCrossEncoder.predicted[2:]
    assert [len(c) for c in cached_calls] == [2, 1] and [len(c) for c in plain_calls] == [2, 3]
    small = CrossEncoderReranker("local/ce", device="cpu", cache_size=1)
    assert [h.passage for h in small.rerank([q], [hits(SEINE, LYON)], k=None)[0]] == [SEINE, LYON]  # over the cap
