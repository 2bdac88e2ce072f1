"""Every preset that says "paper" holds the paper's numbers: each key setting is checked against the implementer
digests (shared/spec/*.md, the section cited on each line), and each PruneRAG ablation differs from the full
faithful row in its ablated switch only."""

from __future__ import annotations

from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hoprag.data.types import Passage
from hoprag.llm import ScriptedLLM
from hoprag.retrieval import FlagEmbedder, Retriever
from hoprag.search.prunerag.parsing import ACTIONS

ABLATED = {  # spec/prunerag.md §2.6, Table 2: the switches each ablation turns
    "prunerag_wo_con": {"method.builder.use_confidence": False},
    "prunerag_wo_ans": {"method.builder.actions": ["decomposition", "entity"]},
    "prunerag_wo_ent": {"method.builder.actions": ["answer", "decomposition"]},
    "prunerag_wo_ada": {"method.builder.actions": ["decomposition"], "method.builder.use_confidence": False},
}


def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def method(cfg):
    return instantiate(cfg.method)(llm=ScriptedLLM(), retriever=Retriever([]))


def assert_faithful_prunerag(cfg) -> None:
    b = method(cfg).builder
    assert (b.k, b.max_depth, b.branching) == (5, 3, 2)  # prunerag.md §4: top-5, D = 3, two children
    assert b.threshold == 0.95 and not b.strict  # §4 τ_A = 0.95; §7 item 4: `>=` (Algorithm 1)
    assert b.all_decom_depth == 0  # §4 (code): no forced decomposition
    assert b.confidence_span == "json_value" and b.confidence_mean  # §7 item 5; eq. 4 is a mean
    assert b.retry_actions == b.actions  # §7 item 2: the retry offers every action (the code)
    assert b.generation["temperature"] == 0.0 and cfg.method.generation.temperature == 0.0  # §4: greedy
    assert (b.prefix, b.free_text_fallback, b.lenient, b.min_children) == ("", False, False, None)  # §2.4: no aids
    aggregator = cfg.method.aggregator
    assert aggregator.answer_prefix is None and cfg.method.builder.decision_examples == "inline"  # §9.3: one message
    assert aggregator.mode == "single_call_tree" and not aggregator.show_internal_context  # §7 items 1, 8


def test_prunerag_faithful_is_the_digests_procedure(compose_cfg):
    cfg = compose_cfg("eval", ["+experiment=prunerag_faithful"])
    assert_faithful_prunerag(cfg)
    assert method(cfg).builder.actions == ACTIONS and method(cfg).builder.use_confidence  # §2.3: all three actions


def test_prunerag_paper_adds_the_papers_llm_and_retriever(compose_cfg):
    cfg = compose_cfg("eval", ["+experiment=prunerag_paper"])
    assert_faithful_prunerag(cfg)
    assert cfg.llm._target_ == "hoprag.llm.VLLMLLM" and cfg.llm.model == "Qwen/Qwen3-8B"  # §4: vLLM, Qwen3-8B
    assert cfg.llm.max_model_len == 40960 and cfg.llm.logprobs  # §9.5: max_model_len; log-probs for eq. 4
    assert cfg.method.builder.generation.max_new_tokens == cfg.method.generation.max_new_tokens == 4096  # §4
    assert cfg.embedder.model == "BAAI/bge-large-en-v1.5" and cfg.embedder.pooling_method == "cls"  # §4; §7 item 13


def test_the_default_prunerag_retries_with_every_action(compose_cfg):
    """prunerag.md §7 item 2 recommends the code's retry (all actions) over the paper-literal one."""
    b = method(compose_cfg("eval", ["+method=prunerag", "llm=scripted"])).builder
    assert b.retry_actions == b.actions == ACTIONS


@pytest.mark.parametrize("experiment", sorted(ABLATED))
def test_each_ablation_differs_from_the_faithful_row_in_its_switch_only(compose_cfg, experiment):
    full = flat(OmegaConf.to_container(compose_cfg("eval", ["+experiment=prunerag_faithful"])))
    cfg = compose_cfg("eval", [f"+experiment={experiment}"])
    ablation = flat(OmegaConf.to_container(cfg))
    changed = {k: ablation.get(k) for k in full.keys() | ablation.keys() if full.get(k) != ablation.get(k)}
    assert changed == {**ABLATED[experiment], "tags": ["eval", "prunerag", "ablation", experiment[9:]]}
    b = method(cfg).builder
    assert b.threshold == 0.95  # prunerag.md §7 item 14: τ = 0.95 for every ablation
    assert b.retry_actions == b.actions  # a retry never offers an ablated action


