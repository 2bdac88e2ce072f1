"""Context selectors behind one interface: a fused candidate pool in, the chosen passages (in fused order) out.

- `MMKPSelector`: Self-Correcting RAG's phase I (spec §4): groups, values, costs, and an exact solver.
- `TopKSelector`: the first k of the fused ranking (Naive RAG).
- `MMRSelector`: maximal marginal relevance (λ = 0.6) filling the same token budget (RAG + MMR).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from hoprag.selectors.items import VALUES, build_instance, minmax
from hoprag.selectors.pool import CandidatePool, Selection
from hoprag.selectors.solvers import SOLVERS, Solution
from hoprag.selectors.tokens import TokenCounter


class Selector:
    """`select(question, pool)` → `Selection`. Token costs come from `token_counter`, which a method builds
    with its generator and prompt format (a Hydra `_partial_` selector is completed with it), so they are
    counted with the generator's tokenizer."""

    name: ClassVar[str] = "selector"

    def __init__(self, token_counter: TokenCounter | None = None, token_budget: int | None = 1500) -> None:
        self.token_counter = token_counter or TokenCounter()
        self.token_budget = token_budget

    def select(self, question: str, pool: CandidatePool) -> Selection:
        raise NotImplementedError

    def _selection(self, pool: CandidatePool, indices: list[int], tokens: np.ndarray, **kw: Any) -> Selection:
        return Selection(
            indices=list(indices),
            passages=[pool.passages[i] for i in indices],
            tokens=int(tokens[list(indices)].sum()) if indices else 0,
            token_budget=self.token_budget,
            **kw,
        )


class MMKPSelector(Selector):
    """Leader-clustered groups at `sim_threshold`, values α·rel + β·diversity, costs (tokens,
    λ_red·s̄), solved by `solver` (pareto_dp | dense_dp | official_greedy | brute_force) under
    (`token_budget`, `redundancy_budget`) with at most `max_per_group` per group.

    `value`: `paper` (default, Eq. 4) or a value that does not reward packing in more items:
    `above_median` | `per_token` | `offset` (minus `value_offset` per item); see `items.item_values`.

    `adaptive_threshold` (an extension, off by default; spec §4.1 [R]): while the solution uses less than
    `adaptive_target` of the token budget, raise the threshold by `adaptive_step` (tighter, more groups)
    and re-solve, up to `adaptive_max`.
    """

    name = "mmkp"

    def __init__(
        self,
        solver: str = "pareto_dp",
        token_budget: int = 1500,
        redundancy_budget: int = 120,
        alpha: float = 0.7,
        beta: float = 0.3,
        sim_threshold: float = 0.82,
        redundancy_scale: float = 100.0,
        diversity: str = "mean_pairwise",
        max_per_group: int = 1,
        value: str = "paper",
        value_offset: float = 0.5,
        adaptive_threshold: bool = False,
        adaptive_target: float = 0.8,
        adaptive_step: float = 0.03,
        adaptive_max: float = 0.95,
        token_counter: TokenCounter | None = None,
    ) -> None:
        super().__init__(token_counter, token_budget)
        if solver not in SOLVERS:
            raise ValueError(f"unknown solver {solver!r}; one of {sorted(SOLVERS)}")
        if value not in VALUES:
            raise ValueError(f"unknown value {value!r}; one of {VALUES}")
        self.solver = solver
        self.redundancy_budget = redundancy_budget
        self.weights = {
            "alpha": alpha, "beta": beta, "redundancy_scale": redundancy_scale, "diversity": diversity,
            "token_budget": token_budget, "redundancy_budget": redundancy_budget, "max_per_group": max_per_group,
            "value": value, "value_offset": value_offset,
        }  # fmt: skip
        self.sim_threshold = sim_threshold
        self.adaptive = adaptive_threshold
        self.adaptive_target = adaptive_target
        self.adaptive_step = adaptive_step
        self.adaptive_max = adaptive_max

    def solve(self, pool: CandidatePool, tokens: np.ndarray, threshold: float) -> tuple[Solution, int, float]:
        """(solution, number of groups, solve seconds) at one clustering threshold."""
        instance = build_instance(pool.fusion, pool.vectors, tokens, threshold=threshold, **self.weights)
        started = time.perf_counter()
        solution = SOLVERS[self.solver](instance)
        return solution, len(instance.groups), time.perf_counter() - started

    def select(self, question: str, pool: CandidatePool) -> Selection:
        tokens = self.token_counter(pool.passages)
        threshold = self.sim_threshold
        solution, groups, seconds = self.solve(pool, tokens, threshold)
        rounds = 1
        while (
            self.adaptive
            and solution.tokens < self.adaptive_target * self.token_budget
            and groups < len(pool)
            and threshold + self.adaptive_step <= self.adaptive_max + 1e-9
        ):
            threshold += self.adaptive_step
            solution, groups, more = self.solve(pool, tokens, threshold)
            seconds, rounds = seconds + more, rounds + 1
        stats = {
            "pool": float(len(pool)),
            "groups": float(groups),
            "solver_states": float(solution.states),
            "solve_ms": round(1000 * seconds, 3),
            "sim_threshold": round(threshold, 4),
            "rounds": float(rounds),
        }
        return self._selection(
            pool, list(solution.items), tokens, value=solution.value, redundancy=solution.redundancy, stats=stats
        )


