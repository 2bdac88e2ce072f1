"""`check_config`: nonsensical counts are refused at config time, naming the dotted key (issue 12, item 8)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from hoprag.config import check_config
from hoprag.paths import PROJECT_ROOT

CONF = PROJECT_ROOT / "conf"


def names(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def experiment_root(name: str) -> str:
    """Experiments that add a `/model` train; the others evaluate a method."""
    return "train" if "/model:" in (CONF / "experiment" / f"{name}.yaml").read_text() else "eval"


SHIPPED = [
    *[("eval", [f"+method={m}"]) for m in names("method")],
    *[("train", [f"+model={m}"]) for m in names("model")],
    *[(experiment_root(e), [f"+experiment={e}"]) for e in names("experiment")],
    ("eval_retrieval", []),
    ("build_index", ["retriever=rrf"]),
]


@pytest.mark.parametrize(("root", "overrides"), SHIPPED, ids=[" ".join([r, *o]) for r, o in SHIPPED])
def test_every_shipped_config_passes(compose_cfg, root, overrides):
    check_config(compose_cfg(root, overrides))


@pytest.mark.parametrize(
    ("root", "overrides", "message"),
    [
        ("eval", ["+method=standard_rag", "method.k=0"], "method.k=0 must be an integer >= 1"),
        ("eval", ["+method=standard_rag", "batch_size=0"], "batch_size=0 must be an integer >= 1"),
        ("eval", ["+method=standard_rag", "limit=-1"], "limit=-1 must be an integer >= 1 or null"),
        ("eval", ["+method=standard_rag", "limit=0"], "limit=0 must be an integer >= 1 or null"),
        ("eval", ["+method=standard_rag", "method.generation.max_new_tokens=0"], "method.generation.max_new_tokens=0"),
        ("eval", ["+method=standard_rag", "metrics.ks=[5,0]"], r"metrics.ks\[1\]=0"),
        ("eval", ["+method=standard_rag", "llm.default.n=0"], "llm.default.n=0"),
        ("eval", ["+method=standard_rag", "embedder.batch_size=-4"], "embedder.batch_size=-4"),
        ("eval", ["+method=topk_rag", "method.selector.k=0"], "method.selector.k=0"),
        ("eval", ["+method=treehop", "method.top_k=0"], "method.top_k=0"),
        ("eval", ["+method=prunerag", "method.max_depth=0"], "method.max_depth=0"),
        ("eval", ["+method=prunerag", "method.builder.branching=0"], "method.builder.branching=0"),
        ("eval", ["+method=sc_rag_search", "method.search.simulations=0"], "method.search.simulations=0"),
        ("eval", ["+method=sc_rag_search", "method.search.augment_search_k=0"], "method.search.augment_search_k=0"),
        ("eval", ["+method=sc_rag_search", "method.search.augment_add_k=-1"], "method.search.augment_add_k=-1"),
        ("eval", ["+method=sc_rag_search", "method.search.max_depth=0"], "method.search.max_depth=0"),
        ("eval", ["+method=sc_rag_search", "method.search.branching=0"], "method.search.branching=0"),
        ("eval", ["+method=prunerag", "method.builder.max_nodes=0"], "method.builder.max_nodes=0 must be an integer"),
        ("eval", ["+method=treerare", "method.search.max_nodes=0"], "method.search.max_nodes=0"),
        ("eval", ["+method=sc_rag_search", "method.search.max_llm_calls=1"], "method.search.max_llm_calls=1"),
        ("eval_retrieval", ["ks=[0,5]"], r"ks\[0\]=0"),
        ("train", ["+model=treehop", "model.datamodule.batch_size=0"], "model.datamodule.batch_size=0"),
    ],
)
def test_nonsensical_number_names_the_key(compose_cfg, root, overrides, message):
    with pytest.raises(ValueError, match=f"invalid config: .*{message}"):
        check_config(compose_cfg(root, overrides))


def test_limit_null_is_allowed_and_interpolations_are_checked_resolved(compose_cfg):
    check_config(compose_cfg("eval", ["+method=standard_rag", "limit=null"]))
    # retriever.batch_size is ${embedder.batch_size}: the retriever gets the bad value too, and says so
    with pytest.raises(ValueError, match="embedder.batch_size=0.*retriever.batch_size=0"):
        check_config(compose_cfg("eval", ["+method=standard_rag", "embedder.batch_size=0"]))


@pytest.mark.parametrize("value", [2.5, True, None, "5"])
def test_counts_must_be_integers(compose_cfg, value):
    cfg = compose_cfg("eval", ["+method=standard_rag"])
    cfg.method.k = value
    with pytest.raises(ValueError, match=f"method.k={value!r} must be an integer >= 1 "):
        check_config(cfg)


def test_every_problem_is_reported_at_once(compose_cfg):
    cfg = compose_cfg("eval", ["+method=standard_rag", "method.k=0", "batch_size=0"])
    with pytest.raises(ValueError, match="batch_size=0 .*; method.k=0 "):
        check_config(cfg)


def test_exempt_keys_and_unruled_keys_are_left_alone(compose_cfg):
    cfg = compose_cfg("train", ["+model=treehop", "callbacks.model_checkpoint.save_top_k=-1"])
    check_config(cfg)  # Lightning: -1 keeps every checkpoint
    cfg = compose_cfg("eval", ["+method=prunerag", "method.builder.all_decom_depth=0", "+method.seed=-1"])
    check_config(cfg)
    check_config(OmegaConf.create({"rrf_k": 0, "steps": -1}))


def test_a_served_llms_declared_capabilities_are_not_counts(compose_cfg):
    declared = ["llm=openai", "llm.probe=false", "llm.capabilities={logprobs:true,n:true,prefill:false}"]
    check_config(compose_cfg("eval", ["+method=standard_rag", *declared]))


def test_only_ruled_keys_are_resolved():
    """`paths.output_dir` is `${hydra:runtime.output_dir}`, which only resolves inside a Hydra run."""
    cfg = OmegaConf.create({"out": "${hydra:runtime.output_dir}", "sub": {"k": 0}, "hydra": {"n": 0}})
    with pytest.raises(ValueError, match=r"invalid config: sub.k=0 must be an integer >= 1 \(passages"):
        check_config(cfg)
