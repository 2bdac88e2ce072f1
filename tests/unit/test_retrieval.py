"""Retrieval building blocks on a deterministic hashing embedder: no model, runs in seconds."""

from __future__ import annotations

import functools
import json

import faiss
import numpy as np
import pytest
from omegaconf import OmegaConf

from hoprag.data.types import Passage
from hoprag.retrieval import (
    BM25Index,
    BM25Retriever,
    DenseIndex,
    DenseRetriever,
    FusionRetriever,
    Hit,
    IndexMismatchError,
    Retriever,
    corpus_fingerprint,
    reciprocal_rank_fusion,
)
from hoprag.retrieval.dense import adapt_factory
from hoprag.retrieval.embedders import _shared_model
from hoprag.retrieval.manifest import settings_digest
from tests.fakes import HashEmbedder

WORDS = [f"w{i}" for i in range(400)]


def make_corpus(n: int, seed: int = 0) -> list[Passage]:
    rng = np.random.default_rng(seed)
    return [
        Passage(f"p{i}", f"Title {i}", " ".join(rng.choice(WORDS, size=12, replace=False))) for i in range(n)
    ]


@pytest.fixture(scope="module")
def corpus() -> list[Passage]:
    return make_corpus(300)


# ---- fingerprint -------------------------------------------------------------------------------------


def test_fingerprint_depends_on_ids_contents_and_order():
    a = make_corpus(5)
    assert corpus_fingerprint(a) == corpus_fingerprint(iter(list(a)))
    assert len(corpus_fingerprint(a)) == 64
    changed_text = [*a[:4], Passage(a[4].id, a[4].title, a[4].text + " x")]
    changed_id = [*a[:4], Passage("other", a[4].title, a[4].text)]
    assert len({corpus_fingerprint(c) for c in (a, changed_text, changed_id, a[::-1])}) == 4
    # moving text across the title/text boundary is a different corpus
    assert corpus_fingerprint([Passage("x", "a b", "c")]) != corpus_fingerprint([Passage("x", "a", "b c")])


# ---- embedder base -----------------------------------------------------------------------------------


def test_embedder_templates_prefix_and_normalisation():
    emb = HashEmbedder(query_prefix="query: ", passage_template="Title: {title}\nContext: {text}")
    p = Passage("1", "Paris", "capital of France")
    assert emb.passage_text(p) == "Title: Paris\nContext: capital of France"
    q = emb.encode_queries(["capital"])
    assert q.dtype == np.float32 and q.shape == (1, 64)
    assert np.allclose(np.linalg.norm(q, axis=1), 1.0)
    assert np.allclose(q, HashEmbedder().encode_queries(["query: capital"]))
    assert emb.encode_passages([]).shape == (0, 64)
    raw = HashEmbedder(normalize=False).encode_passages([p])
    assert np.linalg.norm(raw) > 1.5


def test_shared_model_loads_once():
    loads = []
    key = ("test", object())
    first = _shared_model(key, lambda: loads.append(1) or object())
    assert _shared_model(key, lambda: loads.append(1) or object()) is first
    assert loads == [1]


# ---- dense index -------------------------------------------------------------------------------------


def test_adapt_factory_clips_for_small_training_sets():
    assert adapt_factory("Flat", 10) == "Flat"
    assert adapt_factory("HNSW32", 10) == "HNSW32"
    assert adapt_factory("IVF1024,PQ64", 1_000_000) == "IVF1024,PQ64"
    assert adapt_factory("IVF1024,PQ64", 20_000) == "IVF512,PQ64"  # 512 * 39 <= 20000: 8-bit PQ stays
    assert adapt_factory("IVF1024,PQ64", 1000) == "IVF25,PQ64x4"
    assert adapt_factory("IVF1024,PQ16x6", 100) == "IVF2,PQ16x1"
    assert adapt_factory("OPQ16_64,IVF256_HNSW32,PQ16", 100_000) == "OPQ16_64,IVF256_HNSW32,PQ16"
    assert adapt_factory("IVF4096,Flat", 10) == "IVF1,Flat"


