"""The Figure 3 inference loop, batched: one search per hop for every live branch of every question.

Hop 1 keeps the top K of each question. At each later hop every kept branch searches top K; candidates
already retrieved at an earlier hop are dropped (redundancy pruning), and of what is left each question keeps
exactly its K best across all branches (layer-wise top-K), ties broken stably by branch then rank. Kept
candidates spawn the next-hop queries `step(q, v)`; a passage found by two branches of one layer is counted
once but both branches go on (spec/treehop.md §7). `official_rank_quirk` reproduces the released code's
selection (ascending argsort positions read as ranks), which is not the top K once a layer has two branches.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

Search = Callable[[np.ndarray, np.ndarray, int], tuple[np.ndarray, np.ndarray]]
"""search(unit query vectors [n, d], owner question of each [n], k) -> (scores [n, k'], rows [n, k']); row -1 = none."""
Step = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""step(queries [n, d], chunk vectors [n, d]) -> next queries [n, d] (raw, not normalised)."""


@dataclass
class TreeResult:
    """One question's retrieval: the passage rows first kept at each hop (score order) and their scores,
    plus the number of candidates each hop searched and kept (for the tree-size figures)."""

    hops: list[list[int]] = field(default_factory=list)
    scores: list[list[float]] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # cumulative batch wall time per question after each hop

    def rows(self, n_hops: int | None = None) -> list[int]:
        """Distinct rows after `n_hops` hops (all by default), in reading order: hop by hop, best first."""
        return [r for hop in self.hops[:n_hops] for r in hop]


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def official_keep(scores: np.ndarray, k: int) -> np.ndarray:
    """The released code's keep-mask: ascending argsort *positions* compared with n − k as if they were
    ranks. Equals the true top k only for a single sorted list (hop 1)."""
    positions = np.argsort(scores, kind="stable")
    return positions >= len(scores) - k


def topk_keep(scores: np.ndarray, k: int) -> np.ndarray:
    """Exactly the k best (stable: earlier candidates win ties); candidates are in branch, then rank order."""
    keep = np.zeros(len(scores), dtype=bool)
    keep[np.argsort(-scores, kind="stable")[:k]] = True
    return keep


def tree_search(
    queries: np.ndarray,
    passages: np.ndarray,
    search: Search,
    step: Step | None,
    top_k: int = 5,
    n_hops: int = 2,
    redundancy_pruning: bool = True,
    layerwise_topk: bool = True,
    official_rank_quirk: bool = False,
) -> list[TreeResult]:
    """Run `n_hops` retrieval rounds from the (normalised) question vectors `queries` [B, d].

    `passages` [N, d] are the chunk vectors fed to `step`; `step=None` only allows one hop (direct top-K).
    """
    if n_hops > 1 and step is None:
        raise ValueError("more than one hop needs a step function (TreeHop or q − c)")
    results = [TreeResult() for _ in range(len(queries))]
    seen: list[set[int]] = [set() for _ in results]
    frontier, owners = np.asarray(queries, dtype=np.float32), np.arange(len(queries))
    started = time.perf_counter()
    for hop in range(1, n_hops + 1):
        if len(frontier) == 0:
            for r in results:
                r.hops.append([]), r.scores.append([]), r.candidates.append(0), r.kept.append(0)
                r.seconds.append(r.seconds[-1])
            continue
        scores, rows = search(unit(frontier), owners, top_k)
        next_q, next_c, next_owner = [], [], []
        for b, result in enumerate(results):
            branches = np.flatnonzero(owners == b)
            cand_rows = rows[branches].reshape(-1)
            cand_scores = scores[branches].reshape(-1).astype(np.float64)
            cand_branch = np.repeat(branches, rows.shape[1])
            valid = cand_rows >= 0
            if redundancy_pruning and not official_rank_quirk:
                valid &= ~np.isin(cand_rows, list(seen[b]))
            cand_rows, cand_scores, cand_branch = cand_rows[valid], cand_scores[valid], cand_branch[valid]
            if official_rank_quirk and redundancy_pruning:
                cand_scores = np.where(np.isin(cand_rows, list(seen[b])), -5.0, cand_scores)
            if not layerwise_topk:
                keep = np.ones(len(cand_rows), dtype=bool)
            elif official_rank_quirk:
                keep = official_keep(cand_scores, top_k)
            else:
                keep = topk_keep(cand_scores, top_k)
            order = np.flatnonzero(keep)[np.argsort(-cand_scores[keep], kind="stable")]
            new = []
            for i in order:
                row = int(cand_rows[i])
                if row not in seen[b]:
                    seen[b].add(row)
                    new.append(i)
            result.hops.append([int(cand_rows[i]) for i in new])
            result.scores.append([float(cand_scores[i]) for i in new])
            result.candidates.append(len(cand_rows))
            result.kept.append(int(keep.sum()))
            if hop < n_hops:
                kept = np.flatnonzero(keep)
                next_q.append(frontier[cand_branch[kept]])
                next_c.append(passages[cand_rows[kept]])
                next_owner.append(np.full(len(kept), b))
        share = (time.perf_counter() - started) / max(1, len(results))
        for result in results:
            result.seconds.append(share)
        if hop < n_hops:
            q, c = np.concatenate(next_q), np.concatenate(next_c)
            frontier = step(q, c).astype(np.float32) if len(q) else q
            owners = np.concatenate(next_owner)
    return results
