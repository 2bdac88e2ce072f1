"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009): combines rankings by rank alone, so
scores on different scales (BM25, cosine) need no calibration.

Every fused score is positive, so fusion cannot tell a hit from a non-hit: a fused passage is a hit because
it is a hit of at least one input ranking. Callers pass rankings of hits only (what `Retriever.search`
returns), never a lexical ranking's zero-score tail.
"""

from __future__ import annotations

from collections.abc import Sequence


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """score(d) = sum over rankings r of weight_r / (k + rank_r(d)), with 1-based ranks.

    Returns (id, score) best first. Equal scores keep the order in which ids first appear (ranking by
    ranking, top to bottom). An id repeated within one ranking counts at its first position only.
    """
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[str, float] = {}
    for ranking, weight in zip(rankings, weights):
        seen: set[str] = set()
        for rank, doc_id in enumerate(ranking, start=1):
            if doc_id in seen:
                continue
            seen.add(doc_id)
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])