def test_flat_index_finds_each_passage_by_its_text(corpus):
    emb = HashEmbedder()
    index = DenseIndex.build(corpus, emb, progress=False)
    assert index.ntotal == len(corpus) and index.dim == 64 and index.ids == [p.id for p in corpus]
    queries = emb.encode_queries([p.contents for p in corpus[:20]])
    scores, rows = index.search(queries, 5)
    assert scores.shape == rows.shape == (20, 5)
    assert list(rows[:, 0]) == list(range(20))
    assert np.allclose(scores[:, 0], 1.0, atol=1e-5)  # cosine of a normalised vector with itself
    assert np.all(np.diff(scores, axis=1) <= 1e-6)
    assert index.search(queries, 10_000)[1].shape == (20, len(corpus))


def test_build_streams_chunks_and_writes_embeddings_memmap(corpus, tmp_path):
    emb = HashEmbedder()
    index = DenseIndex.build(
        corpus, emb, chunk_size=64, batch_size=16, embeddings_path=tmp_path / "emb.npy", progress=False
    )
    assert emb.calls == [64, 64, 64, 64, 44]  # never the whole corpus in one call
    assert isinstance(index.embeddings, np.memmap) and index.embeddings.shape == (300, 64)
    assert np.allclose(index.embeddings, HashEmbedder().encode_passages(corpus))
    assert np.load(tmp_path / "emb.npy", mmap_mode="r").dtype == np.float32


def test_save_load_roundtrip_and_manifest(corpus, tmp_path):
    emb = HashEmbedder()
    fp = corpus_fingerprint(corpus)
    index = DenseIndex.build(corpus, emb, progress=False)
    index.save(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for key, value in {
        "embedder": "hash-bow",
        "model": "test://hash-bow",
        "dim": 64,
        "normalize": True,
        "passage_template": "{title}\n{text}",
        "factory": "Flat",
        "corpus_fingerprint": fp,
        "num_passages": 300,
    }.items():
        assert manifest[key] == value
    assert {"build_seconds", "created_at", "hoprag_version"} <= set(manifest)
    loaded = DenseIndex.load(tmp_path, embedder=emb, corpus_fingerprint=fp)
    q = emb.encode_queries(["w1 w2 w3", "w7"])
    assert np.array_equal(loaded.search(q, 7)[1], index.search(q, 7)[1])
    assert loaded.ids == index.ids and loaded.build_seconds == manifest["build_seconds"]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"embedder": HashEmbedder(name="other-model")}, "embedder"),
        ({"embedder": HashEmbedder(passage_template="Title: {title}\nContext: {text}")}, "passage_template"),
        ({"corpus_fingerprint": corpus_fingerprint(make_corpus(3))}, "corpus_fingerprint"),
        ({"factory": "HNSW32"}, "factory"),
    ],
)
def test_load_refuses_a_mismatched_index(corpus, tmp_path, kwargs, field):
    DenseIndex.build(corpus, HashEmbedder(), progress=False).save(tmp_path)
    with pytest.raises(IndexMismatchError, match=field):
        DenseIndex.load(tmp_path, **kwargs)


def test_load_of_an_unfinished_directory_fails(tmp_path):
    with pytest.raises(FileNotFoundError, match="manifest"):
        DenseIndex.load(tmp_path)


def test_hnsw_and_ivfpq_factories(corpus):
    emb = HashEmbedder()
    queries = emb.encode_queries([p.contents for p in corpus[:50]])
    hnsw = DenseIndex.build(corpus, emb, "HNSW32", ef_search=77, progress=False)
    assert faiss.downcast_index(hnsw.index).hnsw.efSearch == 77
    assert np.mean(hnsw.search(queries, 1)[1][:, 0] == np.arange(50)) >= 0.95

    ivfpq = DenseIndex.build(corpus, emb, "IVF1024,PQ16", nprobe=4, progress=False)
    assert ivfpq.manifest["faiss_factory"] == "IVF7,PQ16x2" and ivfpq.manifest["factory"] == "IVF1024,PQ16"
    assert faiss.extract_index_ivf(ivfpq.index).nprobe == 4
    _, rows = ivfpq.search(queries, 10)
    assert np.mean([i in row for i, row in enumerate(rows)]) >= 0.7
    ivfpq.set_search_params(nprobe=7, ef_search=5)  # efSearch does not apply to this type and is ignored
    assert faiss.extract_index_ivf(ivfpq.index).nprobe == 7


