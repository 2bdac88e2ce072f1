"""Word-window chunking (issue 19): windows cover every word, chunks keep their article's title, and
overlapping chunks of one article become near-duplicates that MMKP groups together."""

from __future__ import annotations

import numpy as np
import pytest

from hoprag.data.types import Passage
from hoprag.metrics.retrieval import passage_recall_at_k
from hoprag.selectors import CandidatePool, MMKPSelector, TokenCounter, TopKSelector, chunk_passages, leader_clusters
from hoprag.selectors.chunks import windows


def test_windows_cover_every_word_with_the_given_overlap():
    assert windows(5, 100, 100) == [(0, 5)]
    assert windows(0, 100, 100) == [(0, 0)]
    assert windows(250, 100, 100) == [(0, 100), (100, 200), (150, 250)]
    assert windows(88, 60, 30) == [(0, 60), (28, 88)]
    assert windows(120, 60, 30) == [(0, 60), (30, 90), (60, 120)]
    for bad in ((0, 1), (10, 0), (10, 11)):
        with pytest.raises(ValueError, match="stride"):
            windows(50, *bad)


def test_chunks_keep_title_and_origin_and_number_their_ids():
    text = " ".join(f"w{i}" for i in range(120))
    chunks = chunk_passages([Passage("a", "Alpha", text, "web"), Passage("b", "Beta", "short text")], 60, 30)
    assert [c.id for c in chunks] == ["a#0", "a#1", "a#2", "b#0"]
    assert {c.title for c in chunks[:3]} == {"Alpha"} and chunks[0].origin == "web"
    assert chunks[1].text.split()[0] == "w30" and len(chunks[1].text.split()) == 60
    assert [c.text for c in chunk_passages([Passage("b", "Beta", "short text")])] == ["short text"]


def test_one_article_filling_the_top_five_is_where_groups_help():
    """Five near-duplicate chunks of one gold article rank first, the second gold article sixth: top-k at
    five passages' budget finds one of two gold titles; MMKP takes one chunk per group and reaches both."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=(3, 32))
    dup = [base[0] + 0.05 * rng.normal(size=32) for _ in range(5)]
    vectors = np.vstack([*dup, base[1], base[2]])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    titles = ["A"] * 5 + ["B", "C"]
    passages = [Passage(f"p{i}", t, "w " * 10) for i, t in enumerate(titles)]
    pool = CandidatePool("q", passages, np.linspace(1, 0.4, 7), np.zeros(7), vectors)
    assert len(leader_clusters(pool.vectors, 0.82)) == 3
    counter = TokenCounter("words")  # 13 tokens each
    budget = 5 * 13
    top = TopKSelector(k=None, token_budget=budget, token_counter=counter).select("q", pool)
    mmkp = MMKPSelector(token_budget=budget, token_counter=counter).select("q", pool)
    gold = ["A", "B"]
    assert passage_recall_at_k([p.title for p in top.passages], gold, 5) == 0.5
    assert passage_recall_at_k([p.title for p in mmkp.passages], gold, 5) == 1.0
