"""PruneRAG's and the iterative chain's configs: every knob from Hydra, the ablations as switches."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from hoprag.llm import ScriptedLLM
from hoprag.methods import IterRetGen, PruneRAG
from hoprag.retrieval import Retriever

ABLATIONS = {
    "prunerag_wo_con": (("answer", "decomposition", "entity"), False),
    "prunerag_wo_ans": (("decomposition", "entity"), True),
    "prunerag_wo_ent": (("answer", "decomposition"), True),
    "prunerag_wo_ada": (("decomposition",), False),
}


def build(cfg):
    return instantiate(cfg.method)(llm=ScriptedLLM(), retriever=Retriever([]))


def test_the_default_config_has_the_paper_tree_setting_and_scores_passages_by_token_overlap(compose_cfg):
    """The tree knobs and budgets are the paper's (the small-model overlay is tested in test_prunerag_small)."""
    cfg = compose_cfg("eval", ["+experiment=prunerag", "llm=scripted"])
    method = build(cfg)
    assert isinstance(method, PruneRAG)
    b = method.builder
    assert (b.k, b.max_depth, b.branching, b.threshold, b.strict, b.use_confidence) == (5, 3, 2, 0.95, False, True)
    assert b.actions == ("answer", "decomposition", "entity") and b.all_decom_depth == 0
    assert b.confidence_span == "json_value" and not b.one_by_one
    assert b.generation == {"temperature": 0.0, "max_new_tokens": 4096}
    assert method.aggregator.mode == "single_call_tree" and method.aggregator.all_leaves
    suite = instantiate(cfg.metrics)
    assert suite.passage_match == "token_overlap" and suite.overlap_threshold == 0.75


def test_knobs_are_command_line_overrides(compose_cfg):
    cfg = compose_cfg("eval", [
        "+experiment=prunerag", "method.max_depth=2", "method.builder.threshold=0.9",
        "method.builder.strict_threshold=true", "method.aggregator.mode=recursive", "method.batching=node",
        "method.builder.confidence_span=first_occurrence", "metrics.passage_match=title",
    ])  # fmt: skip
    method = build(cfg)
    assert (method.builder.max_depth, method.builder.threshold, method.builder.strict) == (2, 0.9, True)
    assert method.aggregator.mode == "recursive" and method.builder.one_by_one and method.aggregator.one_by_one
    assert method.aggregator.max_depth == 2  # D is declared once, on the method, and passed to both
    assert instantiate(cfg.metrics).passage_match == "title"


@pytest.mark.parametrize("experiment", sorted(ABLATIONS))
def test_each_ablation_is_a_switch_of_the_same_method(compose_cfg, experiment):
    cfg = compose_cfg("eval", [f"+experiment={experiment}"])
    method = build(cfg)
    actions, confidence = ABLATIONS[experiment]
    assert isinstance(method, PruneRAG)
    assert method.builder.actions == actions and method.builder.use_confidence is confidence
    assert experiment.removeprefix("prunerag_") in cfg.tags


def test_iter_retgen_config(compose_cfg):
    cfg = compose_cfg("eval", ["+experiment=iter_retgen", "method.rounds=4"])
    method = build(cfg)
    assert isinstance(method, IterRetGen) and (method.rounds, method.k) == (4, 5)
    assert instantiate(cfg.metrics).passage_match == "token_overlap"


def test_the_paper_experiment_sets_the_paper_components(compose_cfg):
    cfg = compose_cfg("eval", ["+experiment=prunerag_paper"])
    assert cfg.llm._target_ == "hoprag.llm.VLLMLLM" and cfg.llm.model == "Qwen/Qwen3-8B" and cfg.llm.logprobs
    assert cfg.embedder.model == "BAAI/bge-large-en-v1.5"
    assert cfg.method.builder.generation.max_new_tokens == cfg.method.generation.max_new_tokens == 4096
    assert (cfg.method.builder.k, cfg.method.max_depth, cfg.method.builder.threshold) == (5, 3, 0.95)