# ---- BM25 --------------------------------------------------------------------------------------------

HAND = [
    Passage("a", "Neil Peart", "Neil Peart was the drummer and lyricist of the rock band Rush."),
    Passage("b", "Toto", "Toto is an American rock band formed in 1977 in Los Angeles."),
    Passage("c", "Paris", "Paris is the capital and most populous city of France."),
    Passage("d", "Running", "Running is a method of terrestrial locomotion by which humans run quickly."),
    Passage("e", "Baking", "Baking uses dry heat, typically in an oven, to cook bread."),
]


def test_bm25_ranks_the_passage_with_the_query_terms_first(tmp_path):
    index = BM25Index.build(HAND)
    scores, rows = index.search(["who was the drummer of Rush", "capital of France", "runs", "the of a"], 3)
    assert [HAND[r].id for r in rows[:3, 0]] == ["a", "c", "d"]
    assert scores[0, 0] > scores[0, 1] and scores[2, 0] > 0  # "runs" matches "running" through stemming
    assert np.all(scores[3] == 0)  # only stop words: nothing matches
    assert index.search(["rock band"], 100)[1].shape == (1, 5)
    index.save(tmp_path)
    loaded = BM25Index.load(tmp_path, corpus_fingerprint(HAND), k1=1.5, method="lucene")
    assert np.array_equal(loaded.search(["rock band"], 2)[1], index.search(["rock band"], 2)[1])
    with pytest.raises(IndexMismatchError, match="k1"):
        BM25Index.load(tmp_path, k1=0.9)
    with pytest.raises(IndexMismatchError, match="corpus_fingerprint"):
        BM25Index.load(tmp_path, corpus_fingerprint(HAND[:2]))


# ---- fusion ------------------------------------------------------------------------------------------


def test_rrf_exact_values_and_stable_ties():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "d"]], k=60)
    assert [d for d, _ in fused] == ["b", "c", "a", "d"]
    expected = {"a": 1 / 61, "b": 1 / 62 + 1 / 61, "c": 1 / 63 + 1 / 62, "d": 1 / 63}
    assert dict(fused) == pytest.approx(expected)
    assert [d for d, _ in reciprocal_rank_fusion([["x", "y"], ["y", "x"]])] == ["x", "y"]
    assert dict(reciprocal_rank_fusion([["a"], ["b"]], k=1, weights=[1.0, 3.0])) == {"b": 1.5, "a": 0.5}
    assert reciprocal_rank_fusion([["a", "a"]], k=0) == [("a", 1.0)]
    with pytest.raises(ValueError):
        reciprocal_rank_fusion([["a"]], weights=[1, 2])


# ---- retrievers --------------------------------------------------------------------------------------


def test_dense_retriever_caches_by_fingerprint_embedder_and_factory(corpus, tmp_path):
    first = DenseRetriever(corpus=corpus, embedder=HashEmbedder(), cache_dir=str(tmp_path))
    fp = corpus_fingerprint(corpus)
    assert not first.from_cache
    identity = {**HashEmbedder().describe(), "corpus_fingerprint": fp, "factory": "Flat"}
    assert first.index_dir == tmp_path / "dense" / f"{fp[:16]}-hash-bow-flat-{settings_digest(identity)}"
    assert (first.index_dir / "manifest.json").is_file()

    emb = HashEmbedder()
    second = DenseRetriever(corpus=corpus, embedder=emb, index={"factory": "Flat"}, cache_dir=str(tmp_path))
    assert second.from_cache and emb.calls == []  # nothing re-encoded
    assert second.build_seconds == first.build_seconds
    q = ["w1 w5 w9"]
    assert [h.passage.id for h in second.search(q, 5)[0]] == [h.passage.id for h in first.search(q, 5)[0]]

    forced = DenseRetriever(corpus=corpus, embedder=HashEmbedder(), cache_dir=str(tmp_path), force=True)
    assert not forced.from_cache

    hnsw = DenseRetriever(
        corpus=corpus, embedder=HashEmbedder(), index={"factory": "HNSW32"}, cache_dir=str(tmp_path)
    )
    assert hnsw.index_dir.name.startswith(f"{fp[:16]}-hash-bow-hnsw32-") and not hnsw.from_cache
    assert not DenseRetriever(corpus=corpus[:-1], embedder=HashEmbedder(), cache_dir=str(tmp_path)).from_cache


