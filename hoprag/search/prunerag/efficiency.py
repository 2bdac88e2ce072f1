"""PruneRAG's Retrieval Efficiency (paper §4.5): RE = Recall / RN per dataset, averaged over datasets.

Recall is the per-question mean gold-passage recall (`retrieval/passage_recall_macro` of a run with
`metrics.passage_match=token_overlap`) and RN the retriever calls per question (`cost/mean/retrieval_calls`).
"""

from __future__ import annotations

from collections.abc import Iterable


def retrieval_efficiency(runs: Iterable[tuple[float, float]]) -> float:
    """Mean over datasets of recall / RN, from one (recall, rn) pair per dataset."""
    ratios = []
    for recall, rn in runs:
        if rn <= 0:
            raise ValueError(f"RN must be positive, got {rn}")
        ratios.append(recall / rn)
    if not ratios:
        raise ValueError("no runs given")
    return sum(ratios) / len(ratios)
