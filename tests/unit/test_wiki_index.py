"""Wiki-18's compressed index at small N (issue 45): IVF lists written from the shards list by list (the bytes of a
one-piece build, resumable), opened memory-mapped (the same answers as read whole), re-ranked with the shards'
exact vectors, FlashRAG's Flat file mapped or converted, and FAISS's GPU sharding as a setting that falls back to
the CPU with a log line."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import faiss
import numpy as np
import pytest
from hydra.utils import instantiate

from hoprag.data.corpus import read_corpus
from hoprag.data.records import write_jsonl
from hoprag.data.types import Passage
from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import DenseRetriever, IndexMismatchError, ivf_build
from hoprag.retrieval.dense import DenseIndex, read_index
from hoprag.retrieval.faiss_placement import Placement, placement
from hoprag.retrieval.embedders import HashingEmbedder
from hoprag.retrieval.flashrag_index import PrebuiltDenseRetriever
from hoprag.retrieval.index_dirs import DEFAULT_INDEX
from hoprag.retrieval.search_plan import footprint, search_plan
from hoprag.retrieval.shards import PassageList, ShardStore, build_dense
from tests.fakes import HashEmbedder
from tests.unit.test_faiss_placement import FakeGpus, faiss_cpu

DIM, N = 16, 2400
SETTINGS = {**DEFAULT_INDEX, "train_size": 1200, "chunk_size": 300, "use_gpu": "cpu"}


def unit_rows(n: int = N, seed: int = 0) -> np.ndarray:
    """Clustered unit vectors: 30 centres, each with its own spread."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((30, DIM))
    x = centres[rng.integers(0, 30, n)] + 0.4 * rng.standard_normal((n, DIM))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def shard_store(tmp_path, vectors: np.ndarray, shard_size: int = 700, dtype: str = "float32") -> ShardStore:
    """A complete store of `vectors`, written as a build's shards are."""
    plan = {"embedder": "rows", "model": "test://rows", "corpus_fingerprint": "f" * 16, "num_passages": len(vectors),
            "shard_size": shard_size, "dtype": dtype, "dim": vectors.shape[1]}  # fmt: skip
    store = ShardStore.open(tmp_path / "shards", plan)
    for k in range(store.num_shards):
        start, stop = store.bounds(k)
        np.save(store.vectors_path(k), vectors[start:stop].astype(dtype))
        store.ids_path(k).write_text(json.dumps({"ids": [f"p{i}" for i in range(start, stop)], "seconds": 0.0}))
        store.stamp(k)
    return store


def one_piece(store: ShardStore, faiss_factory: str, vectors: np.ndarray) -> faiss.Index:
    index = faiss.index_factory(DIM, faiss_factory, faiss.METRIC_INNER_PRODUCT)
    index.train(store.sample(min(store.num_passages, SETTINGS["train_size"]), ivf_build.SEED))
    index.add(vectors)
    return index


@pytest.mark.parametrize("factory", ["IVF32_HNSW8,PQ8x8", "IVF32,SQ8", "IVF1,Flat"])
def test_a_shard_by_shard_build_writes_the_bytes_of_a_one_piece_build(tmp_path, monkeypatch, factory):
    monkeypatch.setattr(ivf_build, "RANGE_BYTES", 2048)  # many ranges of lists, as at wiki-18 scale
    vectors = unit_rows()
    store = shard_store(tmp_path, vectors)
    manifest = ivf_build.build_ivf(store, tmp_path / "index", factory, SETTINGS, fresh=False)
    faiss.write_index(one_piece(store, manifest["faiss_factory"], vectors), str(tmp_path / "one.faiss"))
    assert (tmp_path / "index" / "index.faiss").read_bytes() == (tmp_path / "one.faiss").read_bytes()
    assert json.loads((tmp_path / "index" / "ids.json").read_text()) == [f"p{i}" for i in range(N)]
    assert not (tmp_path / "index" / ivf_build.RUNS).exists() and manifest["streamed"]


