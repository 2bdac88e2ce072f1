"""Sharded, resumable dense index builds: resume, workers + merge, no-op reruns, sampling, corpus files."""

from __future__ import annotations

import json

import faiss
import numpy as np
import pytest

from hoprag.data.corpus import read_corpus, write_corpus
from hoprag.data.types import Passage
from hoprag.retrieval import DenseRetriever, IndexMismatchError, corpus_fingerprint
from hoprag.retrieval.embedders import HashingEmbedder
from hoprag.retrieval.shards import CorpusFile, PassageList, ShardStore, build_dense, parse_worker

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]


def corpus(n: int = 45) -> list[Passage]:
    return [Passage(f"p{i}", f"T{i % 7}", " ".join(WORDS[(i * j) % len(WORDS)] for j in range(1, 8))) for i in range(n)]


class CountingEmbedder(HashingEmbedder):
    """Counts the passages it encodes; raises (a killed build) once `fail_after` passages are done."""

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__(dim=16)
        self.encoded = 0
        self.fail_after = fail_after

    def encode_passages(self, passages, batch_size=None):
        if self.fail_after is not None and self.encoded >= self.fail_after:
            raise KeyboardInterrupt("killed")
        self.encoded += len(passages)
        return super().encode_passages(passages, batch_size)


def vectors_and_ids(index_dir):
    index = faiss.read_index(str(index_dir / "index.faiss"))
    return index.reconstruct_n(0, index.ntotal), json.loads((index_dir / "ids.json").read_text())


def build(tmp, emb=None, **kwargs):
    settings = {"index": {"chunk_size": 4}, "shard_size": 10, **kwargs}
    return build_dense(PassageList(corpus()), emb or CountingEmbedder(), tmp, **settings)


def test_sharded_build_is_the_index_the_dense_retriever_loads_and_would_build(tmp_path):
    result = build(tmp_path / "sharded")
    assert result.state == "built"
    retriever = DenseRetriever(corpus(), HashingEmbedder(dim=16), cache_dir=str(tmp_path / "sharded"))
    assert retriever.from_cache and retriever.index_dir == result.index_dir
    direct = DenseRetriever(corpus(), HashingEmbedder(dim=16), cache_dir=str(tmp_path / "direct"))
    assert not direct.from_cache
    np.testing.assert_array_equal(retriever.index.index.reconstruct_n(0, 45), direct.index.index.reconstruct_n(0, 45))
    with_embeddings = build(tmp_path / "kept", index={"chunk_size": 4, "save_embeddings": True})
    kept = DenseRetriever(
        corpus(), HashingEmbedder(dim=16), {"save_embeddings": True}, cache_dir=str(tmp_path / "kept")
    )
    assert kept.from_cache and kept.index_dir == with_embeddings.index_dir
    np.testing.assert_array_equal(kept.index.embeddings, direct.index.index.reconstruct_n(0, 45))
    queries = ["alpha beta", "sigma rho pi", "T3 kappa"]
    assert [[h.passage.id for h in hits] for hits in retriever.search(queries, 5)] == [
        [h.passage.id for h in hits] for hits in direct.search(queries, 5)
    ]


def test_a_killed_build_resumes_at_the_first_missing_shard_and_ends_identical(tmp_path):
    reference = build(tmp_path / "whole")
    killed = CountingEmbedder(fail_after=24)  # dies inside the third shard (chunks of 4, shards of 10)
    with pytest.raises(KeyboardInterrupt):
        build(tmp_path / "killed", killed)
    shard_dir = next((tmp_path / "killed" / "dense-shards").iterdir())
    assert sorted(p.name for p in shard_dir.glob("shard-*.npy")) == ["shard-00000.npy", "shard-00001.npy"]
    assert list(shard_dir.glob("*.tmp"))  # the unfinished shard stays unpublished

    resumed = CountingEmbedder()
    result = build(tmp_path / "killed", resumed)
    assert resumed.encoded == 45 - 20  # shards 0 and 1 were not encoded again
    assert not list(shard_dir.glob("*.tmp"))
    vectors, ids = vectors_and_ids(result.index_dir)
    expected_vectors, expected_ids = vectors_and_ids(reference.index_dir)
    np.testing.assert_array_equal(vectors, expected_vectors)
    assert ids == expected_ids == [f"p{i}" for i in range(45)]


