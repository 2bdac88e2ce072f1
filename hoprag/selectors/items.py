"""From a candidate pool to an MMKP instance: groups, values and costs exactly as spec §4.1–4.2."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hoprag.selectors.solvers import MMKPInstance

DIVERSITY = ("mean_pairwise", "centroid")
VALUES = ("paper", "above_median", "per_token", "offset")
SIM_TOLERANCE = 1e-6


def leader_clusters(vectors: np.ndarray, threshold: float) -> list[list[int]]:
    """Leader clustering in row order: each unassigned row opens a group as its seed and takes every later
    unassigned row whose cosine to the seed is ≥ `threshold` (the seed is never updated). Rows are
    L2-normalised vectors; groups come out in seed order. Cosines are compared with a 1e-6 tolerance so
    that exact duplicates (cosine 1 up to rounding) share a group even at τ = 1."""
    n = len(vectors)
    sims = vectors @ vectors.T if n else np.zeros((0, 0))
    group_of = np.full(n, -1)
    groups: list[list[int]] = []
    for seed in range(n):
        if group_of[seed] >= 0:
            continue
        later = np.flatnonzero((group_of < 0) & (sims[seed] >= threshold - SIM_TOLERANCE))
        later = later[later > seed]
        group_of[seed] = len(groups)
        group_of[later] = len(groups)
        groups.append([seed, *later.tolist()])
    return groups


def minmax(x: np.ndarray) -> np.ndarray:
    """(x − min)/(max − min) over the pool; 0.5 everywhere when the pool is constant (spread < 1e-9)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return x
    spread = x.max() - x.min()
    return np.full_like(x, 0.5) if spread < 1e-9 else (x - x.min()) / spread


def mean_group_similarity(vectors: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """s̄ of each item: its mean cosine to the other members of its group; 0 in a singleton."""
    out = np.zeros(len(vectors), dtype=np.float64)
    for group in groups:
        if len(group) > 1:
            g = np.asarray(group)
            sims = vectors[g] @ vectors[g].T
            out[g] = (sims.sum(axis=1) - np.diag(sims)) / (len(g) - 1)
    return out


def centroid_diversity(vectors: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """Eq. 4's 1 − cos(d, μ_G), with μ_G the group's mean embedding; 1 for a singleton."""
    out = np.ones(len(vectors), dtype=np.float64)
    for group in groups:
        if len(group) > 1:
            g = np.asarray(group)
            centroid = vectors[g].mean(axis=0)
            centroid = centroid / max(float(np.linalg.norm(centroid)), 1e-12)
            out[g] = 1.0 - vectors[g] @ centroid
    return out


def item_values(paper: np.ndarray, tokens: np.ndarray, value: str = "paper", offset: float = 0.5) -> np.ndarray:
    """Values that need not reward quantity. The paper's α·rel + β·div is positive for every item, so under
    a token budget the optimum packs in as many (short) items as fit. Alternatives:

    - `above_median`: the paper's value minus its pool median; only above-median items add value (the
      others are never worth a token);
    - `per_token`: the paper's value per token, scaled by the pool's median token cost;
    - `offset`: the paper's value minus a fixed per-item `offset`.
    """
    if value not in VALUES:
        raise ValueError(f"value must be one of {VALUES}, got {value!r}")
    if value == "above_median" and paper.size:
        return paper - np.median(paper)
    if value == "per_token" and paper.size:
        return paper * float(np.median(tokens)) / np.maximum(tokens, 1)
    if value == "offset":
        return paper - offset
    return paper


def build_instance(
    relevance: np.ndarray,
    vectors: np.ndarray,
    token_costs: Sequence[int],
    *,
    threshold: float = 0.82,
    alpha: float = 0.7,
    beta: float = 0.3,
    redundancy_scale: float = 100.0,
    diversity: str = "mean_pairwise",
    token_budget: int = 1500,
    redundancy_budget: int = 120,
    max_per_group: int = 1,
    value: str = "paper",
    value_offset: float = 0.5,
) -> MMKPInstance:
    """Items in pool order: groups by leader clustering at `threshold`; value α·minmax(relevance) +
    β·diversity (`value="paper"`; see `item_values` for the others); costs (tokens, round(max(0, λ_red·s̄))).
    A redundancy budget of λ_red·n or more turns C_red off (Table 5's "only hard constraint" row)."""
    if diversity not in DIVERSITY:
        raise ValueError(f"diversity must be one of {DIVERSITY}, got {diversity!r}")
    vectors = np.asarray(vectors, dtype=np.float64)
    groups = leader_clusters(vectors, threshold)
    s_bar = mean_group_similarity(vectors, groups)
    div = 1.0 - s_bar if diversity == "mean_pairwise" else centroid_diversity(vectors, groups)
    tokens = np.asarray(token_costs, dtype=np.int64)
    values = item_values(alpha * minmax(relevance) + beta * div, tokens, value, value_offset)
    redundancy = [int(round(max(0.0, redundancy_scale * s))) for s in s_bar]
    return MMKPInstance(
        values=values,
        tokens=tokens,
        redundancy=np.asarray(redundancy, dtype=np.int64),
        groups=tuple(tuple(g) for g in groups),
        token_budget=int(token_budget),
        redundancy_budget=int(redundancy_budget),
        max_per_group=max_per_group,
    )