def test_dense_retriever_hits_calls_and_vectors(corpus, tmp_path):
    emb = HashEmbedder()
    index_cfg = OmegaConf.create(  # as Hydra passes it
        {"factory": "Flat", "ef_search": 64, "nprobe": 32, "use_gpu": "auto", "chunk_size": 100}
    )
    index_cfg.save_embeddings = True
    retriever = DenseRetriever(
        corpus=corpus, embedder=emb, index=index_cfg, cache_dir=str(tmp_path), batch_size=8
    )
    assert max(emb.calls) == 100
    assert retriever.index.embeddings.shape == (300, 64)
    hits = retriever.search([corpus[3].contents, corpus[7].contents], 4)
    assert [len(h) for h in hits] == [4, 4]
    assert hits[0][0] == Hit(corpus[3], pytest.approx(1.0, abs=1e-5), 1)
    assert [h.rank for h in hits[1]] == [1, 2, 3, 4] and hits[1][0].passage.id == "p7"
    assert retriever.calls == 2
    by_vector = retriever.search_vectors(retriever.index.embeddings[[5, 6, 8]], 2)
    assert [h[0].passage.id for h in by_vector] == ["p5", "p6", "p8"]
    assert retriever.calls == 5 and retriever.reset_calls() == 5 and retriever.calls == 0
    assert retriever.get("p9") is corpus[9] and retriever.passages == corpus
    assert len(retriever.search(["w1"], 1000)[0]) == len(corpus)
    with pytest.raises(TypeError, match="batch"):
        retriever.search("a single string", 3)
    with pytest.raises(TypeError, match="unknown"):
        DenseRetriever(corpus=corpus, embedder=emb, index={"factroy": "Flat"})
    with pytest.raises(ValueError, match="duplicate"):
        DenseRetriever(corpus=[*corpus, corpus[0]], embedder=emb)

    # an index cached without embeddings is kept when they are asked for: the error names the fix
    assert DenseRetriever(corpus=corpus, embedder=emb, index=index_cfg, cache_dir=str(tmp_path)).from_cache
    index_cfg.save_embeddings = False
    DenseRetriever(corpus=corpus, embedder=emb, index=index_cfg, cache_dir=str(tmp_path), force=True)
    index_cfg.save_embeddings = True
    with pytest.raises(IndexMismatchError, match="without its embeddings.*force=true"):
        DenseRetriever(corpus=corpus, embedder=emb, index=index_cfg, cache_dir=str(tmp_path))
    rebuilt = DenseRetriever(corpus=corpus, embedder=emb, index=index_cfg, cache_dir=str(tmp_path), force=True)
    assert not rebuilt.from_cache and rebuilt.index.embeddings is not None


def test_bm25_retriever_caches(tmp_path):
    first = BM25Retriever(corpus=HAND, cache_dir=str(tmp_path))
    assert not first.from_cache and "-lucene-" in first.index_dir.name
    second = BM25Retriever(corpus=HAND, cache_dir=str(tmp_path))
    assert second.from_cache and second.build_seconds == first.build_seconds
    # other settings: another directory, beside the first
    other = BM25Retriever(corpus=HAND, cache_dir=str(tmp_path), k1=1.2)
    assert not other.from_cache and other.index_dir != first.index_dir
    assert BM25Retriever(corpus=HAND, cache_dir=str(tmp_path)).from_cache
    assert not BM25Retriever(corpus=HAND, cache_dir=str(tmp_path), force=True).from_cache
    hits = second.search(["drummer of Rush", "Paris France"], 2)
    assert [h[0].passage.id for h in hits] == ["a", "c"] and second.calls == 2


