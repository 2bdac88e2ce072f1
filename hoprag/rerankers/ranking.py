"""How well an order of a question's candidate pool ranks its gold passages: gold-title recall at each cut-off and
the reciprocal rank of the first gold passage, summed over questions (so ranks of a distributed run can add them).

Titles are matched as the gold-passage recall metric matches them (`hoprag.metrics.retrieval.passage_hits`); a gold
passage missing from the pool counts as missed at every cut-off and a pool without one scores reciprocal rank 0, so
every order of the same pools is measured against the same ceiling (the pool's own recall).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hoprag.metrics.retrieval import passage_hits


def question_row(ranked_titles: Sequence[str], gold_titles: Sequence[str], ks: Sequence[int]) -> np.ndarray:
    """[gold hits in the top k for each k, reciprocal rank of the first gold, distinct gold titles] of one question."""
    gold = set(gold_titles)
    first = next((rank for rank, title in enumerate(ranked_titles, start=1) if title in gold), None)
    hits = [passage_hits(ranked_titles[:k], gold) for k in ks]
    return np.asarray([*hits, 1.0 / first if first else 0.0, len(gold)], dtype=np.float64)


def metrics(total: np.ndarray, n_questions: int, ks: Sequence[int], prefix: str) -> dict[str, float]:
    """`<prefix>recall@k` (micro, percent) and `<prefix>mrr` (0 to 1) from the sum of `question_row`s."""
    gold = float(total[len(ks) + 1])
    figures = {f"{prefix}recall@{k}": 100.0 * float(total[i]) / gold if gold else 0.0 for i, k in enumerate(ks)}
    figures[f"{prefix}mrr"] = float(total[len(ks)]) / n_questions if n_questions else 0.0
    return figures


def order_metrics(
    orders: Sequence[Sequence[str]], golds: Sequence[Sequence[str]], ks: Sequence[int], prefix: str
) -> dict[str, float]:
    """`metrics` of given title orders, one per question (e.g. BM25's own order of the pools)."""
    rows = [question_row(order, gold, ks) for order, gold in zip(orders, golds)]
    total = np.sum(rows, axis=0) if rows else np.zeros(len(ks) + 2)
    return metrics(total, len(rows), ks, prefix)
