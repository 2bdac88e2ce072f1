"""The web source's hybrid chunk choice (spec/pruningrag.md §6.1 and §12, Figure 4): the code's BM25 slots and a
weighted fusion, their duplicates and empty slots counted, on scores given directly and through `WebSource`."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from hoprag.retrieval.embedders import Embedder
from hoprag.sources import WebSource, hybrid, web

# five chunks: dense prefers 0 > 1 > 2 > 3 > 4; BM25 prefers 3 > 0 > 4, and 1 and 2 are no hits
COSINE = np.array([0.9, 0.8, 0.7, 0.1, 0.0])
BM25 = np.array([2.0, 0.0, 0.0, 5.0, 1.0])


def test_dense_only_keeps_the_top_k_by_cosine_and_ignores_bm25():
    assert hybrid.pick(COSINE, None, 3) == [0, 1, 2]
    assert hybrid.pick(np.array([0.5, 0.9, 0.5, 0.9]), None, 3) == [1, 3, 0]  # ties in chunk order
    assert hybrid.pick(COSINE[:2], None, 3) == [0, 1]
    assert hybrid.stats(0, 0.0) == ()


def test_slots_give_s_of_the_top_k_to_the_best_bm25_hits_not_kept_yet():
    tally = Counter()
    assert hybrid.pick(COSINE, BM25, 3, sparse=1, tally=tally) == [0, 1, 3]  # dense 0, 1; then BM25's best
    assert tally == Counter({"sparse_without_hits": 0, "sparse_slots_to_dense": 0})
    tally = Counter()
    assert hybrid.pick(COSINE, BM25, 3, sparse=2, tally=tally) == [0, 3, 4]  # BM25's 0 was kept by dense: next
    assert tally["sparse_repeats"] == 1 and tally["sparse_slots_to_dense"] == 0
    assert hybrid.pick(COSINE, BM25, 3, sparse=3) == [3, 0, 4]  # BM25 alone, best first


def test_a_bm25_slot_without_a_further_hit_goes_to_the_next_dense_chunk_and_is_counted():
    tally = Counter()
    assert hybrid.pick(COSINE, np.zeros(5), 3, sparse=2, tally=tally) == [0, 1, 2]
    assert tally == Counter({"sparse_without_hits": 1, "sparse_slots_to_dense": 2})
    only_kept = np.array([3.0, 1.0, 0.0, 0.0, 0.0])  # BM25's two hits are the dense picks
    tally = Counter()
    assert hybrid.pick(COSINE, only_kept, 3, sparse=1, tally=tally) == [0, 1, 2]
    assert tally == Counter({"sparse_without_hits": 0, "sparse_repeats": 2, "sparse_slots_to_dense": 1})
    tally = Counter()
    assert hybrid.pick(COSINE[:2], only_kept[:2], 3, sparse=1, tally=tally) == [0, 1]  # fewer chunks than k
    assert tally["sparse_slots_to_dense"] == 0


def test_weighted_fuses_min_max_scaled_scores():
    # scaled: cosine [1, .889, .778, .111, 0], BM25 [.4, 0, 0, 1, .2]
    assert hybrid.pick(COSINE, BM25, 3, sparse_weight=0.5) == [0, 3, 1]  # .7, .556, .444
    assert hybrid.pick(COSINE, BM25, 3, sparse_weight=1.0) == [3, 0, 4]  # BM25 alone
    assert hybrid.pick(COSINE[::-1], BM25, 5, sparse_weight=1.0) == [3, 0, 4, 2, 1]  # the other chunks by cosine
    assert hybrid.pick(COSINE * 10 - 3, BM25, 3, sparse_weight=0.5) == [0, 3, 1]  # the scale does not matter
    tally = Counter()
    assert hybrid.pick(COSINE, np.zeros(5), 3, sparse_weight=0.7, tally=tally) == [0, 1, 2]  # BM25 adds nothing
    assert tally == Counter({"sparse_without_hits": 1}) and hybrid.stats(0, 0.7) == ("sparse_without_hits",)


@pytest.mark.parametrize(
    "sparse, weight, message",
    [(4, 0.0, "between 0 and top_k"), (-1, 0.0, "between 0 and top_k"), (0, 1.5, "between 0 and 1"),
     (1, 0.5, "set one of them")],
)  # fmt: skip
def test_settings_that_name_no_single_mode_are_refused(sparse, weight, message):
    with pytest.raises(ValueError, match=message):
        hybrid.check(3, sparse, weight)
    with pytest.raises(ValueError, match=message):
        WebSource(WordEmbedder(), sparse=sparse, sparse_weight=weight, cache=False)


class WordEmbedder(Embedder):
    """A text's vector: [times it says "dense", 0.05]: only "dense" moves the cosine."""

    def __init__(self) -> None:
        super().__init__(name="word", model="test://word")

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        return np.array([[len(re.findall(r"\bdense\b", t)), 0.05] for t in texts], np.float32)


def snippets(*texts: str) -> list[dict]:
    return [{"page_name": f"p{i}", "page_url": f"https://example.org/{i}", "page_snippet": text, "page_result": ""}
            for i, text in enumerate(texts)]  # fmt: skip


PAGES = snippets("dense dense", "dense", "filler words", "zebra", "zebra stripes zebra")


def kept(source: WebSource, question: str, pages=PAGES) -> list[str]:
    (top,) = source.retrieve([question], [pages])
    return [c.text for c in top]


def test_the_web_source_mixes_bm25_into_its_choice_and_reports_what_happened():
    dense = WebSource(WordEmbedder(), cache=False)
    assert kept(dense, "dense zebra") == ["dense", "dense dense", "filler words"]
    assert set(dense.question_stats[0]) == set(web.STATS)  # no hybrid figures without a hybrid
    slots = WebSource(WordEmbedder(), sparse=1, cache=False)
    top = kept(slots, "dense zebra")
    assert top[:2] == ["dense", "dense dense"] and "zebra" in top[2]  # BM25's slot: its best hit not kept yet
    assert slots.question_stats[0]["sparse_slots_to_dense"] == 0
    assert kept(slots, "dense") == ["dense", "dense dense", "filler words"]  # BM25's hits were kept already
    assert slots.question_stats[0]["sparse_repeats"] == 2 and slots.question_stats[0]["sparse_slots_to_dense"] == 1
    bm25_alone = WebSource(WordEmbedder(), sparse=3, cache=False)
    top = kept(bm25_alone, "zebra")  # two hits for three slots: the third goes to the best dense chunk
    assert top[0] == "filler words" and set(top[1:]) == {"zebra", "zebra stripes zebra"}
    assert bm25_alone.question_stats[0]["sparse_slots_to_dense"] == 1
    weighted = WebSource(WordEmbedder(), sparse_weight=1.0, cache=False)
    assert kept(weighted, "zebra")[:2] == top[1:]
    assert kept(weighted, "nothing here") == kept(dense, "nothing here")  # no hit: the dense ranking
    assert weighted.question_stats[0] == {**dict.fromkeys(web.STATS, 0.0), "pages_without_html": 5.0,
                                          "sparse_without_hits": 1.0}  # fmt: skip


def test_with_bm25_pre_retrieval_the_hybrid_ranks_the_survivors_with_their_scores():
    source = WebSource(WordEmbedder(), sparse=1, bm25_above_pages=0, bm25_top=3, cache=False)
    survivors, scores = source.scored_candidates("dense zebra", PAGES)
    assert len(survivors) == 3 and all(s > 0 for s in scores) and list(scores) == sorted(scores, reverse=True)
    top = kept(source, "dense zebra")
    assert set(top) <= {c.text for c in survivors} and len(top) == 3
