"""Where a cached index lives: one directory per corpus fingerprint and per digest of the settings that
decide the index. The retrievers load from these directories and `hoprag.retrieval.shards` builds into
them, so both name them here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.manifest import settings_digest, slug

DEFAULT_INDEX = {
    "factory": "Flat",
    "m": None,  # HNSW's M, as the factory names it (conf/index/hnsw.yaml: factory HNSW${.m}); checked against it
    "ef_construction": None,  # HNSW's efConstruction (FAISS's default, 40, when None); part of the index's identity
    "ef_search": None,
    "nprobe": None,
    "use_gpu": "auto",  # where FAISS searches: auto, auto:shard, cpu, gpu, gpu:<n>, shard (faiss_placement.placement)
    "mmap": False,  # open the saved index memory-mapped (IVF lists, Flat vectors) instead of reading it whole
    "refine": None,  # re-rank refine x k candidates with the exact vectors of the shards (a sharded build's)
    "chunk_size": 2048,
    "train_size": 100_000,
    "save_embeddings": False,
}


def _index_dir(cache_dir: str | None, kind: str, identity: Mapping[str, Any], *name: str) -> Path | None:
    """`<cache_dir>/<kind>/<name parts>-<digest of identity>`. `identity` holds everything that decides the
    index (what its manifest is checked against), so two passage templates or embedders of one name get
    two directories side by side; the readable name parts are only for people listing the cache."""
    if cache_dir is None:
        return None
    return Path(cache_dir).expanduser() / kind / "-".join([*name, settings_digest(identity)])


def build_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The index settings that decide a dense index's vectors and graph (beside the embedder and corpus): the FAISS
    factory, and HNSW's efConstruction when set. Search settings (efSearch, nprobe) are not among them: they
    change per run without a rebuild."""
    factory, m = settings["factory"], settings.get("m")
    if m is not None and not re.search(rf"HNSW{m}(?!\d)", factory):
        raise ValueError(f"index.m={m} but the factory {factory!r} builds no HNSW{m} graph: set factory: HNSW{m}")
    built = {"factory": factory}
    if settings.get("ef_construction") is not None:
        built["ef_construction"] = settings["ef_construction"]
    return built


def dense_index_dir(
    cache_dir: str | None, embedder: Embedder, fingerprint: str, build: Mapping[str, Any]
) -> Path | None:
    """Where the dense index of (corpus, embedder, `build_settings`) lives; its identity holds the fields
    DenseIndex.load checks, so the directory name and the manifest check agree."""
    identity = {**embedder.describe(), "corpus_fingerprint": fingerprint, **build}
    return _index_dir(cache_dir, "dense", identity, fingerprint[:16], slug(embedder.name), slug(build["factory"]))


def bm25_index_dir(cache_dir: str | None, fingerprint: str, settings: Mapping[str, Any]) -> Path | None:
    """Where the BM25 index of (corpus, settings) lives; its identity is what BM25Index.load checks."""
    identity = {**settings, "corpus_fingerprint": fingerprint}
    return _index_dir(cache_dir, "bm25", identity, fingerprint[:16], slug(settings["method"]))