def test_a_killed_build_resumes_at_its_first_missing_run_and_ends_the_same(tmp_path, monkeypatch, caplog):
    store = shard_store(tmp_path, unit_rows())
    write_run = ivf_build._write_run

    def dies_at_shard_2(trained, store, shard, runs, chunk_size):
        if shard == 2:
            raise KeyboardInterrupt
        write_run(trained, store, shard, runs, chunk_size)

    monkeypatch.setattr(ivf_build, "_write_run", dies_at_shard_2)
    with pytest.raises(KeyboardInterrupt):
        ivf_build.build_ivf(store, tmp_path / "index", "IVF32,PQ8x8", SETTINGS, fresh=False)
    written = []
    monkeypatch.setattr(ivf_build, "_write_run", lambda *a: written.append(a[2]) or write_run(*a))
    caplog.set_level(logging.INFO)
    ivf_build.build_ivf(store, tmp_path / "index", "IVF32,PQ8x8", SETTINGS, fresh=False)
    assert written == [2, 3] and "2 of 4 shards already assigned" in caplog.text
    ivf_build.build_ivf(store, tmp_path / "fresh", "IVF32,PQ8x8", SETTINGS, fresh=True)
    assert (tmp_path / "index/index.faiss").read_bytes() == (tmp_path / "fresh/index.faiss").read_bytes()


def test_a_mapped_index_answers_the_same_top_10_as_the_loaded_one(tmp_path):
    vectors = unit_rows()
    store = shard_store(tmp_path, vectors)
    ivf_build.build_ivf(store, tmp_path / "ivf", "IVF32_HNSW8,PQ8x8", SETTINGS, fresh=False)
    flat = faiss.IndexFlatIP(DIM)
    flat.add(vectors)
    faiss.write_index(flat, str(tmp_path / "flat.faiss"))
    queries = unit_rows(50, seed=1)
    loaded, mapped = (DenseIndex.load(tmp_path / "ivf", nprobe=8, use_gpu="cpu", mmap=m) for m in (False, True))
    for a, b in [(loaded.search(queries, 10), mapped.search(queries, 10)),
                 (read_index(tmp_path / "flat.faiss").search(queries, 10),
                  read_index(tmp_path / "flat.faiss", mmap=True).search(queries, 10))]:  # fmt: skip
        np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_array_equal(a[0], b[0])


