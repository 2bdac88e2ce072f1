"""Solvers of the two-budget multiple-choice knapsack (MMKP) behind Self-Correcting RAG's selector.

Pick at most `max_per_group` items per group to maximise the summed value, with summed integer token
costs ≤ `token_budget` and summed integer redundancy costs ≤ `redundancy_budget` (spec §4.3).

- `pareto_dp`: the method's solver. Exact: a state dominated in (tokens, redundancy, value) can never
  extend to a better solution than its dominator does, so pruning to the Pareto frontier loses nothing.
  Each layer keeps parent pointers, so the chosen items are backtracked, not guessed.
- `dense_dp`: the textbook table over every (tokens, redundancy) capacity, vectorised; the reference.
- `brute_force`: enumeration, for tests on tiny instances.
- `official_greedy`: what the official code returns (group order, best fitting item), for parity.
- `fptas_knapsack`: the value-scaling FPTAS of the single-budget, one-item-per-group case (App. C.3).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np


@dataclass(frozen=True)
class MMKPInstance:
    """Items 0..n-1 with `values`, integer `tokens` and `redundancy` costs, partitioned into `groups`."""

    values: np.ndarray
    tokens: np.ndarray
    redundancy: np.ndarray
    groups: tuple[tuple[int, ...], ...]
    token_budget: int
    redundancy_budget: int
    max_per_group: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", np.asarray(self.values, dtype=np.float64))
        object.__setattr__(self, "tokens", np.asarray(self.tokens, dtype=np.int64))
        object.__setattr__(self, "redundancy", np.asarray(self.redundancy, dtype=np.int64))
        object.__setattr__(self, "groups", tuple(tuple(int(i) for i in g) for g in self.groups))
        n = len(self.values)
        if len(self.tokens) != n or len(self.redundancy) != n:
            raise ValueError("values, tokens and redundancy must have one entry per item")
        members = sorted(i for g in self.groups for i in g)
        if members != list(range(n)):
            raise ValueError("groups must partition the items 0..n-1")
        if (self.tokens < 0).any() or (self.redundancy < 0).any():
            raise ValueError("costs must be non-negative")
        if self.token_budget < 0 or self.redundancy_budget < 0 or self.max_per_group < 1:
            raise ValueError("budgets must be non-negative and max_per_group positive")

    @cached_property
    def options(self) -> list[tuple[list[tuple[int, ...]], np.ndarray, np.ndarray, np.ndarray]]:
        """Per group: its choices (item tuples of size 1..max_per_group) and their summed tokens,
        redundancy and value."""
        out = []
        for group in self.groups:
            choices = [c for size in range(1, self.max_per_group + 1) for c in itertools.combinations(group, size)]
            idx = [list(c) for c in choices]
            out.append(
                (
                    choices,
                    np.array([self.tokens[i].sum() for i in idx], dtype=np.int64),
                    np.array([self.redundancy[i].sum() for i in idx], dtype=np.int64),
                    np.array([self.values[i].sum() for i in idx], dtype=np.float64),
                )
            )
        return out

    def solution(self, items: Sequence[int], states: int = 0) -> Solution:
        """The solution choosing `items`, with value and costs summed from the items themselves."""
        items = tuple(sorted(int(i) for i in items))
        idx = list(items)
        return Solution(
            items,
            float(self.values[idx].sum()) if idx else 0.0,
            int(self.tokens[idx].sum()) if idx else 0,
            int(self.redundancy[idx].sum()) if idx else 0,
            states,
        )


@dataclass(frozen=True)
class Solution:
    """Chosen items (ascending), their summed value and costs, and the solver's work: the largest
    frontier (Pareto DP), the table cells (dense DP), the selections enumerated (brute force)."""

    items: tuple[int, ...]
    value: float
    tokens: int
    redundancy: int
    states: int = 0


def pareto_front(tokens: np.ndarray, redundancy: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Indices of the states no other state dominates (Eq. 6: value ≥ and both costs ≤); of identical
    states one is kept.

    States are swept by redundancy level, then tokens ascending and value descending. Within a level a state
    survives if it beats every earlier one; across levels, if it beats the best value reachable with ≤ its
    tokens at any lower level (a step function kept as sorted tokens with a running maximum).
    """
    order = np.lexsort((-values, tokens, redundancy))
    t, r, v = tokens[order], redundancy[order], values[order]
    starts = np.flatnonzero(np.concatenate(([True], r[1:] != r[:-1]))).tolist()
    ends = [*starts[1:], len(r)]
    env_t = env_v = None
    kept = []
    for level, (s, e) in enumerate(zip(starts, ends)):
        lt, lv = t[s:e], v[s:e]
        best_before = np.maximum.accumulate(lv)
        mask = np.empty(len(lv), dtype=bool)
        mask[0] = True
        np.greater(lv[1:], best_before[:-1], out=mask[1:])
        if env_t is not None:
            pos = np.searchsorted(env_t, lt, side="right") - 1
            mask &= (pos < 0) | (lv > env_v[np.maximum(pos, 0)])
        idx = np.flatnonzero(mask)
        kept.append(order[s + idx])
        if idx.size and level + 1 < len(starts):
            if env_t is None:
                env_t, env_v = lt[idx], lv[idx]  # already increasing in both
            else:
                merged_t = np.concatenate([env_t, lt[idx]])
                by_t = np.argsort(merged_t, kind="stable")
                env_t, env_v = merged_t[by_t], np.maximum.accumulate(np.concatenate([env_v, lv[idx]])[by_t])
    return np.concatenate(kept) if kept else np.empty(0, dtype=np.int64)


