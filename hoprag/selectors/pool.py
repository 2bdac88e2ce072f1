"""The two records every selector speaks: a fused candidate pool in, a `Selection` out."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hoprag.data.types import Passage


@dataclass(frozen=True)
class CandidatePool:
    """One question's candidates in fused-rank order (best first).

    `fusion` is the front-end's fused score (what relevance is made of), `dense` the question–passage inner
    product, and `vectors` the L2-normalised passage embeddings (n, D) that grouping, diversity and MMR
    compare.
    """

    question: str
    passages: list[Passage]
    fusion: np.ndarray
    dense: np.ndarray
    vectors: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.passages)
        object.__setattr__(self, "fusion", np.asarray(self.fusion, dtype=np.float64).reshape(n))
        object.__setattr__(self, "dense", np.asarray(self.dense, dtype=np.float64).reshape(n))
        vectors = np.asarray(self.vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != n:
            raise ValueError(f"{n} passages but vectors of shape {vectors.shape}")
        object.__setattr__(self, "vectors", vectors)

    def __len__(self) -> int:
        return len(self.passages)


@dataclass
class Selection:
    """What a selector chose: pool positions in ascending order (= fused order) and their passages.

    `tokens` is the summed token cost (by the selector's counter) against `token_budget`; `value` is the
    objective the selector maximised, when it has one; `stats` holds per-question numbers (groups, frontier
    size, solve time, ...) for `MethodOutput.stats`.
    """

    indices: list[int]
    passages: list[Passage]
    tokens: int
    token_budget: int | None = None
    value: float | None = None
    redundancy: int = 0
    stats: dict[str, float] = field(default_factory=dict)

    @property
    def utilisation(self) -> float | None:
        """Share of the token budget used (None without a budget)."""
        return self.tokens / self.token_budget if self.token_budget else None

    def summary(self) -> dict[str, float]:
        """`stats` plus tokens, utilisation, value and count: what methods report per question."""
        out = {"selected": float(len(self.indices)), "tokens_used": float(self.tokens), **self.stats}
        if self.utilisation is not None:
            out["budget_utilisation"] = round(self.utilisation, 4)
        if self.value is not None:
            out["value"] = round(self.value, 6)
        return out
