"""Rerank retrieved passages against a query (TreeRare's Tree-Retrieval reranks BM25 passages against the
full question, spec/treerare.md §2.7), batched over questions: one model call scores every pair of a batch.

Each query's candidates are de-duplicated by passage id (first occurrence wins), sorted by the
reranker's score (ties keep their input order) and cut to k; the returned hits carry the new score and
rank. The official code de-duplicates with a set and so loses the order; here the order is the score's.
A reranker reorders the hits it is given and never adds one: a passage its retriever did not return (e.g.
one sharing no term with a BM25 query) cannot come back through it, whatever score it would get.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from hoprag.cost import Cost, charge_evenly
from hoprag.data.types import Passage
from hoprag.retrieval.embedders import Embedder, _shared_model
from hoprag.retrieval.retrievers import Hit
from hoprag.utils.bundled import resolve_model_ref
from hoprag.utils.device import resolve_device


class Reranker:
    """Orders candidate passages per query; subclasses implement `_score` for a whole batch."""

    def rerank(
        self,
        queries: Sequence[str],
        candidates: Sequence[Sequence[Hit]],
        k: int | None,
        costs: Sequence[Cost | None] | None = None,
        stage: str = "rerank",
    ) -> list[list[Hit]]:
        """Per query, its distinct candidates best first, at most k of them (all when k is None).

        `costs` (one record or None per query) are charged an even share of the call's wall time under `stage`.
        """
        if isinstance(queries, str):
            raise TypeError("rerank() takes a batch of queries: wrap a single query in a list")
        queries = list(queries)
        if len(candidates) != len(queries):
            raise ValueError(f"{len(candidates)} candidate lists for {len(queries)} queries")
        if costs is not None and len(costs) != len(queries):
            raise ValueError(f"{len(costs)} cost records for {len(queries)} queries")
        if k is not None and k < 0:
            raise ValueError(f"k must be at least 0, got {k}")
        started = time.perf_counter()
        pools = [_distinct(hits) for hits in candidates]
        scores = self._score(queries, pools) if any(pools) else [[] for _ in pools]
        results = [_ranked(pool, pool_scores, k) for pool, pool_scores in zip(pools, scores)]
        share = charge_evenly(costs, time.perf_counter() - started)
        for cost in costs or ():
            if cost is not None:
                cost.seconds[stage] += share
        return results

    def _score(self, queries: list[str], pools: list[list[Hit]]) -> list[Sequence[float]]:
        """One score per hit of each pool (pools are distinct by id; some may be empty)."""
        raise NotImplementedError


def _distinct(hits: Sequence[Hit]) -> list[Hit]:
    """`hits` without repeated passage ids, keeping each id's first occurrence."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.passage.id not in seen:
            seen.add(hit.passage.id)
            kept.append(hit)
    return kept


def _ranked(pool: list[Hit], scores: Sequence[float], k: int | None) -> list[Hit]:
    order = sorted(range(len(pool)), key=lambda i: -scores[i])[:k]  # stable: ties stay in input order
    return [Hit(pool[i].passage, float(scores[i]), rank) for rank, i in enumerate(order, start=1)]


class NoReranker(Reranker):
    """Keeps the retriever's order (its scores, highest first), still de-duplicating and cutting to k."""

    def _score(self, queries: list[str], pools: list[list[Hit]]) -> list[Sequence[float]]:
        return [[hit.score for hit in pool] for pool in pools]


class EmbeddingReranker(Reranker):
    """Scores a passage by the inner product of its and the query's embedder vectors (the cosine for an
    embedder that normalises). One encode of the batch's new queries and one of its new distinct passages:
    vectors are remembered (up to `cache_size` texts), since a tree reranks a question's passages again at
    every level."""

    def __init__(self, embedder: Embedder, cache_size: int = 100_000) -> None:
        self.embedder = embedder
        self.cache_size = cache_size
        self._queries: dict[str, np.ndarray] = {}
        self._passages: dict[tuple[str, str], np.ndarray] = {}

    def _score(self, queries: list[str], pools: list[list[Hit]]) -> list[Sequence[float]]:
        new_passages: dict[tuple[str, str], Passage] = {}
        for pool in pools:
            for hit in pool:
                key = (hit.passage.id, hit.passage.contents)
                if key not in self._passages:
                    new_passages.setdefault(key, hit.passage)
        new_queries = list(dict.fromkeys(q for q in queries if q not in self._queries))
        if len(self._passages) + len(new_passages) > self.cache_size:
            self._passages.clear()  # a rare restart; the batch's pools are re-added below
            new_passages = {(h.passage.id, h.passage.contents): h.passage for pool in pools for h in pool}
        if len(self._queries) + len(new_queries) > self.cache_size:
            self._queries.clear()
            new_queries = list(dict.fromkeys(queries))
        if new_queries:
            self._queries.update(zip(new_queries, self.embedder.encode_queries(new_queries)))
        if new_passages:
            self._passages.update(zip(new_passages, self.embedder.encode_passages(list(new_passages.values()))))
        return [
            np.stack([self._passages[h.passage.id, h.passage.contents] for h in pool]) @ self._queries[q] if pool else []
            for q, pool in zip(queries, pools)
        ]

    def __repr__(self) -> str:
        return f"EmbeddingReranker(embedder={self.embedder!r})"


class CrossEncoderReranker(Reranker):
    """A sentence-transformers CrossEncoder over (query, title + text) pairs: the paper's reranker is
    ms-marco-MiniLM-L-12-v2, hoprag's own the export of `train.py +model=reranker` (`reranker=trained`). Weights
    load on the first rerank and are shared per process. With `cache_size` > 0, scores are remembered per (query,
    passage text), up to that many pairs: a tree reranks a question's passages again at every level.

    `model` is a local folder, a hub id or a `pkg://` reference; `max_length` (tokens per pair) None keeps
    the model's own.
    """

    def __init__(
        self,
        model: str = "cross-encoder/ms-marco-MiniLM-L-12-v2",
        batch_size: int = 32,
        device: str = "auto",
        max_length: int | None = 512,
        cache_size: int = 0,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self.device = device
        self.max_length = max_length
        self.cache_size = cache_size
        self._scores: dict[tuple[str, str], float] = {}

    def _load(self) -> Any:
        path, device = resolve_model_ref(self.model), resolve_device(self.device)

        def load() -> Any:
            from sentence_transformers import CrossEncoder

            return CrossEncoder(path, device=device, max_length=self.max_length)

        return _shared_model(("cross-encoder", path, device, self.max_length), load)

    def _score(self, queries: list[str], pools: list[list[Hit]]) -> list[Sequence[float]]:
        pairs = [(query, hit.passage.contents) for query, pool in zip(queries, pools) for hit in pool]
        if self.cache_size:
            new = list(dict.fromkeys(pair for pair in pairs if pair not in self._scores))
            if len(self._scores) + len(new) > self.cache_size:
                self._scores.clear()  # a rare restart; the batch's pairs are scored below
                new = list(dict.fromkeys(pairs))
            if new:
                self._scores.update(zip(new, self._predict(new)))
            flat = np.asarray([self._scores[pair] for pair in pairs], dtype=np.float64)
        else:
            flat = self._predict(pairs)
        bounds = np.cumsum([len(pool) for pool in pools])[:-1]
        return np.split(flat, bounds)

    def _predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        scores = self._load().predict(pairs, batch_size=self.batch_size, show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(scores, dtype=np.float64).reshape(-1)

    def __repr__(self) -> str:
        return f"CrossEncoderReranker(model={self.model!r})"
