"""HNSW's M, efConstruction and efSearch, and IVF's nprobe, as index settings: build settings make another index
beside the first, search settings change per run without a rebuild."""

from __future__ import annotations

import faiss
import pytest

from hoprag.data.types import Passage
from hoprag.retrieval import DenseRetriever
from hoprag.retrieval.embedders import HashingEmbedder

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
    "sigma",
]
CORPUS = [Passage(f"p{i}", f"T{i}", " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 7))) for i in range(300)]


def dense(cache, **index):
    return DenseRetriever(CORPUS, HashingEmbedder(dim=16), {"use_gpu": False, **index}, cache_dir=str(cache))


def test_hnsw_build_settings_make_their_own_index_and_ef_search_changes_per_run(tmp_path):
    first = dense(tmp_path, factory="HNSW8", m=8, ef_construction=64, ef_search=16)
    graph = faiss.downcast_index(first.index.index).hnsw
    assert not first.from_cache and graph.efConstruction == 64 and graph.efSearch == 16
    assert first.index.manifest["ef_construction"] == 64
    searched = dense(tmp_path, factory="HNSW8", m=8, ef_construction=64, ef_search=48)
    assert searched.from_cache and searched.index_dir == first.index_dir
    assert faiss.downcast_index(searched.index.index).hnsw.efSearch == 48
    other = dense(tmp_path, factory="HNSW8", m=8, ef_construction=100)
    assert not other.from_cache and other.index_dir != first.index_dir and first.index_dir.is_dir()
    with pytest.raises(ValueError, match="needs an HNSW factory"):
        dense(tmp_path / "flat", factory="Flat", ef_construction=64)
    with pytest.raises(ValueError, match="builds no HNSW16 graph"):
        dense(tmp_path, factory="HNSW8", m=16)


def test_ivf_nprobe_is_set_per_run_on_the_cached_index(tmp_path):
    built = dense(tmp_path, factory="IVF4,Flat", nprobe=1)
    loaded = dense(tmp_path, factory="IVF4,Flat", nprobe=4)
    assert loaded.from_cache and loaded.index_dir == built.index_dir
    assert faiss.extract_index_ivf(built.index.index).nprobe == 1
    assert faiss.extract_index_ivf(loaded.index.index).nprobe == 4
    queries = ["alpha beta gamma", "sigma rho"]
    exact = dense(tmp_path / "flat", factory="Flat").search(queries, 5)
    scores = [[round(h.score, 5) for h in q] for q in loaded.search(queries, 5)]
    assert scores == [[round(h.score, 5) for h in q] for q in exact]  # every list probed: exact (ties aside)


def test_the_hnsw_config_names_m_once(compose_cfg):
    cfg = compose_cfg("eval", ["+method=standard_rag", "index=hnsw", "index.m=16", "index.ef_construction=80"])
    assert cfg.index.factory == "HNSW16" and cfg.retriever.index.ef_construction == 80
