"""The NLI verifier interface: (entailment, neutral, contradiction) probabilities for (premise, hypothesis) pairs.

Self-Correcting RAG scores answers with an NLI model; the search and the faithfulness metrics only see this
interface, so a hub model, hoprag's own trained cross-encoder and a scripted verifier for tests are
interchangeable. Scores are cached per (premise, hypothesis): the MCTS asks about the same evidence sentence
for many sibling answers.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

LABELS = ("entailment", "neutral", "contradiction")


class NLIScores(NamedTuple):
    entailment: float
    neutral: float
    contradiction: float


class Verifier:
    """Base class: subclasses implement `_predict` (a batch of pairs → an (n, 3) array in `LABELS` order)."""

    def __init__(self, cache: bool = True) -> None:
        self._cache: dict[tuple[str, str], NLIScores] | None = {} if cache else None
        self.calls = 0  # batched model calls
        self.pairs_scored = 0  # pairs the model actually scored (cache misses)

    def __call__(self, pairs: Sequence[tuple[str, str]]) -> list[NLIScores]:
        """Probabilities for each (premise, hypothesis) pair, in order."""
        pairs = [(str(p), str(h)) for p, h in pairs]
        cache = self._cache if self._cache is not None else {}
        todo = list(dict.fromkeys(pair for pair in pairs if pair not in cache))
        if todo:
            probs = np.asarray(self._predict(todo), dtype=np.float64)
            if probs.shape != (len(todo), 3):
                raise ValueError(f"{type(self).__name__} returned shape {probs.shape} for {len(todo)} pairs")
            self.calls += 1
            self.pairs_scored += len(todo)
            cache.update((pair, NLIScores(*map(float, row))) for pair, row in zip(todo, probs))
        return [cache[pair] for pair in pairs]

    def _predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        raise NotImplementedError


class ScriptedVerifier(Verifier):
    """Deterministic scores for tests: the first rule whose regexes match (premise, hypothesis) decides.

    `rules` are (premise_regex, hypothesis_regex, (e, n, c)); unmatched pairs get `default`.
    """

    def __init__(
        self,
        rules: Sequence[tuple[str, str, tuple[float, float, float]]] = (),
        default: tuple[float, float, float] = (0.0, 1.0, 0.0),
        cache: bool = True,
    ) -> None:
        super().__init__(cache)
        self.rules = [(re.compile(p, re.I), re.compile(h, re.I), tuple(s)) for p, h, s in rules]
        self.default = tuple(default)

    def _predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        return np.array([self._score(p, h) for p, h in pairs])

    def _score(self, premise: str, hypothesis: str) -> tuple[float, ...]:
        for p, h, scores in self.rules:
            if p.search(premise) and h.search(hypothesis):
                return scores
        return self.default