def test_fusion_retriever_builds_parts_from_partials_and_counts_queries_once(tmp_path):
    emb = HashEmbedder()
    fusion = FusionRetriever(
        corpus=HAND,
        dense=functools.partial(DenseRetriever, embedder=emb, cache_dir=str(tmp_path)),
        sparse=functools.partial(BM25Retriever, cache_dir=str(tmp_path)),
        rrf_k=60,
        depth=5,
    )
    assert isinstance(fusion.dense, DenseRetriever) and isinstance(fusion.sparse, BM25Retriever)
    assert fusion.dense.passages == HAND
    hits = fusion.search(["drummer of the band Rush", "capital of France"], 3)
    assert [h[0].passage.id for h in hits] == ["a", "c"]
    assert all(len(h) == 3 for h in hits) and [h.rank for h in hits[0]] == [1, 2, 3]
    dense_ids = [h.passage.id for h in fusion.dense.search(["drummer of the band Rush"], 5)[0]]
    sparse_ids = [h.passage.id for h in fusion.sparse.search(["drummer of the band Rush"], 5)[0]]
    expected = reciprocal_rank_fusion([dense_ids, sparse_ids])[:3]
    assert [(h.passage.id, h.score) for h in hits[0]] == [(d, pytest.approx(s)) for d, s in expected]
    assert fusion.calls == 2 and fusion.dense.calls == 3 and fusion.sparse.calls == 3

    reused = FusionRetriever(corpus=HAND, dense=fusion.dense, sparse=fusion.sparse)
    assert reused.dense is fusion.dense
    again = FusionRetriever(
        corpus=HAND,
        dense=functools.partial(DenseRetriever, embedder=emb, cache_dir=str(tmp_path)),
        sparse=functools.partial(BM25Retriever, cache_dir=str(tmp_path)),
    )
    assert again.from_cache and again.build_seconds == pytest.approx(fusion.build_seconds)


def test_hydra_partial_config_builds_a_retriever(tmp_path):
    from hydra.utils import instantiate

    cfg = OmegaConf.create(
        {
            "_target_": "hoprag.retrieval.DenseRetriever",
            "_partial_": True,
            "index": {"factory": "HNSW32", "ef_search": 64, "nprobe": 32, "use_gpu": "auto"},
            "cache_dir": str(tmp_path),
            "force": False,
            "batch_size": 16,
        }
    )
    retriever = instantiate(cfg, embedder=HashEmbedder())(corpus=HAND)
    assert isinstance(retriever, Retriever)
    assert retriever.search(["capital of France"], 1)[0][0].passage.id == "c"


def test_search_charges_each_query_its_cost_record():
    from hoprag.cost import Cost

    retriever = BM25Retriever(corpus=HAND)
    costs = [Cost(), None, Cost()]
    hits = retriever.search(["drummer of a rock band", "Paris", "rock band"], 2, costs=costs, stage="hop1")
    assert costs[0].passage_ids == {h.passage.id for h in hits[0]} and len(costs[0].passage_ids) == 2
    assert costs[2].passage_ids == {h.passage.id for h in hits[2]}
    assert costs[0].retrieval_calls == costs[2].retrieval_calls == 1 and costs[0].llm_calls == 0
    assert set(costs[0].seconds) == {"hop1"} and costs[0].seconds["hop1"] == costs[2].seconds["hop1"] >= 0
    retriever.search(["Toto"], 1, costs=costs[:1])  # a second call adds to the same record
    assert costs[0].retrieval_calls == 2 and "b" in costs[0].passage_ids
    assert set(costs[0].seconds) == {"hop1", "retrieval"} and retriever.calls == 4
    with pytest.raises(ValueError, match="2 cost records for 1 queries"):
        retriever.search(["Toto"], 1, costs=costs[:2])


def test_search_vectors_charges_cost_records_like_search(corpus):
    from hoprag.cost import Cost

    retriever = DenseRetriever(corpus=corpus, embedder=HashEmbedder())
    vectors = retriever.embedder.encode_queries(["w1 w2 w3", "w4 w5"])
    costs = [Cost(), Cost()]
    hits = retriever.search_vectors(vectors, 3, costs=costs, stage="hop2")
    assert [c.passage_ids for c in costs] == [{h.passage.id for h in q} for q in hits]
    assert all(c.retrieval_calls == 1 and set(c.seconds) == {"hop2"} for c in costs)
    assert retriever.calls == 2
    with pytest.raises(ValueError, match="1 cost records for 2 queries"):
        retriever.search_vectors(vectors, 3, costs=costs[:1])