def pareto_dp(instance: MMKPInstance) -> Solution:
    """Exact Pareto-frontier DP over groups (App. C.4, Alg. 2) with per-layer parent pointers."""
    c_tok, c_red = instance.token_budget, instance.redundancy_budget
    tok = np.zeros(1, dtype=np.int64)
    red = np.zeros(1, dtype=np.int64)
    val = np.zeros(1, dtype=np.float64)
    layers: list[tuple[np.ndarray, np.ndarray] | None] = []  # None: every state skipped the group
    peak = 1
    for _, o_tok, o_red, o_val in instance.options:
        new_tok = tok[:, None] + o_tok[None, :]
        new_red = red[:, None] + o_red[None, :]
        state, choice = np.nonzero((new_tok <= c_tok) & (new_red <= c_red))
        if state.size == 0:
            layers.append(None)
            continue
        all_tok = np.concatenate([tok, new_tok[state, choice]])
        all_red = np.concatenate([red, new_red[state, choice]])
        all_val = np.concatenate([val, val[state] + o_val[choice]])
        parent = np.concatenate([np.arange(len(tok)), state])
        chosen = np.concatenate([np.full(len(tok), -1), choice])
        keep = pareto_front(all_tok, all_red, all_val)
        tok, red, val = all_tok[keep], all_red[keep], all_val[keep]
        layers.append((parent[keep], chosen[keep]))
        peak = max(peak, len(keep))
    at = int(np.argmax(val))
    reported = Solution((), float(val[at]), int(tok[at]), int(red[at]), peak)  # the DP's own figures
    items: list[int] = []
    for (choices, *_), layer in zip(reversed(instance.options), reversed(layers)):
        if layer is None:
            continue
        parent, chosen = layer
        if chosen[at] >= 0:
            items.extend(choices[chosen[at]])
        at = int(parent[at])
    return replace(reported, items=tuple(sorted(items)))