def test_refine_reranks_the_candidates_by_their_exact_vectors_from_the_shards(tmp_path):
    vectors = unit_rows()
    store = shard_store(tmp_path, vectors, dtype="float16")
    ivf_build.build_ivf(store, tmp_path / "ivf", "IVF32,PQ4x4", SETTINGS, fresh=False)
    queries = unit_rows(40, seed=2)
    exact = queries @ vectors.astype(np.float16).astype(np.float32).T
    plain = DenseIndex.load(tmp_path / "ivf", nprobe=32, use_gpu="cpu").search(queries, 10)
    refined = DenseIndex.load(tmp_path / "ivf", nprobe=32, use_gpu="cpu", refine=N // 10).search(queries, 10)
    np.testing.assert_array_equal(refined[1], np.argsort(-exact, axis=1, kind="stable")[:, :10])  # all candidates
    np.testing.assert_allclose(refined[0], np.take_along_axis(exact, refined[1], 1), rtol=1e-6)
    assert not np.array_equal(plain[1], refined[1])  # 4-bit codes alone rank otherwise


def test_refine_needs_the_shards_of_a_sharded_build(tmp_path):
    corpus = [Passage(f"p{i}", "", f"words {i % 7} and {i % 5}") for i in range(50)]
    one_process = DenseRetriever(corpus, HashingEmbedder(dim=DIM), {"use_gpu": "cpu"}, cache_dir=str(tmp_path))
    with pytest.raises(IndexMismatchError, match="built in one process: build it with python build_index.py"):
        DenseIndex.load(one_process.index_dir, refine=4)
    with pytest.raises(ValueError, match="index.refine needs a cache_dir"):
        DenseRetriever(corpus, HashingEmbedder(dim=DIM), {"refine": 4})
    store = shard_store(tmp_path / "s", unit_rows())
    ivf_build.build_ivf(store, tmp_path / "ivf", "IVF8,PQ4", SETTINGS, fresh=False)
    store.vectors_path(1).unlink()
    with pytest.raises(FileNotFoundError, match="shard-00001.npy.*re-ranking reads them there"):
        DenseIndex.load(tmp_path / "ivf", refine=4)


def test_the_retriever_builds_a_refined_index_through_shards_once(tmp_path):
    corpus = [Passage(f"p{i}", f"T{i}", f"passage {i} on topic {i % 37} with {i % 11} and {i % 5}") for i in range(900)]
    index = {"factory": "IVF16_HNSW8,PQ4x8", "refine": 180, "nprobe": 16, "mmap": True, "train_size": 900}
    built = DenseRetriever(corpus, HashingEmbedder(dim=DIM), index, cache_dir=str(tmp_path))
    again = DenseRetriever(corpus, HashingEmbedder(dim=DIM), index, cache_dir=str(tmp_path))
    assert not built.from_cache and again.from_cache and again.index.manifest["streamed"]
    flat = DenseRetriever(corpus, HashingEmbedder(dim=DIM), {"use_gpu": "cpu"})
    queries = [f"topic {i} with {i % 11}" for i in range(20)]
    got = [[h.score for h in hits] for hits in again.search(queries, 5)]
    want = [[h.score for h in hits] for hits in flat.search(queries, 5)]
    np.testing.assert_allclose(got, want, rtol=1e-5)  # every passage re-ranked (180 x 5): Flat's scores, ties aside


@pytest.fixture
def flashrag_flat(tmp_path):
    """A FlashRAG layout: a corpus JSONL and a Flat file whose row i is line i's vector."""
    vectors = unit_rows(600)
    corpus = write_jsonl(({"id": str(i), "contents": f'"T{i}"\ntext {i}'} for i in range(600)), tmp_path / "c.jsonl")
    flat = faiss.IndexFlatIP(DIM)
    flat.add(vectors)
    faiss.write_index(flat, str(tmp_path / "e5_Flat.index"))
    return read_corpus(corpus), tmp_path / "e5_Flat.index", vectors


class QueryRows:
    """A query "embedder" of the Flat file's model whose query i is vector i of `queries`."""

    model, pooling, dim, name = "test://rows", None, DIM, "rows"

    def __init__(self, queries: np.ndarray) -> None:
        self.queries = queries

    def encode_queries(self, texts, batch_size=None):
        return self.queries[[int(t) for t in texts]]


def test_flashrags_flat_file_is_searched_mapped_or_converted_into_the_compressed_index(tmp_path, flashrag_flat):
    corpus, path, vectors = flashrag_flat
    queries = QueryRows(unit_rows(30, seed=3))
    texts = [str(i) for i in range(30)]
    whole, mapped = (PrebuiltDenseRetriever(corpus, queries, str(path), {"model": "test://rows"},
                                            index={"mmap": m, "use_gpu": "cpu"}) for m in (False, True))  # fmt: skip
    top = [[h.passage.id for h in hits] for hits in whole.search(texts, 10)]
    assert [[h.passage.id for h in hits] for hits in mapped.search(texts, 10)] == top
    index = {"factory": "IVF8,PQ4x8", "refine": 60, "nprobe": 8, "mmap": True, "train_size": 600, "use_gpu": "cpu"}
    converted = PrebuiltDenseRetriever(corpus, queries, str(path), {"model": "test://rows"}, index=index,
                                       cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert not converted.from_cache and converted.index.manifest["index_file"] == "e5_Flat.index"
    assert [[h.passage.id for h in hits] for hits in converted.search(texts, 10)] == top  # 60 x 10 rows: all re-ranked
    shards = converted.index.rows
    np.testing.assert_array_equal(shards.read(np.arange(600)), vectors)  # the rows copied as they were
    again = PrebuiltDenseRetriever(corpus, queries, str(path), {"model": "test://rows"}, index=index,
                                   cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert again.from_cache


def test_auto_shard_spreads_the_index_over_every_gpu_or_falls_back_to_the_cpu_with_a_log_line(monkeypatch, caplog):
    vectors = unit_rows(200)
    flat = faiss.IndexFlatIP(DIM)
    flat.add(vectors)
    gpus = FakeGpus(monkeypatch, n=2)
    sharded = DenseIndex(flat, [], {"faiss_factory": "Flat"}, use_gpu="auto:shard")
    assert sharded.placement == Placement("shard") and gpus.calls == [("all", True, False)]
    faiss_cpu(monkeypatch)
    caplog.set_level(logging.INFO)
    kept = DenseIndex(flat, [], {"faiss_factory": "Flat"}, use_gpu="auto:shard")
    assert kept.placement == Placement("cpu")
    assert "the Flat index searches on the CPU: the installed FAISS" in caplog.text
    np.testing.assert_array_equal(kept.search(vectors[:3], 1)[1][:, 0], [0, 1, 2])
    with pytest.raises(RuntimeError, match="index.use_gpu=shard: the installed FAISS has no GPU support"):
        placement("shard")  # asked for explicitly: refused, as before


def test_a_placed_build_runs_its_k_means_on_the_gpu_and_keeps_the_hnsw_quantizer(tmp_path, monkeypatch):
    gpus = FakeGpus(monkeypatch, n=2)
    store = shard_store(tmp_path, unit_rows())
    settings = {**SETTINGS, "use_gpu": "auto:shard"}
    manifest = ivf_build.build_ivf(store, tmp_path / "ivf", "IVF32_HNSW8,PQ8x8", settings, fresh=False)
    assert gpus.calls == [("gpu", 0, False)]  # one GPU's flat index clusters, whatever the placement
    index = faiss.read_index(str(tmp_path / "ivf" / "index.faiss"))
    assert isinstance(faiss.downcast_index(faiss.extract_index_ivf(index).quantizer), faiss.IndexHNSWFlat)
    assert manifest["faiss_factory"].startswith("IVF30_HNSW8,")  # lists clipped to the 1,200-vector sample


@pytest.mark.parametrize("script", ["build_index", "eval"])
def test_gpu_sharding_of_the_wiki18_preset_composes(compose_cfg, script):
    extra = ["+method=standard_rag"] if script == "eval" else []
    cfg = compose_cfg(script, [*extra, "index=wiki18", "index.use_gpu=auto:shard"])
    assert cfg.retriever.index.use_gpu == "auto:shard" and cfg.retriever.index.factory == "IVF16384_HNSW32,PQ96x8"
    cfg = compose_cfg(script, [*extra, "retriever=flashrag_dense", "index=wiki18_1024", "index.use_gpu=auto:shard"])
    assert cfg.retriever.index.factory == "IVF16384_HNSW32,PQ128x8" and cfg.retriever.index.refine == 100


def test_gpu_sharding_composes_on_the_command_line_with_cfg_job():
    shown = subprocess.run([sys.executable, "eval.py", "+method=standard_rag", "index=wiki18", "index.use_gpu=auto:shard",
                            "--cfg", "job"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "HF_HUB_OFFLINE": "1"}, check=False)  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "use_gpu: auto:shard" in shown.stdout and "factory: IVF16384_HNSW32,PQ96x8" in shown.stdout


def test_the_wiki18_preset_composes_builds_and_falls_back_to_the_cpu_with_a_log_line(compose_cfg, tmp_path, caplog):
    overrides = ["index=wiki18", "index.use_gpu=auto:shard", "embedder=hashing", "embedder.dim=768"]
    cfg = compose_cfg("build_index", overrides)
    corpus = [Passage(f"p{i}", f"T{i}", f"passage {i} on topic {i % 37} and {i % 5}") for i in range(400)]
    caplog.set_level(logging.INFO)
    retriever = instantiate(cfg.retriever)(corpus=corpus)
    assert retriever.index.placement == Placement("cpu") and "searches on the CPU: " in caplog.text
    assert retriever.index.manifest["faiss_factory"].startswith("IVF10_HNSW32,PQ96x")  # clipped to 400 passages
    assert len(retriever.search(["topic 3"], 5)[0]) == 5


def test_the_footprint_and_search_plan_state_where_and_how_much(monkeypatch):
    assert footprint("Flat", 768, 1_000_000) == 768 * 4 * 1_000_000
    assert footprint("IVF16384_HNSW32,PQ96x8", 768, 21_000_000) / 2**30 == pytest.approx(2.08, abs=0.01)
    preset = {**DEFAULT_INDEX, "factory": "IVF16384_HNSW32,PQ96x8", "train_size": 655360, "mmap": True,
              "refine": 10, "use_gpu": "cpu"}  # fmt: skip
    plan = search_plan(preset, 768, 21_015_324)
    assert plan.text.startswith("on the CPU, memory-mapped: 2.1 GiB on disk") and "re-ranks 10 x k" in plan.text
    assert plan.gpus == () and not plan.resident
    FakeGpus(monkeypatch, n=4)
    flat = {**DEFAULT_INDEX, "use_gpu": "auto:shard"}
    plan = search_plan(flat, 768, 21_015_324)
    assert str(plan) == "sharded over 4 GPU(s): 15.0 GiB of GPU memory each (60.1 GiB in all)"
    assert plan.gpus == (0, 1, 2, 3) and plan.each == 768 * 4 * 21_015_324 // 4


def test_build_dense_writes_ivf_streamed_and_other_types_as_before(tmp_path):
    corpus = [Passage(f"p{i}", "", f"w{i % 13} w{i % 7} w{i % 3}") for i in range(300)]
    ivf = build_dense(PassageList(corpus), HashEmbedder(dim=DIM), tmp_path, {"factory": "IVF4,PQ4", "train_size": 300})
    hnsw = build_dense(PassageList(corpus), HashEmbedder(dim=DIM), tmp_path, {"factory": "HNSW8"})
    assert json.loads((ivf.index_dir / "manifest.json").read_text())["streamed"]
    assert "streamed" not in json.loads((hnsw.index_dir / "manifest.json").read_text())


def test_build_index_converts_flashrags_flat_file_once_and_the_retriever_finds_the_conversion(tmp_path, flashrag_flat):
    corpus, path, _ = flashrag_flat
    cache = tmp_path / "cache"
    args = [f"corpus={tmp_path / 'c.jsonl'}", "retriever=flashrag_dense", f"retriever.index_path={path}",
            "retriever.built_with.model=test://rows", "~retriever.built_with.pooling", "embedder=hashing",
            f"embedder.dim={DIM}", "index=wiki18", "index.factory='IVF8,PQ4x8'", "index.train_size=600",
            "shards.dtype=float16", "shards.size=250"]  # fmt: skip

    def build_index() -> str:
        env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(cache)), "HF_HUB_OFFLINE": "1"}
        proc = subprocess.run([sys.executable, "build_index.py", *args, f"hydra.run.dir={tmp_path / 'run'}"],
                              cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout + proc.stderr

    assert "IVF8,PQ4x8 conversion of" in (first := build_index()) and "index built" in first
    assert "index already in cache" in build_index()
    index = {"factory": "IVF8,PQ4x8", "refine": 100, "nprobe": 8, "mmap": True, "use_gpu": "cpu"}
    retriever = PrebuiltDenseRetriever(corpus, QueryRows(unit_rows(5, seed=4)), str(path), {"model": "test://rows"},
                                       index=index, cache_dir=str(cache / "indexes"))  # fmt: skip
    assert retriever.from_cache and retriever.index.manifest["shards"]["dtype"] == "float16"
