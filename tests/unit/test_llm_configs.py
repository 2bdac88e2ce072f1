"""conf/llm/{smollm2,hf,openai,vllm}.yaml instantiate their backends without loading weights or reaching a server."""

from __future__ import annotations

import sys
import types

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hoprag.llm import HFLLM, LLM, VLLMLLM, OpenAICompatLLM, SamplingParams
from hoprag.llm.hf import DEFAULT_MODEL
from hoprag.llm.hf_loading import loaded_models
from hoprag.paths import PROJECT_ROOT

CONF = PROJECT_ROOT / "conf" / "llm"
EXPECTED = {"smollm2": HFLLM, "hf": HFLLM, "openai": OpenAICompatLLM, "vllm": VLLMLLM}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_llm_config_instantiates_lazily(name, monkeypatch, tmp_path):
    fake = types.ModuleType("vllm")
    fake.LLM = lambda **kw: pytest.fail("the engine must not start at instantiation")
    fake.SamplingParams = dict
    monkeypatch.setitem(sys.modules, "vllm", fake)
    models_before = loaded_models()
    root = OmegaConf.create({"paths": {"cache_dir": str(tmp_path)}, "llm": OmegaConf.load(CONF / f"{name}.yaml")})
    llm = instantiate(root.llm)
    assert isinstance(llm, EXPECTED[name]) and isinstance(llm, LLM)
    assert llm.default == SamplingParams(max_new_tokens=64)
    assert llm.name
    assert loaded_models() == models_before  # nothing loaded
    assert llm.cache.path.parent == tmp_path / "generations"  # greedy outputs cached under paths.cache_dir


def test_smollm2_config_is_the_offline_fp32_default():
    cfg = OmegaConf.load(CONF / "smollm2.yaml")
    assert cfg.model == DEFAULT_MODEL and cfg.dtype == "float32" and cfg.threads is None
    assert cfg.batch_size == 16 and cfg.name == "smollm2-135m-instruct"
