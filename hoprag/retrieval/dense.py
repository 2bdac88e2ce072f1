"""A FAISS inner-product index over passage embeddings, built by streaming the corpus through the encoder.

The index type is a FAISS factory string ("Flat", "HNSW32", "IVF1024,PQ64", ...). Building encodes one
chunk of passages at a time and adds it to the index, so memory holds the index plus one chunk, never
every embedding as Python objects; an IVF/PQ index is trained on the first chunks (up to `train_size`
vectors). Embeddings can also be written to a float32 `.npy` memmap for other components to reuse.

A saved index can be opened memory-mapped (`read_index`: seconds at wiki-18 scale, pages read as searched), and
one built from shards can re-rank its candidates with their exact vectors, read by row from the shards
(`refine`: a compressed index's recall back near Flat's).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import logging
import math
import re
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

try:
    import faiss
except ImportError as err:  # an extra of two kinds, which install the same `faiss` package over each other
    raise ImportError(
        "hoprag's indexes need FAISS, one build of two: pip install -e '.[faiss-cpu]' (what `make install` takes), "
        "or on a GPU machine pip install -c constraints-gpu.txt -e '.[faiss-gpu]'"
    ) from err

from hoprag.data.types import Passage
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.exact_rows import ShardRows, rerank
from hoprag.retrieval.faiss_placement import Placement, _gpu_builder, placement, to_gpu
from hoprag.retrieval.fingerprint import corpus_fingerprint as fingerprint_of
from hoprag.retrieval.manifest import (
    IDS_FILE,
    TRUNCATED,
    IndexMismatchError,
    check_manifest,
    new_manifest,
    read_ids,
    read_manifest,
    write_manifest,
)

if TYPE_CHECKING:
    from hoprag.retrieval.shards import ShardStore

log = logging.getLogger(__name__)

INDEX_FILE = "index.faiss"
EMBEDDINGS_FILE = "embeddings.npy"
KIND = "dense"
GPU_MAX_K = 2048  # the most results FAISS's GPU indexes return per query: the re-ranking depth there


def adapt_factory(factory: str, n_train: int) -> str:
    """Shrink what `n_train` vectors cannot train, so small corpora and tests can use the configured type:
    IVF lists and PQ codebooks (2**nbits centroids) get at least the 39 points per centroid FAISS asks for."""
    per_centroid = max(1, n_train // 39)

    def ivf(m: re.Match) -> str:
        return f"IVF{min(int(m.group(1)), per_centroid)}"

    def pq(m: re.Match) -> str:
        nbits = int(m.group(2) or 8)
        fitted = max(1, min(nbits, int(math.log2(per_centroid))))
        return m.group(0) if fitted == nbits else f"PQ{m.group(1)}x{fitted}"

    factory = re.sub(r"IVF(\d+)", ivf, factory)
    return re.sub(r"(?<![A-Za-z])PQ(\d+)(?:x(\d+))?(?=,|$)", pq, factory)


def release_freed_memory() -> None:
    """Hand memory freed by the last chunk back to the OS (glibc only; elsewhere a no-op).

    Encoder activations differ in size from batch to batch, and glibc keeps the freed blocks, so without
    this a streamed build's resident memory creeps up with the number of chunks although what is in use
    stays flat (measured: 2.0 GiB peak vs ~0.7 GiB in use on 50k passages).
    """
    libc_name = ctypes.util.find_library("c")
    if libc_name:
        libc = ctypes.CDLL(libc_name)
        if hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)


def shard_manifest(
    store: ShardStore, factory: str, faiss_factory: str, dim: int, started: float, **extra: Any
) -> dict[str, Any]:
    """The manifest of an index built from a complete `ShardStore` (in memory or streamed to disk): the
    store's plan, the shards it reads back from, and the build time with the shards' encoding."""
    plan = store.plan
    return new_manifest(
        KIND,
        **{k: v for k, v in plan.items() if k not in ("num_passages", "shard_size", "dtype", "dim")},
        dim=dim,
        factory=factory,
        faiss_factory=faiss_factory,
        num_passages=store.num_passages,
        build_seconds=round(store.encode_seconds() + time.perf_counter() - started, 3),
        shards={"directory": str(store.directory), "shard_size": store.shard_size, "dtype": plan["dtype"]},
        **extra,
    )


def set_ef_construction(index: faiss.Index, value: int | None, factory: str) -> None:
    """HNSW's efConstruction (candidates kept while linking a vector into the graph), set before anything is
    added; a factory without an HNSW graph refuses it rather than ignoring it."""
    if value is None:
        return
    graph = getattr(faiss.downcast_index(index), "hnsw", None)
    if graph is None:
        raise ValueError(f"index.ef_construction={value} needs an HNSW factory (e.g. HNSW32), not {factory!r}")
    graph.efConstruction = value


# Newer FAISS maps any index's codes (Flat vectors, HNSW storage, IVF lists) with IO_FLAG_MMAP_IFC; older builds map
# an IVF's inverted lists only (IO_FLAG_MMAP), and read other types whole.
MMAP_FLAG = getattr(faiss, "IO_FLAG_MMAP_IFC", faiss.IO_FLAG_MMAP)


def read_index(path: str | Path, mmap: bool = False) -> faiss.Index:
    """A FAISS file read whole, or with `mmap` memory-mapped: opened in seconds whatever its size, its pages read
    as searches touch them (and, being the file's, given back by the kernel under memory pressure)."""
    return faiss.read_index(str(path), MMAP_FLAG if mmap else 0)


def exact_rows(directory: Path, manifest: dict[str, Any]) -> ShardRows:
    """The exact vectors an index built from shards re-ranks with (its manifest names the shards)."""
    shards = manifest.get("shards")
    if shards is None:
        raise IndexMismatchError(
            f"index.refine re-ranks with the exact vectors kept in a sharded build's shards, and the index in "
            f"{directory} was built in one process: build it with python build_index.py, or set index.refine=null"
        )
    return ShardRows(shards["directory"], shards["shard_size"], manifest["num_passages"])


class DenseIndex:
    """Passage ids in index order, the FAISS index over their vectors, and the manifest of its build."""

    def __init__(
        self,
        index: faiss.Index,
        ids: list[str] | Callable[[], list[str]],
        manifest: dict[str, Any],
        embeddings: np.ndarray | None = None,
        ef_search: int | None = None,
        nprobe: int | None = None,
        use_gpu: bool | str = "auto",
        refine: int | None = None,
        rows: ShardRows | None = None,
    ) -> None:
        """`refine` (with `rows`, the exact vectors): search `refine` x k candidates, keep the k of highest exact
        inner product (a compressed index's re-ranking stage)."""
        if refine is not None and (refine < 1 or rows is None):
            raise ValueError(f"index.refine={refine}: a factor of candidates >= 1, with the exact vectors to read")
        self._ids = ids
        self.manifest = manifest
        self.embeddings = embeddings
        self.refine = refine
        self.rows = rows
        self.placement = Placement("cpu")
        self.index = self._place(index, use_gpu)
        self.set_search_params(ef_search=ef_search, nprobe=nprobe)

    @property
    def on_gpu(self) -> bool:
        return self.placement.on_gpu

    def cpu_index(self) -> faiss.Index:
        """The index in host memory: itself, or a CPU copy of a GPU one (shards merged into one index)."""
        return faiss.index_gpu_to_cpu(self.index) if self.on_gpu else self.index

    @property
    def ids(self) -> list[str]:
        """Passage ids in index order; a loaded index reads them on first use only (searching needs rows, not
        ids: wiki-18's 21M ids as Python strings would be gigabytes)."""
        if callable(self._ids):
            self._ids = self._ids()
        return self._ids

    @property
    def dim(self) -> int:
        return self.index.d

    @property
    def ntotal(self) -> int:
        return self.index.ntotal

    @property
    def build_seconds(self) -> float:
        return self.manifest["build_seconds"]

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        embedder: Embedder,
        factory: str = "Flat",
        *,
        batch_size: int | None = None,
        chunk_size: int = 2048,
        train_size: int = 100_000,
        ef_search: int | None = None,
        nprobe: int | None = None,
        use_gpu: bool | str = "auto",
        embeddings_path: str | Path | None = None,
        corpus_fingerprint: str | None = None,
        progress: bool | None = None,
        ef_construction: int | None = None,
    ) -> DenseIndex:
        """Encode `passages` chunk by chunk (`chunk_size` passages, encoded `batch_size` at a time) into a
        new index. Chunks larger than a batch let the encoder sort texts by length, wasting less padding.

        `embeddings_path` (a `.npy` file) also keeps every vector in a float32 memmap, `.embeddings`;
        `load` reopens it when it lies in the directory the index is saved to.
        `progress` shows the encoding bar (None: `hoprag.utils.progress` decides: a terminal, not CI).
        """
        n = len(passages)
        if n == 0:
            raise ValueError("cannot build a dense index over an empty corpus")
        fingerprint = corpus_fingerprint or fingerprint_of(passages)
        n_train = min(n, train_size)
        faiss_factory = adapt_factory(factory, n_train)
        started = time.perf_counter()
        index: faiss.Index | None = None
        stored: np.ndarray | None = None
        untrained: list[np.ndarray] = []
        ids: list[str] = []
        for chunk, vectors in embedder.passage_chunks(passages, chunk_size, batch_size, show=progress):
            if index is None:
                index = faiss.index_factory(vectors.shape[1], faiss_factory, faiss.METRIC_INNER_PRODUCT)
                set_ef_construction(index, ef_construction, factory)
                if embeddings_path is not None:
                    stored = np.lib.format.open_memmap(
                        embeddings_path, mode="w+", dtype=np.float32, shape=(n, vectors.shape[1])
                    )
            if stored is not None:
                stored[len(ids) : len(ids) + len(chunk)] = vectors
            ids.extend(p.id for p in chunk)
            if index.is_trained:
                index.add(vectors)
            else:
                untrained.append(vectors)
                if sum(map(len, untrained)) >= n_train:
                    sample = np.concatenate(untrained)
                    index.train(sample[:n_train])
                    index.add(sample)
                    untrained = []
            release_freed_memory()
        embeddings = None
        if stored is not None:
            stored.flush()
            del stored
            embeddings = np.load(embeddings_path, mmap_mode="r")
        manifest = new_manifest(
            KIND,
            **embedder.describe(),
            dim=index.d,
            factory=factory,
            faiss_factory=faiss_factory,
            corpus_fingerprint=fingerprint,
            num_passages=n,
            build_seconds=round(time.perf_counter() - started, 3),
            embeddings_file=Path(embeddings_path).name if embeddings_path is not None else None,
            **{TRUNCATED: embedder.truncated_passages},  # passages cut at the embedder's token limit
            **({"ef_construction": ef_construction} if ef_construction is not None else {}),
        )
        return cls(index, ids, manifest, embeddings, ef_search=ef_search, nprobe=nprobe, use_gpu=use_gpu)

    @classmethod
    def from_shards(
        cls,
        store: ShardStore,
        factory: str = "Flat",
        *,
        train_size: int = 100_000,
        chunk_size: int = 2048,
        seed: int = 0,
        ef_search: int | None = None,
        nprobe: int | None = None,
        use_gpu: bool | str = "auto",
        embeddings_path: str | Path | None = None,
        ef_construction: int | None = None,
    ) -> DenseIndex:
        """The index over every vector of a complete `ShardStore`, in corpus order: trained (IVF/PQ) on
        `train_size` vectors sampled uniformly with `seed`, then filled `chunk_size` vectors at a time, on one
        GPU when `use_gpu` places the index on GPUs (`_gpu_builder`). Deterministic: the same shards give the
        same index whichever workers encoded them. `build_seconds` is the shards' encoding time plus this merge."""
        started = time.perf_counter()
        n_train = min(store.num_passages, train_size)
        faiss_factory = adapt_factory(factory, n_train)
        index = faiss.index_factory(store.dim, faiss_factory, faiss.METRIC_INNER_PRODUCT)
        set_ef_construction(index, ef_construction, factory)
        target = _gpu_builder(index, faiss_factory, placement(use_gpu)) or index
        trained_on = 0 if index.is_trained else n_train
        if trained_on:
            target.train(store.sample(n_train, seed))
        stored = None
        if embeddings_path is not None:
            shape = (store.num_passages, store.dim)
            stored = np.lib.format.open_memmap(embeddings_path, mode="w+", dtype=np.float32, shape=shape)
        ids: list[str] = []
        for shard in range(store.num_shards):
            vectors = store.vectors(shard)
            for begin in range(0, len(vectors), chunk_size):
                chunk = np.asarray(vectors[begin : begin + chunk_size], dtype=np.float32)
                target.add(chunk)
                if stored is not None:
                    stored[len(ids) + begin : len(ids) + begin + len(chunk)] = chunk
            ids.extend(store.ids(shard))
            release_freed_memory()
        if target is not index:
            index = faiss.index_gpu_to_cpu(target)
        embeddings = None
        if stored is not None:
            stored.flush()
            del stored
            embeddings = np.load(embeddings_path, mmap_mode="r")
        manifest = shard_manifest(
            store, factory, faiss_factory, index.d, started,
            embeddings_file=Path(embeddings_path).name if embeddings_path is not None else None,
            train_sample=trained_on,
            **({"ef_construction": ef_construction} if ef_construction is not None else {}),
        )  # fmt: skip
        return cls(index, ids, manifest, embeddings, ef_search=ef_search, nprobe=nprobe, use_gpu=use_gpu)

    def save(self, directory: str | Path) -> None:
        """Write the index, the id map and (last, marking the save complete) the manifest."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        faiss.write_index(self.cpu_index(), str(directory / INDEX_FILE))
        (directory / IDS_FILE).write_text(json.dumps(self.ids, ensure_ascii=False), encoding="utf-8")
        write_manifest(directory, self.manifest)

    @classmethod
    def load(
        cls,
        directory: str | Path,
        embedder: Embedder | None = None,
        corpus_fingerprint: str | None = None,
        *,
        factory: str | None = None,
        ef_construction: int | None = None,
        ef_search: int | None = None,
        nprobe: int | None = None,
        use_gpu: bool | str = "auto",
        mmap: bool = False,
        refine: int | None = None,
    ) -> DenseIndex:
        """Load a saved index; IndexMismatchError if it was built by another embedder configuration,
        over another corpus, or (when `factory` / `ef_construction` are given) with another index type or
        HNSW efConstruction. `mmap` maps the file instead of reading it (`read_index`); `refine` re-ranks with the
        exact vectors of the shards it was built from."""
        directory = Path(directory)
        manifest = read_manifest(directory, KIND)
        expected: dict[str, Any] = dict(embedder.describe()) if embedder is not None else {}
        if corpus_fingerprint is not None:
            expected["corpus_fingerprint"] = corpus_fingerprint
        if factory is not None:
            expected["factory"] = factory
        if ef_construction is not None:
            expected["ef_construction"] = ef_construction
        check_manifest(directory, manifest, expected)
        index = read_index(directory / INDEX_FILE, mmap)
        ids = partial(read_ids, directory)
        embeddings_file = manifest.get("embeddings_file")
        embeddings = np.load(directory / embeddings_file, mmap_mode="r") if embeddings_file else None
        rows = exact_rows(directory, manifest) if refine is not None else None
        return cls(index, ids, manifest, embeddings, ef_search=ef_search, nprobe=nprobe, use_gpu=use_gpu,
                   refine=refine, rows=rows)  # fmt: skip

    def set_search_params(self, ef_search: int | None = None, nprobe: int | None = None) -> None:
        """Set HNSW `efSearch` and IVF `nprobe`; a setting the index type does not have is ignored, so one
        config can carry both for every factory."""
        space = faiss.GpuParameterSpace() if self.on_gpu else faiss.ParameterSpace()
        for name, value in (("efSearch", ef_search), ("nprobe", nprobe)):
            if value is None:
                continue
            try:
                space.set_index_parameter(self.index, name, value)
            except RuntimeError:
                log.debug("index %s has no parameter %s", self.manifest.get("faiss_factory"), name)

    def search(self, query_vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k inner products for a batch of query vectors: (scores, row indices), both (n_queries, k').

        k' = min(k, ntotal). Approximate indexes may return fewer than k' hits; those slots hold index -1. With
        `refine`, the k of refine x k candidates (at most GPU_MAX_K on a GPU) with the highest exact inner product.
        """
        queries = np.ascontiguousarray(query_vectors, dtype=np.float32).reshape(-1, self.dim)
        k = min(k, self.ntotal)
        if k <= 0 or len(queries) == 0:
            return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        if self.refine is None:
            return self.index.search(queries, k)
        depth = min(k * self.refine, self.ntotal, GPU_MAX_K if self.on_gpu else self.ntotal)
        _, candidates = self.index.search(queries, depth)
        return rerank(queries, candidates, self.rows, k)

    def _place(self, index: faiss.Index, use_gpu: bool | str) -> faiss.Index:
        """`index` where `use_gpu` says (`placement`). A type FAISS has no GPU version of (HNSW) stays on the
        CPU under "auto" or "auto:shard" and is refused when a GPU placement was asked for."""
        where = placement(use_gpu)
        factory = self.manifest.get("faiss_factory") or "prebuilt"
        if where.why:
            log.info("the %s index searches on the CPU: %s", factory, where.why)
        if not where.on_gpu:
            return index
        try:
            moved = to_gpu(index, where, factory)
        except RuntimeError as err:
            if not str(use_gpu).startswith("auto"):
                message = f"index.use_gpu={use_gpu}: FAISS cannot put the {factory} index there: {err}"
                raise RuntimeError(message) from err
            log.warning("keeping the %s index on CPU: %s", factory, err)
            return index
        self.placement = where
        log.info("the %s index searches on %s", factory, where)
        return moved
