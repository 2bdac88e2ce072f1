"""The fused retrieval front-end: dense + sparse retrieval fused into each question's candidate pool.

Two fusion modes (spec §3):

- `official` (the released code's recipe): the dense top `dense_depth` are the only candidates; each is
  scored 1/(k + r_dense) + 1/(k + r_sparse) + w · cos(φ(d), c̄) with 0-based ranks, r_sparse = `missing_rank`
  outside the sparse top `sparse_depth`, and c̄ the normalised mean embedding of the dense top
  `centroid_topn` (a re-scoring feature: the query is not re-issued). Sorted by that score, ties by dense
  score, cut at `pool_size`.
- `textbook`: reciprocal rank fusion (1-based ranks) over the union of both lists, cut at `pool_size`.

The sparse side is TF-IDF (official) or BM25. `pools` retrieves from the corpus; `pools_over` fuses
passages a caller already has (e.g. a HotpotQA question's own 10 paragraphs) with the same recipe. The
sparse ranking holds hits only (a positive score, `lexical_hits`): a passage sharing no term with the
question is outside it (official: `missing_rank`; textbook: not a candidate unless dense found it).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hoprag.cost import Cost, charge_evenly
from hoprag.data.types import Passage
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.fusion import reciprocal_rank_fusion
from hoprag.retrieval.retrievers import BM25Retriever, DenseRetriever, FusionRetriever, Retriever
from hoprag.retrieval.sparse import lexical_hits
from hoprag.selectors.pool import CandidatePool
from hoprag.selectors.tfidf import TfidfRetriever

MODES = ("official", "textbook")
SPARSE = ("tfidf", "bm25")


def dense_of(retriever: Retriever) -> DenseRetriever | None:
    """The dense retriever inside `retriever` (itself, or a fusion retriever's dense side), if any."""
    if isinstance(retriever, FusionRetriever):
        retriever = retriever.dense
    return retriever if isinstance(retriever, DenseRetriever) else None


def official_fusion(
    dense_rank: np.ndarray,
    sparse_rank: np.ndarray,
    vectors: np.ndarray,
    dense_order: np.ndarray,
    rrf_k: int = 60,
    centroid_topn: int = 5,
    centroid_weight: float = 0.3,
) -> np.ndarray:
    """The official fusion score of each candidate from its 0-based ranks and embedding (`dense_order`
    lists candidates best-first by dense score; its head makes the centroid)."""
    head = vectors[dense_order[:centroid_topn]].astype(np.float64)
    centroid = head.mean(axis=0) if len(head) else np.zeros(vectors.shape[1])
    centroid /= max(float(np.linalg.norm(centroid)), 1e-12)
    return 1.0 / (rrf_k + dense_rank) + 1.0 / (rrf_k + sparse_rank) + centroid_weight * (vectors @ centroid)


class HybridFrontEnd:
    """Builds `CandidatePool`s for batches of questions over `retriever`'s corpus (see module docstring).

    `retriever` is the runner's retriever and gives the first-stage ("dense") list: a dense retriever, or
    rrf whose dense side is used; any other retriever ranks instead, with `embedder` for the vectors. The
    sparse side is a TF-IDF index fitted on the same corpus, or BM25 (the rrf retriever's own when it has
    one). Passage vectors come from the dense index (saved embeddings or FAISS reconstruction), else are
    encoded with the dense retriever's embedder (or `embedder`).
    """

    def __init__(
        self,
        retriever: Retriever,
        embedder: Embedder | None = None,
        mode: str = "official",
        sparse: str = "tfidf",
        pool_size: int = 50,
        dense_depth: int = 200,
        sparse_depth: int = 200,
        rrf_k: int = 60,
        centroid_topn: int = 5,
        centroid_weight: float = 0.3,
        missing_rank: int = 10_000,
        tfidf: Mapping[str, Any] | None = None,
    ) -> None:
        if mode not in MODES or sparse not in SPARSE:
            raise ValueError(f"mode must be one of {MODES} and sparse one of {SPARSE}, got {mode!r}, {sparse!r}")
        self.dense = dense_of(retriever)
        self.first: Retriever = self.dense if self.dense is not None else retriever
        self.embedder = self.dense.embedder if self.dense is not None else embedder
        if self.embedder is None:
            raise ValueError(f"a {type(retriever).__name__} gives no passage vectors: pass an embedder")
        self.mode = mode
        self.pool_size = pool_size
        self.dense_depth = dense_depth
        self.sparse_depth = sparse_depth
        self.rrf_k = rrf_k
        self.centroid_topn = centroid_topn
        self.centroid_weight = centroid_weight
        self.missing_rank = missing_rank
        passages = self.first.passages
        self.sparse: Retriever
        if sparse == "tfidf":
            settings = dict(tfidf or {})
            if "ngram_range" in settings:
                settings["ngram_range"] = tuple(settings["ngram_range"])
            self.sparse = TfidfRetriever(passages, **settings)
        elif isinstance(retriever, FusionRetriever) and isinstance(retriever.sparse, BM25Retriever):
            self.sparse = retriever.sparse
        else:
            self.sparse = BM25Retriever(passages)
        self._row = {pid: i for i, pid in enumerate(self.dense.index.ids)} if self.dense is not None else {}

    # -- passage vectors ---------------------------------------------------------------------------

    def vectors(self, passages: Sequence[Passage]) -> np.ndarray:
        """L2-normalised embeddings of `passages`: from the index where it can give them back, else encoded."""
        rows = [self._row.get(p.id) for p in passages]
        vectors = None
        if self.dense is not None and passages and all(r is not None for r in rows):
            stored = self.dense.index.embeddings
            if stored is not None:
                vectors = np.asarray(stored[rows], dtype=np.float32)
            else:
                try:
                    vectors = self.dense.index.index.reconstruct_batch(np.asarray(rows, dtype=np.int64))
                except RuntimeError:  # e.g. an IVF-PQ index keeps no direct map
                    pass
        if vectors is None:
            vectors = self.embedder.encode_passages(list(passages))
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)

    # -- pools -------------------------------------------------------------------------------------

    def pools(self, questions: Sequence[str], costs: Sequence[Cost | None] | None = None) -> list[CandidatePool]:
        """Retrieve and fuse: one pool per question. Dense and sparse searches are charged to `costs`
        (stage "retrieval"), as is the time to encode the questions and fuse."""
        questions = list(questions)
        started = time.perf_counter()
        query_vectors = self.embedder.encode_queries(questions)
        encoding = time.perf_counter() - started
        if self.dense is not None:
            dense_hits = self.dense.search_vectors(query_vectors, self.dense_depth, costs=costs)
        else:
            dense_hits = self.first.search(questions, self.dense_depth, costs=costs)
        sparse_hits = self.sparse.search(questions, self.sparse_depth, costs=costs)
        started = time.perf_counter()
        pools = []
        for question, vector, dense, sparse in zip(questions, query_vectors, dense_hits, sparse_hits):
            passages = [h.passage for h in dense]
            in_dense = {p.id for p in passages}
            if self.mode == "textbook":  # the union: sparse-only passages are candidates too
                passages += [h.passage for h in sparse if h.passage.id not in in_dense]
            position = {p.id: i for i, p in enumerate(passages)}
            sparse_order = [position[h.passage.id] for h in sparse if h.passage.id in position]
            pools.append(self._fuse(question, vector, passages, np.arange(len(dense)), np.asarray(sparse_order)))
        share = charge_evenly(costs, encoding + time.perf_counter() - started)  # the searches charged themselves
        for cost in costs or ():
            if cost is not None:
                cost.seconds["retrieval"] += share
        return pools

    def pools_over(self, questions: Sequence[str], passages: Sequence[Sequence[Passage]]) -> list[CandidatePool]:
        """Fuse given passages per question (no corpus search): both rankings are over those passages."""
        questions = list(questions)
        if len(questions) != len(passages):
            raise ValueError(f"{len(passages)} passage lists for {len(questions)} questions")
        query_vectors = self.embedder.encode_queries(questions)
        pools = []
        for question, vector, given in zip(questions, query_vectors, passages):
            given = list(given)
            vectors = self.vectors(given) if given else np.zeros((0, len(vector)), np.float32)
            dense_order = np.argsort(-(vectors @ vector), kind="stable")
            sparse_order = self._sparse_order(question, given)
            pools.append(self._fuse(question, vector, given, dense_order, sparse_order, vectors))
        return pools

    def _sparse_order(self, question: str, passages: list[Passage]) -> np.ndarray:
        """Positions of the passages that are sparse hits, best first (ties in given order); a passage
        without a query term is no sparse hit (`lexical_hits`), so it is ranked as missing."""
        if isinstance(self.sparse, TfidfRetriever):
            scores = self.sparse.scores(question, passages)
            order = np.argsort(-scores, kind="stable")
            return np.array([i for i, _ in lexical_hits(scores[order][None], order[None])[0]], dtype=np.int64)
        rank = {h.passage.id: h.rank for h in self.sparse.search([question], len(self.sparse.passages))[0]}
        found = [i for i, p in enumerate(passages) if p.id in rank]
        return np.array(sorted(found, key=lambda i: rank[passages[i].id]), dtype=np.int64)

    def _fuse(
        self,
        question: str,
        query_vector: np.ndarray,
        passages: list[Passage],
        dense_order: np.ndarray,
        sparse_order: np.ndarray,
        vectors: np.ndarray | None = None,
    ) -> CandidatePool:
        """Order `passages` into a pool. `dense_order`/`sparse_order` list passage positions best first
        (a passage may be missing from the sparse one)."""
        n = len(passages)
        if n == 0:
            return CandidatePool(question, [], np.zeros(0), np.zeros(0), np.zeros((0, len(query_vector))))
        vectors = self.vectors(passages) if vectors is None else vectors
        dense_scores = vectors @ query_vector
        dense_order, sparse_order = dense_order.astype(np.int64), sparse_order.astype(np.int64)
        if self.mode == "official":
            dense_rank = np.full(n, np.inf)
            dense_rank[dense_order] = np.arange(len(dense_order))
            sparse_rank = np.full(n, float(self.missing_rank))
            sparse_rank[sparse_order] = np.arange(len(sparse_order))
            candidates = dense_order
            fusion = official_fusion(
                dense_rank[candidates], sparse_rank[candidates], vectors[candidates], np.arange(len(candidates)),
                self.rrf_k, self.centroid_topn, self.centroid_weight,
            )  # fmt: skip
            by_score = np.lexsort((-dense_scores[candidates], -fusion))[: self.pool_size]
            chosen, scores = candidates[by_score], fusion[by_score]
        else:
            rankings = [[str(i) for i in dense_order.tolist()], [str(i) for i in sparse_order.tolist()]]
            fused = reciprocal_rank_fusion(rankings, k=self.rrf_k)[: self.pool_size]
            chosen = np.array([int(i) for i, _ in fused], dtype=np.int64)
            scores = np.array([s for _, s in fused])
        return CandidatePool(
            question, [passages[i] for i in chosen.tolist()], scores, dense_scores[chosen], vectors[chosen]
        )
