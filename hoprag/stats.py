"""Paired significance over per-question differences: a bootstrap confidence interval of the mean difference
and a sign-flip permutation test (the paired permutation test: under "no difference" each question's two
scores are exchangeable, so each difference's sign is a coin flip).

Both draw from a seeded generator, so a report is the same each time it is made. Resamples are drawn in
chunks, so memory stays bounded for any number of questions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
_CHUNK_CELLS = 2_000_000  # resamples x questions held at once


@dataclass(frozen=True)
class PairedTest:
    """The mean of `b - a` over `n` paired questions, its bootstrap CI at `level`, and a two-sided p-value."""

    n: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p: float
    level: float


def _chunks(total: int, n: int) -> Iterator[int]:
    size = max(1, _CHUNK_CELLS // max(n, 1))
    for start in range(0, total, size):
        yield min(size, total - start)


def bootstrap_ci(
    diffs: np.ndarray, resamples: int = RESAMPLES, level: float = 0.95, rng: np.random.Generator | None = None
) -> tuple[float, float]:
    """Percentile interval of the mean of `diffs` over resamples of the questions drawn with replacement."""
    rng = rng or np.random.default_rng(0)
    n = len(diffs)
    means = np.concatenate([diffs[rng.integers(0, n, (size, n))].mean(axis=1) for size in _chunks(resamples, n)])
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def sign_flip_p(diffs: np.ndarray, resamples: int = RESAMPLES, rng: np.random.Generator | None = None) -> float:
    """Two-sided Monte Carlo p-value of the paired permutation test, counting the observed labelling among
    the permutations ((1 + hits) / (1 + resamples)), so it is never 0 and is 1 when nothing differs."""
    rng = rng or np.random.default_rng(0)
    n = len(diffs)
    observed = abs(diffs.mean())
    tolerance = 1e-12 * max(1.0, float(np.abs(diffs).max(initial=0.0)))  # ties despite float rounding
    hits = 0
    for size in _chunks(resamples, n):
        signs = rng.choice(np.array([-1.0, 1.0]), size=(size, n))
        hits += int((np.abs(signs @ diffs) / n >= observed - tolerance).sum())
    return (1 + hits) / (1 + resamples)


def paired_test(
    a: Sequence[float], b: Sequence[float], resamples: int = RESAMPLES, level: float = 0.95, seed: int = 0
) -> PairedTest:
    """Compare paired scores `b` against `a` (the same questions in the same order)."""
    a_arr, b_arr = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_arr.shape != b_arr.shape or a_arr.ndim != 1 or len(a_arr) == 0:
        raise ValueError(
            f"paired scores must be two non-empty lists of one length, got {a_arr.shape} and {b_arr.shape}"
        )
    diffs = b_arr - a_arr
    rng = np.random.default_rng(seed)
    low, high = bootstrap_ci(diffs, resamples, level, rng)
    return PairedTest(
        n=len(diffs),
        mean_a=float(a_arr.mean()),
        mean_b=float(b_arr.mean()),
        diff=float(diffs.mean()),
        ci_low=low,
        ci_high=high,
        p=sign_flip_p(diffs, resamples, rng),
        level=level,
    )