def dense_dp(instance: MMKPInstance) -> Solution:
    """Exact DP over the full (C_token + 1) × (C_red + 1) table of best values within each capacity,
    one vectorised shift-and-max per choice; a choice table per group gives the backtrack."""
    c_tok, c_red = instance.token_budget, instance.redundancy_budget
    table = np.zeros((c_tok + 1, c_red + 1), dtype=np.float64)
    picks: list[np.ndarray | None] = []
    for _, o_tok, o_red, o_val in instance.options:
        new, pick = table.copy(), None
        for j, (w1, w2, v) in enumerate(zip(o_tok.tolist(), o_red.tolist(), o_val.tolist())):
            if w1 > c_tok or w2 > c_red:
                continue
            candidate = table[: c_tok + 1 - w1, : c_red + 1 - w2] + v
            region = new[w1:, w2:]
            better = candidate > region
            if better.any():
                if pick is None:
                    pick = np.full(table.shape, -1, dtype=np.int32)
                region[better] = candidate[better]
                pick[w1:, w2:][better] = j
        picks.append(pick)
        table = new
    a, b = c_tok, c_red
    items: list[int] = []
    for (choices, o_tok, o_red, _), pick in zip(reversed(instance.options), reversed(picks)):
        j = -1 if pick is None else int(pick[a, b])
        if j >= 0:
            items.extend(choices[j])
            a, b = a - int(o_tok[j]), b - int(o_red[j])
    chosen = instance.solution(items, table.size * len(instance.groups))
    return replace(chosen, value=float(table[c_tok, c_red]))  # the table's optimum, not the items' sum


def brute_force(instance: MMKPInstance) -> Solution:
    """Every selection with at most `max_per_group` items per group (tests only: exponential)."""
    options = [
        [((), 0, 0, 0.0)] + list(zip(choices, o_tok.tolist(), o_red.tolist(), o_val.tolist()))
        for choices, o_tok, o_red, o_val in instance.options
    ]
    best, best_value, count = (), -1.0, 0
    for picks in itertools.product(*options):
        count += 1
        if sum(p[1] for p in picks) > instance.token_budget or sum(p[2] for p in picks) > instance.redundancy_budget:
            continue
        value = sum(p[3] for p in picks)
        if value > best_value:
            best, best_value = tuple(i for p in picks for i in p[0]), value
    return instance.solution(best, count)


def official_greedy(instance: MMKPInstance) -> Solution:
    """The official code's returned selection (spec §10.2): walk the groups in order and take the
    highest-value choice that fits what is left of both budgets."""
    left_tok, left_red = instance.token_budget, instance.redundancy_budget
    items: list[int] = []
    for choices, o_tok, o_red, o_val in instance.options:
        fits = np.flatnonzero((o_tok <= left_tok) & (o_red <= left_red))
        if fits.size:
            j = int(fits[np.argmax(o_val[fits])])
            items.extend(choices[j])
            left_tok -= int(o_tok[j])
            left_red -= int(o_red[j])
    return instance.solution(items)


SOLVERS = {"pareto_dp": pareto_dp, "dense_dp": dense_dp, "brute_force": brute_force, "official_greedy": official_greedy}


def fptas_knapsack(
    values: Sequence[float], weights: Sequence[int], capacity: int, eps: float = 0.1
) -> tuple[list[int], float]:
    """(1 − ε)-optimal 0/1 knapsack (App. C.3, Alg. 1): scale values by K = ε·P/n, then a min-weight DP
    over scaled value with a per-item choice table for the backtrack. Items heavier than the capacity
    (and worthless ones) are dropped first, which the OPT ≥ P argument needs. Returns (items, value)."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    values_a = np.asarray(values, dtype=np.float64)
    weights_a = np.asarray(weights, dtype=np.int64)
    keep = np.flatnonzero((weights_a <= capacity) & (values_a > 0))
    if keep.size == 0:
        return [], 0.0
    scale = eps * values_a[keep].max() / keep.size
    scaled = np.floor(values_a[keep] / scale).astype(np.int64)
    top = int(scaled.sum())
    lightest = np.full(top + 1, np.inf)  # least weight reaching each scaled value
    lightest[0] = 0.0
    took = np.zeros((keep.size, top + 1), dtype=bool)
    for row, (s, w) in enumerate(zip(scaled.tolist(), weights_a[keep].tolist())):
        candidate = lightest[: top + 1 - s] + w
        better = candidate < lightest[s:]
        lightest[s:][better] = candidate[better]
        took[row, s:][better] = True
    p = int(np.flatnonzero(lightest <= capacity).max())
    items = []
    for row in range(keep.size - 1, -1, -1):
        if took[row, p]:
            items.append(int(keep[row]))
            p -= int(scaled[row])
    items.sort()
    return items, float(values_a[items].sum())