class TopKSelector(Selector):
    """The first `k` of the fused ranking; with a `token_budget`, only those that still fit (in order).
    `k=None` with a budget: fill the budget in rank order (top-k at equal budget with the other selectors)."""

    name = "topk"

    def __init__(
        self, k: int | None = 5, token_budget: int | None = None, token_counter: TokenCounter | None = None
    ) -> None:
        super().__init__(token_counter, token_budget)
        self.k = k

    def select(self, question: str, pool: CandidatePool) -> Selection:
        tokens = self.token_counter(pool.passages)
        chosen, used = [], 0
        for i in range(len(pool)):
            if len(chosen) == self.k:
                break
            if self.token_budget is None or used + tokens[i] <= self.token_budget:
                chosen.append(i)
                used += int(tokens[i])
        return self._selection(pool, chosen, tokens, stats={"pool": float(len(pool))})


class MMRSelector(Selector):
    """Maximal marginal relevance (spec §4.4c, the official baseline): re-rank the first `rerank_depth`
    candidates (default max(5, min(n, ⌊budget/120⌋·4)), the code's choice) by λ·rel − (1 − λ)·max cos to
    those already ranked, seeded with the top fused passage, then fill `token_budget` in that order
    (skipping what does not fit). `relevance`: `raw` fusion score (code) or `minmax`. `order`: return the
    chosen passages in `fused` order (as every selector here) or in MMR `selection` order."""

    name = "mmr"

    def __init__(
        self,
        lambda_: float = 0.6,
        token_budget: int = 1500,
        rerank_depth: int | None = None,
        relevance: str = "raw",
        order: str = "fused",
        token_counter: TokenCounter | None = None,
    ) -> None:
        super().__init__(token_counter, token_budget)
        if relevance not in ("raw", "minmax") or order not in ("fused", "selection"):
            raise ValueError(f"relevance must be raw|minmax and order fused|selection, got {relevance!r}, {order!r}")
        self.lambda_ = lambda_
        self.rerank_depth = rerank_depth
        self.relevance = relevance
        self.order = order

    def ranking(self, pool: CandidatePool) -> list[int]:
        """The MMR order of the first `rerank_depth` candidates."""
        n = len(pool)
        depth = self.rerank_depth or max(5, min(n, (self.token_budget // 120) * 4))
        depth = min(depth, n)
        if depth == 0:
            return []
        rel = pool.fusion[:depth]
        if self.relevance == "minmax":
            rel = minmax(rel)
        sims = pool.vectors[:depth] @ pool.vectors[:depth].T
        ranked = [0]
        closest = sims[0].astype(np.float64).copy()  # max similarity to the ranked set
        left = np.ones(depth, dtype=bool)
        left[0] = False
        while left.any():
            score = self.lambda_ * rel - (1 - self.lambda_) * closest
            score[~left] = -np.inf
            pick = int(np.argmax(score))
            ranked.append(pick)
            left[pick] = False
            closest = np.maximum(closest, sims[pick])
        return ranked

    def select(self, question: str, pool: CandidatePool) -> Selection:
        tokens = self.token_counter(pool.passages)
        chosen, used = [], 0
        for i in self.ranking(pool):
            if used + tokens[i] <= self.token_budget:
                chosen.append(i)
                used += int(tokens[i])
        if self.order == "fused":
            chosen.sort()
        return self._selection(pool, chosen, tokens, stats={"pool": float(len(pool))})
