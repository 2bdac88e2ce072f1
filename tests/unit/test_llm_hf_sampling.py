"""HFLLM's sampling and bookkeeping helpers, without loading a model."""

from __future__ import annotations

import math

import pytest
import torch

from hoprag.llm import HFLLM, SamplingParams
from hoprag.llm.hf_decode import choose, first_prefix

LOGITS = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))


def draws(params: SamplingParams, k: int = 400, seed: int = 0) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return [choose(LOGITS, params, [gen]).item() for _ in range(k)]


def test_greedy_is_argmax():
    assert choose(LOGITS, SamplingParams(), [None]).tolist() == [0]


def test_top_p_keeps_the_smallest_set_reaching_p():
    assert set(draws(SamplingParams(temperature=1.0, top_p=0.5))) == {0}
    assert set(draws(SamplingParams(temperature=1.0, top_p=0.7))) == {0, 1}
    assert set(draws(SamplingParams(temperature=1.0, top_p=1.0))) == {0, 1, 2}


def test_temperature_flattens_and_seed_reproduces():
    cold = draws(SamplingParams(temperature=0.2, top_p=1.0))
    hot = draws(SamplingParams(temperature=5.0, top_p=1.0))
    assert cold.count(0) > hot.count(0)
    assert draws(SamplingParams(temperature=1.0), seed=3) == draws(SamplingParams(temperature=1.0), seed=3)
    share = draws(SamplingParams(temperature=1.0), k=2000).count(0) / 2000
    assert math.isclose(share, 0.6, abs_tol=0.05)


def test_per_row_generators_draw_independently_of_the_other_rows():
    """A row's draws depend only on its own generator: alone or beside another row, the same tokens."""
    params = SamplingParams(temperature=1.0)
    two = LOGITS.repeat(2, 1)

    def row_draws(with_other: bool) -> list[int]:
        mine, other = torch.Generator().manual_seed(7), torch.Generator().manual_seed(99)
        if with_other:
            return [choose(two, params, [other, mine])[1].item() for _ in range(50)]
        return [choose(LOGITS, params, [mine]).item() for _ in range(50)]

    assert row_draws(True) == row_draws(False)


def test_first_finds_the_smallest_prefix():
    assert first_prefix(10, lambda k: k >= 4) == 4
    assert first_prefix(10, lambda k: True) == 1
    assert first_prefix(10, lambda k: False) == 10


def test_constructor_validates_and_loads_nothing():
    llm = HFLLM("some/model", default={"max_new_tokens": 5})
    assert llm._loaded is None and llm.default.max_new_tokens == 5 and llm.name == "model"
    with pytest.raises(ValueError, match="dtype"):
        HFLLM("m", dtype="float8")
    with pytest.raises(ValueError, match="prefill"):
        HFLLM("m", prefill="sometimes")
