"""The one retrieval interface every method uses: a batch of queries in, ranked passages out.

Retrievers are built from a corpus (`Retriever(corpus=passages, ...)`, which is how Hydra `_partial_`
configs finish them): a list of passages, or a `CorpusStore` (wiki-18), which is read for the hits only. They
cache their index under `cache_dir`, one directory per corpus fingerprint and
per digest of the settings that decide the index, so a second run with the same corpus and settings
loads instead of re-encoding, and indexes of other settings live beside it untouched.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from hoprag.cost import Cost, charge_evenly
from hoprag.data.corpus_store import Corpus, MemoryCorpus, as_corpus
from hoprag.data.types import Passage
from hoprag.retrieval.dense import DenseIndex
from hoprag.retrieval.faiss_placement import placement
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.fusion import reciprocal_rank_fusion
from hoprag.retrieval.index_dirs import DEFAULT_INDEX, bm25_index_dir, build_settings, dense_index_dir
from hoprag.retrieval.manifest import MANIFEST, IndexMismatchError
from hoprag.retrieval.shards import build_dense
from hoprag.retrieval.sparse import BM25Index, lexical_hits

log = logging.getLogger(__name__)

IndexT = TypeVar("IndexT", DenseIndex, BM25Index)


@dataclass(frozen=True)
class Hit:
    """One retrieved passage with its retriever-specific score."""

    passage: Passage
    score: float
    rank: int  # 1-based


class Retriever:
    """Searches `corpus` in index order; `calls` counts query strings searched (cost).

    `corpus` is the corpus as the lookups see it (`take` rows, `rows_of` ids, `rows_with_titles`, `fingerprint`:
    a `CorpusStore`, or a `MemoryCorpus` holding a given list); `passages` is the same corpus as a sequence (the
    list given, or the store). Retrievers with an index report `build_seconds` (from the manifest when loaded)
    and `from_cache`. Subclasses implement `_search`.
    """

    build_seconds: float = 0.0
    from_cache: bool = False

    def __init__(self, corpus: Corpus | Sequence[Passage]) -> None:
        self.corpus: Corpus = as_corpus(corpus)
        self.passages: Sequence[Passage] = self.corpus.list if isinstance(self.corpus, MemoryCorpus) else self.corpus
        self.calls = 0

    def get(self, passage_id: str) -> Passage:
        return self.corpus.get(passage_id)

    def search(
        self, queries: Sequence[str], k: int, costs: Sequence[Cost | None] | None = None, stage: str = "retrieval"
    ) -> list[list[Hit]]:
        """One list of at most k hits per query, best first; fewer, or none, when fewer passages are hits.

        `costs` (one record or None per query) are charged one retrieval call each, the ids of the
        passages their query got, an even share of the call's wall time under `stage`, and one
        `empty_results` when their query got no hit.
        """
        if isinstance(queries, str):
            raise TypeError("search() takes a batch of queries: wrap a single query in a list")
        queries = list(queries)
        return self._counted(len(queries), lambda: self._search(queries, k), costs, stage)

    def _counted(
        self,
        n_queries: int,
        run: Callable[[], list[list[Hit]]],
        costs: Sequence[Cost | None] | None,
        stage: str,
    ) -> list[list[Hit]]:
        """Run one batched search of `n_queries`, counting the calls and charging the cost records."""
        if costs is not None and len(costs) != n_queries:
            raise ValueError(f"{len(costs)} cost records for {n_queries} queries")
        self.calls += n_queries
        started = time.perf_counter()
        results = run()
        share = charge_evenly(costs, time.perf_counter() - started)
        for cost, hits in zip(costs or (), results):
            if cost is not None:
                cost.add_retrieval([h.passage.id for h in hits], share, stage)
                cost.empty_results += not hits
        return results

    def reset_calls(self) -> int:
        """Zero the call counter and return what it was."""
        calls, self.calls = self.calls, 0
        return calls

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        raise NotImplementedError

    def _hits(self, scores: np.ndarray, indices: np.ndarray) -> list[list[Hit]]:
        """Hits from (n_queries, k) dense index results. A dense hit is any real index row, whatever its
        score: an inner product or cosine can be <= 0 and still rank (unlike a lexical 0, it does not mean
        "nothing matches"). Row -1 (an approximate index found fewer than k) is not a hit."""
        rows = zip(indices.tolist(), scores.tolist())
        return self._ranked([[(i, s) for i, s in zip(ids, row_scores) if i >= 0] for ids, row_scores in rows])

    def _ranked(self, found: list[list[tuple[int, float]]]) -> list[list[Hit]]:
        """Hits from per-query (row, score) pairs, best first, ranked from 1; the passages of all queries are
        read from the corpus in one `take`."""
        fetched = iter(self.corpus.take([row for pairs in found for row, _ in pairs]))
        return [[Hit(next(fetched), s, rank) for rank, (_, s) in enumerate(pairs, start=1)] for pairs in found]


def _cached(
    directory: Path | None, force: bool, load: Callable[[], IndexT], build: Callable[[], IndexT]
) -> tuple[IndexT, bool]:
    """Load the index saved in `directory`, or build it (and save it there) when there is none or `force`.

    A saved index is never replaced unasked: when its manifest contradicts the request (a directory copied
    by hand, an older cache layout), `load` raises IndexMismatchError naming the fields and the fix, and
    the files stay as they are. A directory without a manifest is an unfinished build and is cleared.
    """
    if directory is not None and not force and (directory / MANIFEST).is_file():
        return load(), True
    if directory is not None and directory.exists():
        if (directory / MANIFEST).is_file():
            log.warning("force=true: replacing the index in %s", directory)
        shutil.rmtree(directory)
    index = build()
    if directory is not None:
        index.save(directory)
    return index, False


class DenseRetriever(Retriever):
    """Embedding search over a FAISS index. `index` configures it (keys of DEFAULT_INDEX: FAISS `factory`, HNSW's
    `ef_construction` (a build setting) and `ef_search`, IVF's `nprobe` (both per run, no rebuild), `use_gpu` (where
    it searches: `hoprag.retrieval.faiss_placement.placement`), `mmap` (open the saved index memory-mapped),
    `refine` (re-rank refine x k candidates with exact vectors: the index is then built through shards,
    `build_dense`, whose vectors those are), build `chunk_size` and `train_size`, and `save_embeddings`, which keeps
    a float32 memmap of the passage vectors in the cache directory as `.index.embeddings`)."""

    def __init__(
        self,
        corpus: Corpus | Sequence[Passage],
        embedder: Embedder,
        index: Mapping[str, Any] | None = None,
        cache_dir: str | None = None,
        force: bool = False,
        batch_size: int = 64,
    ) -> None:
        super().__init__(corpus)
        self.embedder = embedder
        self.batch_size = batch_size
        settings = {**DEFAULT_INDEX, **(index or {})}
        unknown = set(settings) - set(DEFAULT_INDEX)
        if unknown:
            raise TypeError(f"unknown dense index settings {sorted(unknown)}; known: {sorted(DEFAULT_INDEX)}")
        if (settings["save_embeddings"] or settings["refine"] is not None) and cache_dir is None:
            wanted = "save_embeddings" if settings["save_embeddings"] else "refine"
            raise ValueError(f"index.{wanted} needs a cache_dir to keep the vectors in")
        placement(settings["use_gpu"])  # a placement FAISS cannot honour is refused before anything is encoded
        build_keys = build_settings(settings)
        fingerprint = self.corpus.fingerprint
        self.index_dir = dense_index_dir(cache_dir, embedder, fingerprint, build_keys)
        search_params = {k: settings[k] for k in ("ef_search", "nprobe", "use_gpu")}

        def load() -> DenseIndex:
            loaded = DenseIndex.load(self.index_dir, embedder, fingerprint, **build_keys, **search_params,
                                     mmap=settings["mmap"], refine=settings["refine"])  # fmt: skip
            if settings["save_embeddings"] and loaded.embeddings is None:
                raise IndexMismatchError(
                    f"the index in {self.index_dir} was saved without its embeddings; it is left as it is: "
                    "force=true rebuilds it with them, or set index.save_embeddings=false"
                )
            return loaded

        def build() -> DenseIndex:
            if self.index_dir is not None:
                self.index_dir.mkdir(parents=True)
            return DenseIndex.build(
                self.passages,
                embedder,
                build_keys["factory"],
                batch_size=batch_size,
                chunk_size=settings["chunk_size"],
                train_size=settings["train_size"],
                embeddings_path=self.index_dir / "embeddings.npy" if settings["save_embeddings"] else None,
                corpus_fingerprint=fingerprint,
                ef_construction=settings["ef_construction"],
                **search_params,
            )

        if settings["refine"] is not None:
            built = build_dense(self.corpus, embedder, cache_dir, settings, force=force, batch_size=batch_size)
            self.index, self.from_cache = load(), built.state == "cached"
        else:
            self.index, self.from_cache = _cached(self.index_dir, force, load, build)
        self.build_seconds = self.index.build_seconds

    def search_vectors(
        self, vectors: np.ndarray, k: int, costs: Sequence[Cost | None] | None = None, stage: str = "retrieval"
    ) -> list[list[Hit]]:
        """Search with query vectors made elsewhere (e.g. TreeHop's updated query embeddings); counted and
        charged like `search`."""
        vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, self.index.dim)
        return self._counted(len(vectors), lambda: self._hits(*self.index.search(vectors, k)), costs, stage)

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        vectors = self.embedder.encode_queries(queries, batch_size=self.batch_size)
        return self._hits(*self.index.search(vectors, k))


class BM25Retriever(Retriever):
    """Lexical BM25 search (bm25s) over titles and texts; only passages with a positive score are hits
    (`lexical_hits`), so a query none of whose terms is in the corpus gets none."""

    def __init__(
        self,
        corpus: Corpus | Sequence[Passage],
        cache_dir: str | None = None,
        force: bool = False,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stemmer: str | None = "english",
    ) -> None:
        super().__init__(corpus)
        fingerprint = self.corpus.fingerprint
        settings = {"k1": k1, "b": b, "method": method, "stemmer": stemmer}
        self.index_dir = bm25_index_dir(cache_dir, fingerprint, settings)
        self.index, self.from_cache = _cached(
            self.index_dir,
            force,
            lambda: BM25Index.load(self.index_dir, fingerprint, **settings),
            lambda: BM25Index.build(self.passages, corpus_fingerprint=fingerprint, workdir=cache_dir, **settings),
        )
        self.build_seconds = self.index.build_seconds

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        return self._ranked(lexical_hits(*self.index.search(queries, k)))


class FusionRetriever(Retriever):
    """Reciprocal-rank fusion of a dense and a sparse retriever, each searched to `depth`.

    `dense` and `sparse` are retrievers, or factories (Hydra `_partial_` objects) called with
    `corpus=corpus`. `calls` counts each query once; the two inner retrievers keep their own counts.
    Both sides return hits only, so a fused passage is a real hit of at least one of them: a query BM25
    finds nothing for gets the dense hits alone.
    """

    def __init__(
        self,
        corpus: Corpus | Sequence[Passage],
        dense: Callable[..., Retriever] | Retriever,
        sparse: Callable[..., Retriever] | Retriever,
        rrf_k: int = 60,
        depth: int = 100,
    ) -> None:
        super().__init__(corpus)
        self.dense = dense if isinstance(dense, Retriever) else dense(corpus=self.corpus)
        self.sparse = sparse if isinstance(sparse, Retriever) else sparse(corpus=self.corpus)
        self.rrf_k = rrf_k
        self.depth = depth
        self.build_seconds = self.dense.build_seconds + self.sparse.build_seconds
        self.from_cache = self.dense.from_cache and self.sparse.from_cache

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        depth = max(self.depth, k)
        results = []
        dense, sparse = self.dense.search(queries, depth), self.sparse.search(queries, depth)
        for dense_hits, sparse_hits in zip(dense, sparse):
            rankings = [[h.passage.id for h in dense_hits], [h.passage.id for h in sparse_hits]]
            fused = reciprocal_rank_fusion(rankings, k=self.rrf_k)[:k]
            found = {h.passage.id: h.passage for h in [*dense_hits, *sparse_hits]}  # both sides' hits, read once
            results.append([Hit(found[i], score, rank) for rank, (i, score) in enumerate(fused, start=1)])
        return results
