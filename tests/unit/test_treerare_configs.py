"""TreeRare's configs compose into the method the digest describes, and the offline default runs end to end."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from hoprag.methods import TreeRare, TreeRetrievalMethod
from hoprag.retrieval import EmbeddingReranker, NoReranker
from tests.unit.test_treerare import StubRetriever, scripted


def build(cfg):
    return instantiate(cfg.method)(llm=scripted(), retriever=StubRetriever())


def test_treerare_defaults_to_bm25_a_dependency_tree_and_the_papers_k_and_query_count(compose_cfg):
    cfg = compose_cfg("eval", ["+experiment=treerare"])
    assert cfg.retriever._target_.endswith("BM25Retriever")
    assert cfg.method.tree == "dt" and cfg.method.task == "multihop"
    method = build(cfg)
    assert isinstance(method, TreeRare) and method.search.k == 15 and method.search.max_queries == 3
    assert type(method.search.parser).__name__ == "DependencyParser"
    cfg = compose_cfg("eval", ["+experiment=treerare", "method.tree=ct", "method.task=ambiguous"])
    method = build(cfg)
    assert type(method.search.parser).__name__ == "ConstituencyParser" and method.search.max_queries == 5


@pytest.mark.parametrize(
    ("experiment", "switches"),
    [
        ("treerare_wo_qg", {"query_generation": False, "retrieval": True, "subanswers": True, "use_tree": True}),
        ("treerare_wo_sag", {"query_generation": True, "retrieval": True, "subanswers": False, "use_tree": True}),
        ("treerare_wo_ir", {"query_generation": True, "retrieval": False, "subanswers": True, "use_tree": True}),
        ("treerare_ir_only", {"query_generation": False, "retrieval": True, "subanswers": False, "use_tree": True}),
        ("treerare_qg_only", {"query_generation": True, "retrieval": False, "subanswers": False, "use_tree": True}),
        ("treerare_cot_only", {"use_tree": False}),
    ],
)
def test_every_table_3_ablation_is_a_preset_that_switches_exactly_its_modules(compose_cfg, experiment, switches):
    method = build(compose_cfg("eval", [f"+experiment={experiment}"]))
    for name, value in switches.items():
        assert getattr(method.search, name) == value, name


def test_the_paper_preset_turns_the_small_model_aid_off_and_allows_1024_tokens(compose_cfg):
    method = build(compose_cfg("eval", ["+experiment=treerare_paper"]))
    assert method.search.qg_prefix == "" and method.search.k == 15
    assert method.search.qg_generation["max_new_tokens"] == method.generation["max_new_tokens"] == 1024
    assert method.search.qg_generation["temperature"] == 0.0


def test_tree_retrieval_composes_with_each_reranker(compose_cfg):
    cfg = compose_cfg("eval", ["+experiment=tree_retrieval"])
    assert cfg.retriever._target_.endswith("BM25Retriever") and list(cfg.metrics.ks) == [5, 15]
    method = build(cfg)
    assert isinstance(method, TreeRetrievalMethod) and isinstance(method.search.reranker, EmbeddingReranker)
    assert (method.search.k, method.search.keep, method.generates) == (10, 15, False)
    method = build(compose_cfg("eval", ["+experiment=tree_retrieval", "reranker@method.search.reranker=none"]))
    assert isinstance(method.search.reranker, NoReranker)
    cfg = compose_cfg("eval", ["+experiment=tree_retrieval", "reranker@method.search.reranker=cross_encoder"])
    assert cfg.method.search.reranker.model == "cross-encoder/ms-marco-MiniLM-L-12-v2"
