"""Which `top_k` chunks the web source keeps, from their dense and BM25 scores (spec/pruningrag.md §6.1 and §12;
Figure 4 compares dense, sparse and hybrid retrieval).

- dense (`sparse=0`, `sparse_weight=0`: the paper's base setting and the official code's default): the `top_k`
  chunks by cosine similarity.
- slots (`sparse=s`, the official code's hybrid): `s` of the `top_k` slots go to BM25. The best `top_k - s`
  chunks by cosine are kept first; then the best BM25 hits (score above 0) that are not kept yet fill the `s`
  slots. A chunk is kept once: a BM25 hit the dense step already kept is passed over for the next hit and
  counted (`sparse_repeats`). A slot for which BM25 has no further hit goes to the next chunk by cosine, so a
  question keeps `top_k` chunks whenever it has them, and is counted (`sparse_slots_to_dense`). The kept list
  holds the dense picks, then the BM25 picks, each best first. `sparse=top_k` is BM25 alone.
- weighted (`sparse_weight=w`): one ranking by `(1 - w) * dense + w * bm25`, each score first min-max scaled
  over the question's candidate chunks to [0, 1] (cosine lies in [-1, 1], BM25 is unbounded, so the raw scores
  do not add; scores that are all equal scale to 0). This is the convex combination Bruch et al. (2023, "An
  Analysis of Fusion Functions for Hybrid Retrieval") study. Equal fused scores fall to the cosine, so `w=1`
  ranks the BM25 hits first and the other chunks by cosine after them.

In both hybrid modes `sparse_without_hits` counts a question whose BM25 found no chunk sharing a word with it
(`hoprag.retrieval.sparse.lexical_hits`): its ranking is then the dense one. Scores still equal fall to chunk
order (page order), so the choice is deterministic.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

SLOTS_STATS = ("sparse_without_hits", "sparse_repeats", "sparse_slots_to_dense")
WEIGHTED_STATS = ("sparse_without_hits",)


def check(top_k: int, sparse: int, sparse_weight: float) -> None:
    """Refuses settings that name no single mode (both hybrids at once) or fall outside their range."""
    if not 0 <= sparse <= top_k:
        raise ValueError(f"sparse={sparse}: BM25's slots must be between 0 and top_k={top_k}")
    if not 0.0 <= sparse_weight <= 1.0:
        raise ValueError(f"sparse_weight={sparse_weight} must be between 0 and 1")
    if sparse and sparse_weight:
        raise ValueError(f"sparse={sparse} (BM25 slots) and sparse_weight={sparse_weight} (a weighted fusion) "
                         "are two hybrid modes: set one of them")  # fmt: skip


def uses_bm25(sparse: int, sparse_weight: float) -> bool:
    return bool(sparse or sparse_weight)


def stats(sparse: int, sparse_weight: float) -> tuple[str, ...]:
    """The per-question figures the mode reports (none for dense retrieval)."""
    return SLOTS_STATS if sparse else WEIGHTED_STATS if sparse_weight else ()


def pick(
    cosine: np.ndarray,
    bm25: np.ndarray | None,
    top_k: int,
    sparse: int = 0,
    sparse_weight: float = 0.0,
    tally: Counter[str] | None = None,
) -> list[int]:
    """The kept chunks' indices (see the module docstring); `bm25` holds each chunk's BM25 score (0: no hit)
    and is needed by the hybrid modes only; `tally` counts what the mode reports."""
    tally = Counter() if tally is None else tally
    dense = [int(i) for i in _best_first(cosine)]
    if not uses_bm25(sparse, sparse_weight):
        return dense[:top_k]
    if bm25 is None or len(bm25) != len(cosine):
        raise ValueError("a hybrid ranking needs one BM25 score per chunk")
    hits = [int(i) for i in _best_first(bm25) if bm25[i] > 0]
    tally["sparse_without_hits"] += not hits
    if sparse_weight:
        fused = (1.0 - sparse_weight) * _scaled(cosine) + sparse_weight * _scaled(bm25)
        order = np.lexsort((np.arange(len(fused)), -np.asarray(cosine, dtype=np.float64), -fused))
        return [int(i) for i in order[:top_k]]
    first = set(dense[: top_k - sparse])
    extra: list[int] = []
    for i in hits:
        if len(extra) == sparse:
            break
        if i in first:
            tally["sparse_repeats"] += 1
        else:
            extra.append(i)
    taken = set(extra)
    kept_dense = [i for i in dense if i not in taken][: top_k - len(extra)]
    tally["sparse_slots_to_dense"] += max(0, len(kept_dense) - (top_k - sparse))
    return kept_dense + extra


def _best_first(scores: np.ndarray) -> np.ndarray:
    return np.argsort(-np.asarray(scores, dtype=np.float64), kind="stable")


def _scaled(scores: np.ndarray) -> np.ndarray:
    """Min-max scaling to [0, 1]; all-equal scores carry no order and scale to 0."""
    values = np.asarray(scores, dtype=np.float64)
    if not len(values):
        return values
    low, high = values.min(), values.max()
    return (values - low) / (high - low) if high > low else np.zeros_like(values)