def test_treehop_2wiki_bge_m3_trains_as_the_paper(compose_cfg):
    cfg = compose_cfg("train", ["+experiment=treehop_2wiki_bge_m3"])
    emb = cfg.embedder
    assert emb.model == "BAAI/bge-m3" and emb.normalize and emb.pooling_method == "cls"  # treehop.md §4, A8
    assert emb.passage_template == "Title: {title}\nContext: {text}"  # §4: App. C template (2Wiki, MuSiQue)
    assert emb.query_prefix == "" and emb.use_fp16 is False  # §4: the raw question; BGEM3FlagModel(use_fp16=False)
    module, data = cfg.model.module, cfg.model.datamodule
    assert data.batch_size == 64  # §6.4: 64 trees per step
    assert not module.in_batch_negatives and data.n_negatives == 5  # §6.1, §6.4: 5 paired negatives only
    assert data.corpus_negatives == data.mined_negatives == 0  # §6.4: negatives from the question's own ctxs
    assert (module.lr, module.weight_decay, module.temperature) == (6e-5, 2e-8, 0.15)  # §6.4
    assert module.output_dropout == 0.1 and module.model.gate_dropout == 0.0  # §6.4
    assert cfg.trainer.precision == 32 and cfg.trainer.max_epochs == 20  # §12.1 / §14: fp32; §6.4: 20 epochs
    net = instantiate(module.model)(dim=1024)  # BGE-M3's width
    assert sum(p.numel() for p in net.parameters()) == 25_192_448  # §15 item 3
    assert data.train.questions == "2wikimultihopqa/train.json"  # §5.1: the full 2Wiki train split


def test_treehop_paper_has_the_papers_optimisation_settings(compose_cfg):
    cfg = compose_cfg("train", ["+experiment=treehop_paper"])
    module, data = cfg.model.module, cfg.model.datamodule
    assert (module.lr, module.weight_decay, module.temperature, module.output_dropout) == (6e-5, 2e-8, 0.15, 0.1)
    assert not module.in_batch_negatives and (data.batch_size, data.n_negatives) == (64, 5)  # treehop.md §6.4
    assert data.corpus_negatives == data.mined_negatives == 0 and cfg.trainer.precision == 32


def test_the_small_data_treehop_is_a_named_variant_not_the_default(compose_cfg):
    """`+model=treehop_small_data` keeps the levers that work on the bundled sample (docs/results/treehop.md);
    `+model=treehop` is the paper's (tests/unit/test_treehop_configs.py checks every setting)."""
    cfg = compose_cfg("train", ["+model=treehop_small_data"])
    assert cfg.model.module.in_batch_negatives and cfg.model.module.lr == 3e-4 and cfg.model.datamodule.batch_size == 16
    paper = compose_cfg("train", ["+model=treehop"]).model.module
    assert not paper.in_batch_negatives and paper.lr == 6e-5 and paper.model.correction_init == 1.0  # treehop.md §6.4


def test_sc_rag_paper_is_the_papers_setting(compose_cfg):
    cfg = compose_cfg("eval", ["+experiment=sc_rag_paper"])
    m = cfg.method
    corpus = [Passage("p1", "Paris", "Paris is the capital of France."), Passage("p2", "Lyon", "Lyon is a city.")]
    built = instantiate(m)(llm=ScriptedLLM(), retriever=Retriever(corpus))
    search = built.search.config
    # self_correcting_rag.md §7 (Table 10), §5.3, §5.5
    assert (search.simulations, search.branching, search.max_depth, search.c) == (24, 3, 3, 1.4)
    assert search.selection == "uct" and (search.temperature, search.top_p, search.max_new_tokens) == (0.7, 0.9, 256)
    assert search.augment and search.augment_rollout  # §5.5: a new augment child is rolled out at once
    assert (search.augment_search_k, search.augment_add_k) == (10, 3)  # §7: dense top 10, <= 3 new passages
    assert list(m.reward.weights) == [1.0, -0.2, -2.0] and m.reward.aggregation == "eq2"  # §5.2
    ev = m.evidence  # §5.2 evidence extraction: 3 per passage, K = 8, 0.6·TF-IDF + 0.4·dense
    assert (ev.per_passage, ev.total, ev.tfidf_weight, ev.dense_weight) == (3, 8, 0.6, 0.4)
    sel = m.selector  # §7 (Table 9)
    assert m.token_counter.mode == "tokenizer"  # the generator's tokens of each passage as prompted
    assert (sel.token_budget, sel.redundancy_budget, sel.alpha, sel.beta) == (1500, 120, 0.7, 0.3)
    assert (sel.sim_threshold, sel.redundancy_scale, sel.max_per_group, sel.solver) == (0.82, 100.0, 1, "pareto_dp")
    fe = m.front_end  # §3 (the code's recipe)
    assert (fe.pool_size, fe.dense_depth, fe.rrf_k, fe.centroid_topn, fe.centroid_weight) == (50, 200, 60, 5, 0.3)
    assert fe.sparse == "tfidf" and list(fe.tfidf.ngram_range) == [1, 2] and fe.tfidf.max_features == 200_000
    assert m.verifier.model == "FacebookAI/roberta-large-mnli" and m.verifier.max_length == 512  # §5.2
    assert cfg.llm.model == "Qwen/Qwen2.5-7B-Instruct" and cfg.llm.dtype == "bfloat16"  # §7: bf16
    assert cfg.llm._target_ == "hoprag.llm.VLLMLLM"  # §5.5: vLLM with n = k samples per prompt
    assert "Example:" not in m.prompt.system and 'Never answer "unknown"' in m.prompt.system  # §6.1 (Fig. 6)
    assert m.answer_prefix is None
    emb = instantiate(cfg.embedder)  # §2, §7: bge-small-en-v1.5, normalised (CLS: the model's pooling)
    assert isinstance(emb, FlagEmbedder) and emb.model == "BAAI/bge-small-en-v1.5"
    assert emb.normalize and emb.pooling_method == "cls" and emb.query_prefix == "" and not emb.use_fp16