def test_workers_then_merge_equal_one_build_and_merge_waits_for_every_shard(tmp_path):
    reference = build(tmp_path / "one")
    first = CountingEmbedder()
    result = build(tmp_path / "two", first, worker=(0, 2))
    assert result.state == "encoded" and result.missing_shards == 3 and first.encoded == 20  # shards 0-1 of 5
    with pytest.raises(FileNotFoundError, match="3 of 5 shards are missing"):
        build(tmp_path / "two", merge=True)
    second = CountingEmbedder()
    build(tmp_path / "two", second, worker=(1, 2))
    assert second.encoded == 25
    merger = CountingEmbedder()
    merged = build(tmp_path / "two", merger, merge=True)
    assert merged.state == "built" and merger.encoded == 0
    assert merged.index_dir.name == reference.index_dir.name
    np.testing.assert_array_equal(vectors_and_ids(merged.index_dir)[0], vectors_and_ids(reference.index_dir)[0])


def test_rerunning_a_finished_build_is_a_no_op_and_force_redoes_it(tmp_path):
    build(tmp_path)
    again = CountingEmbedder()
    assert build(tmp_path, again).state == "cached" and again.encoded == 0
    forced = CountingEmbedder()
    assert build(tmp_path, forced, force=True).state == "built" and forced.encoded == 45


def test_float16_shards_hold_rounded_vectors(tmp_path):
    result = build(tmp_path, dtype="float16")
    shard = np.load(next((tmp_path / "dense-shards").iterdir()) / "shard-00000.npy")
    assert shard.dtype == np.float16
    exact = HashingEmbedder(dim=16).encode_passages(corpus()[:10])
    np.testing.assert_array_equal(
        vectors_and_ids(result.index_dir)[0][:10], exact.astype(np.float16).astype(np.float32)
    )


def test_ivf_trains_on_a_uniform_sample_and_adds_every_shard(tmp_path):
    result = build(tmp_path, index={"factory": "IVF2,Flat", "train_size": 30, "chunk_size": 4})
    manifest = json.loads((result.index_dir / "manifest.json").read_text())
    assert manifest["train_sample"] == 30 and manifest["shards"]["shard_size"] == 10
    assert faiss.read_index(str(result.index_dir / "index.faiss")).ntotal == 45
    store = ShardStore(next((tmp_path / "dense-shards").iterdir()), manifest | {"dim": 16, "shard_size": 10})
    sample = store.sample(30, seed=0)
    everything = np.concatenate([store.vectors(k) for k in range(store.num_shards)])
    rows = [int(np.flatnonzero((everything == v).all(1))[0]) for v in sample]
    assert len(sample) == 30 and max(rows) >= 40  # drawn across the corpus, not its first 30 passages


def test_a_corpus_file_is_streamed_with_the_fingerprint_of_the_loaded_corpus(tmp_path):
    path = write_corpus(corpus(), tmp_path / "corpus.jsonl")
    source = CorpusFile(path)
    assert source.describe() == (45, corpus_fingerprint(read_corpus(path)))
    assert [p.id for p in source.passages(40, 50)] == ["p40", "p41", "p42", "p43", "p44"]
    build_dense(source, HashingEmbedder(dim=16), tmp_path / "cache", shard_size=16)
    assert DenseRetriever(read_corpus(path), HashingEmbedder(dim=16), cache_dir=str(tmp_path / "cache")).from_cache


def test_shards_planned_otherwise_are_refused(tmp_path):
    plan = {"num_passages": 10, "shard_size": 5, "dim": 4, "dtype": "float32"}
    ShardStore.open(tmp_path, plan)
    with pytest.raises(IndexMismatchError, match="dim: saved 4, requested 8"):
        ShardStore.open(tmp_path, {**plan, "dim": 8})


@pytest.mark.parametrize("spec", ["2/2", "1", "a/b", "0/0"])
def test_a_bad_worker_spec_is_refused(spec):
    with pytest.raises(ValueError, match="shard="):
        parse_worker(spec)


def test_worker_ranges_cover_every_shard_once():
    store = ShardStore.__new__(ShardStore)
    store.num_shards = 7
    ranges = [store.worker_shards((i, 3)) for i in range(3)]
    assert [k for r in ranges for k in r] == list(range(7))
    assert parse_worker("1/3") == (1, 3)


def test_the_hashing_embedder_is_deterministic_signed_word_hashing():
    a, b = HashingEmbedder(dim=64), HashingEmbedder(dim=64)
    texts = ["alpha beta", "Alpha, beta!"]
    np.testing.assert_array_equal(a.encode_queries(texts), b.encode_queries(texts[::-1])[::-1])
    np.testing.assert_array_equal(a.encode_queries(texts)[0], a.encode_queries(texts)[1])  # words, not characters
    one = a.encode_queries(["alpha"])[0]
    assert np.count_nonzero(one) == 1 and abs(one.sum()) == 1.0
    assert a.describe()["model"] == "hashing-64" != HashingEmbedder(dim=32).describe()["model"]
