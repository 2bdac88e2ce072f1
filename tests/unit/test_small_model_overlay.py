"""The small-model overlay (conf/aids/, issue 42 item 1): a method config holds its paper's settings, and every aid
for a small LLM lives in one named overlay, applied by name (`aids=small_model`), by default only with a bundled
LLM (`aids=auto`), never with `aids=none`; a run records which it applied (metrics.json `run.aids`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from hydra.utils import get_class
from omegaconf import OmegaConf

from hoprag.config import apply_aids
from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT

CONF = PROJECT_ROOT / "conf"
METHODS = sorted(p.stem for p in (CONF / "method").glob("*.yaml"))
OVERLAY = yaml.safe_load((CONF / "aids" / "small_model.yaml").read_text(encoding="utf-8"))["methods"]


def dotted(tree: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in tree.items():
        keys += dotted(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return keys


def test_the_overlay_names_real_methods_and_only_keys_their_configs_have(compose_cfg):
    """An aid for a method that does not exist, or for a key its config lacks, would be silently added."""
    assert set(OVERLAY) <= set(METHODS)
    for name, block in OVERLAY.items():
        cfg = compose_cfg("eval", [f"+method={name}", "aids=none"])
        assert get_class(cfg.method._target_).name == name
        for key in dotted(block):
            assert OmegaConf.select(cfg.method, key, default="<absent>") != "<absent>", f"{name}: method.{key}"


@pytest.mark.parametrize("name", sorted(OVERLAY))
def test_a_method_config_is_its_papers_and_the_overlay_changes_every_aid(compose_cfg, name):
    paper = compose_cfg("eval", [f"+method={name}", "aids=none"])
    aided = compose_cfg("eval", [f"+method={name}", "aids=small_model"])
    assert (apply_aids(paper), apply_aids(aided)) == ("none", "small_model")
    for key in dotted(OVERLAY[name]):
        before, after = OmegaConf.select(paper.method, key), OmegaConf.select(aided.method, key)
        assert after == OmegaConf.select(OmegaConf.create(OVERLAY[name]), key) and before != after, key
        if key.endswith("max_new_tokens"):
            assert before > after  # an aid shortens a budget, never lengthens it


def test_no_aid_is_on_in_a_method_config(compose_cfg):
    prunerag = compose_cfg("eval", ["+method=prunerag", "aids=none"]).method
    b = prunerag.builder
    assert (b.decision_prefix, b.free_text_fallback, b.lenient_json, b.min_children) == (None, False, False, None)
    assert prunerag.aggregator.answer_prefix is None and b.generation.max_new_tokens == 4096  # prunerag.md §4
    assert compose_cfg("eval", ["+method=treerare", "aids=none"]).method.search.qg_prefix is None
    assert compose_cfg("eval", ["+method=react", "aids=none"]).method.generation.max_new_tokens == 8192


@pytest.mark.parametrize(
    ("overrides", "applied", "tokens"),
    [
        ([], "small_model", 128),  # auto, with the bundled SmolLM2
        (["aids=none"], "none", 8192),
        (["llm=vllm"], "none", 8192),  # auto, with any other LLM
        (["llm=vllm", "aids=small_model"], "small_model", 128),  # by name, with any LLM
        (["+experiment=prunerag_faithful"], "none", None),  # a faithful preset turns it off
    ],
)
def test_auto_applies_the_overlay_only_with_a_bundled_llm(compose_cfg, overrides, applied, tokens):
    cfg = compose_cfg("eval", ["+method=react", *overrides] if "+experiment" not in str(overrides) else overrides)
    assert apply_aids(cfg) == applied and apply_aids(cfg) == applied  # once: a second call changes nothing
    if tokens is not None:
        assert cfg.method.generation.max_new_tokens == tokens


def test_a_run_records_the_overlay_it_applied(tmp_path):
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")), "HF_HUB_OFFLINE": "1"}
    for aids in ("small_model", "none"):
        run_dir = tmp_path / aids
        command = [sys.executable, "eval.py", "+method=no_retrieval", "llm=scripted", "limit=1", f"aids={aids}",
                   "~logger", "show=0", f"hydra.run.dir={run_dir}"]  # fmt: skip
        done = subprocess.run(command, check=True, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
        metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
        assert metrics["run"]["aids"] == aids
        assert ("with the small_model overlay's aids" in done.stdout) == (aids == "small_model")  # said at the end
        config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text(encoding="utf-8"))
        assert config["method"]["generation"]["max_new_tokens"] == (32 if aids == "small_model" else 4096)
