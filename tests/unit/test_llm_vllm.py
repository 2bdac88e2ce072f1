"""VLLMLLM's parameter mapping and output conversion, against a fake `vllm` module (vLLM needs a GPU)."""

from __future__ import annotations

import json
import sys
import types
from typing import Any

import pytest

from hoprag.cost import Cost
from hoprag.llm import vllm as vllm_backend
from hoprag.llm.vllm import VLLMLLM
from tests.standins.vllm import CompletionOutput, Logprob, RequestOutput, SamplingParams
from tests.standins.vllm.lora.request import LoRARequest


class FakeTokenizer:
    """Characters are tokens (id = ord); the chat template is a visible, checkable format."""

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        assert tokenize is False
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": ([0] if add_special_tokens else []) + [ord(c) for c in text]}

    def decode(self, ids):
        return "".join(chr(i) for i in ids)


class FakeEngine:
    instances: list[FakeEngine] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.calls: list[tuple[list, SamplingParams]] = []
        FakeEngine.instances.append(self)

    def get_tokenizer(self) -> FakeTokenizer:
        return FakeTokenizer()

    def generate(self, inputs, sampling_params, use_tqdm=True):
        assert use_tqdm is False
        limit = self.kwargs.get("max_logprobs", 20)  # vLLM's check of every request against its engine's limit
        if sampling_params.logprobs is not None and limit != -1 and sampling_params.logprobs > limit:
            asked = sampling_params.logprobs
            raise ValueError(f"Requested sample logprobs of {asked}, which is greater than max allowed: {limit}")
        self.calls.append((inputs, sampling_params))
        outputs = []
        for inp in inputs:
            ids = inp.get("prompt_token_ids") or [ord(c) for c in inp["prompt"]]
            completions = []
            for i in range(sampling_params.n):
                text = f"ans{i}\nmore"  # as if the server did not cut at the stop string
                token_ids = [ord(c) for c in text] + [2]  # then EOS
                lps = None
                if sampling_params.logprobs is not None:
                    lps = [{t: Logprob(-0.1 * (k + 1), decoded_token=None if t == 2 else chr(t))}
                           for k, t in enumerate(token_ids)]
                completions.append(CompletionOutput(i, text, token_ids, None, lps, "stop"))
            outputs.append(RequestOutput("0", None, prompt_token_ids=ids, outputs=list(reversed(completions))))
        return outputs


@pytest.fixture
def fake_vllm(monkeypatch):
    module = types.ModuleType("vllm")
    module.LLM = FakeEngine
    module.SamplingParams = SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(vllm_backend, "_ENGINES", {})
    FakeEngine.instances.clear()
    return module


def test_missing_vllm_gives_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    with pytest.raises(ImportError, match=r"make GPU=1 install, or pip install -c constraints-gpu.txt"):
        VLLMLLM(model="Qwen/Qwen2.5-7B-Instruct")


def test_engine_starts_lazily_once_with_the_engine_args(fake_vllm):
    a = VLLMLLM(model="some/model", dtype="bfloat16", max_model_len=4096, engine_kwargs={"enforce_eager": True})
    assert FakeEngine.instances == []  # nothing started by the constructor
    b = VLLMLLM(model="some/model", dtype="bfloat16", max_model_len=4096, engine_kwargs={"enforce_eager": True})
    a.generate(["q"]), b.generate(["q"])
    assert len(FakeEngine.instances) == 1
    kw = FakeEngine.instances[0].kwargs
    assert kw["model"] == "some/model" and kw["dtype"] == "bfloat16" and kw["max_model_len"] == 4096
    assert kw["enforce_eager"] is True and kw["tensor_parallel_size"] == 1


def test_sampling_params_mapping(fake_vllm):
    llm = VLLMLLM(model="m")
    sp = llm.sampling_params(llm.default.__class__(max_new_tokens=7, temperature=0.8, top_p=0.9, n=3,
                                                   stop=("\n",), seed=5))
    assert (sp.n, sp.temperature, sp.top_p, sp.max_tokens, sp.stop, sp.seed, sp.logprobs) == (
        3, 0.8, 0.9, 7, ["\n"], 5, 0)
    greedy = llm.sampling_params(llm.default)
    assert greedy.temperature == 0.0 and not greedy.stop and greedy.n == 1
    assert VLLMLLM(model="m", logprobs=False).sampling_params(llm.default).logprobs is None


def test_prompts_use_the_chat_template_as_token_ids(fake_vllm):
    llm = VLLMLLM(model="m")
    llm.generate(["hi", [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]])
    inputs, _ = FakeEngine.instances[0].calls[0]
    as_text = ["".join(chr(i) for i in inp["prompt_token_ids"]) for inp in inputs]
    assert as_text == ["<user>hi<assistant>", "<system>s<user>u<assistant>"]  # no BOS (id 0) added
    raw = VLLMLLM(model="m", chat_template=False)
    raw.generate(["plain"])
    assert FakeEngine.instances[0].calls[-1][0] == [{"prompt": "plain"}]


def test_output_conversion_cuts_at_stop_and_keeps_choice_order(fake_vllm):
    llm = VLLMLLM(model="m")
    costs = [Cost()]
    [gens] = llm.generate(["q"], temperature=1.0, n=2, stop=["\n"], costs=costs)
    assert [g.text for g in gens] == ["ans0", "ans1"]
    g = gens[0]
    assert g.tokens == ("a", "n", "s", "0")
    assert g.logprobs == pytest.approx((-0.1, -0.2, -0.3, -0.4))
    assert g.prompt_tokens == len("<user>q<assistant>")
    assert g.completion_tokens == len("ans0\nmore")  # everything generated but the EOS token
    assert g.finish_reason == "stop"
    assert costs[0].completion_tokens == 2 * g.completion_tokens and costs[0].llm_calls == 1


def test_without_a_stop_the_eos_token_is_not_reported(fake_vllm):
    [[g]] = VLLMLLM(model="m").generate(["q"])
    assert g.text == "ans0\nmore"
    assert "".join(g.tokens) == g.text and len(g.logprobs) == len(g.text)


def test_length_finish_and_missing_logprobs(fake_vllm, monkeypatch):
    def generate(self, inputs, sampling_params, use_tqdm=True):
        return [RequestOutput("0", None, [1, 2], [CompletionOutput(0, "abc", [97, 98, 99], None, None, "length")])]

    monkeypatch.setattr(FakeEngine, "generate", generate)
    [[g]] = VLLMLLM(model="m", logprobs=False).generate(["q"])
    assert (g.text, g.tokens, g.logprobs, g.finish_reason) == ("abc", ("a", "b", "c"), None, "length")
    assert (g.prompt_tokens, g.completion_tokens) == (2, 3)


@pytest.fixture
def lora_requests(fake_vllm, monkeypatch) -> list:
    """`vllm.lora.request.LoRARequest` faked; the engine records each call's `lora_request` (None: the base)."""
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    monkeypatch.setitem(sys.modules, "vllm.lora", types.ModuleType("vllm.lora"))
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    seen: list = []
    plain = FakeEngine.generate

    def generate(self, inputs, sampling_params, use_tqdm=True, lora_request=None):
        seen.append(lora_request)
        return plain(self, inputs, sampling_params, use_tqdm)

    monkeypatch.setattr(FakeEngine, "generate", generate)
    return seen


def write_adapter(folder, rank: int, weights: bytes) -> str:
    folder.mkdir(exist_ok=True)
    (folder / "adapter_config.json").write_text(json.dumps({"r": rank, "lora_alpha": 2 * rank}))
    (folder / "adapter_model.safetensors").write_bytes(weights)
    return str(folder)


def test_an_adapter_is_served_as_a_lora_request_on_a_lora_engine(lora_requests, tmp_path):
    path = write_adapter(tmp_path / "router", rank=32, weights=b"weights")
    tuned = VLLMLLM(model="m", adapter=path)
    tuned.generate(["q"])
    kw = FakeEngine.instances[0].kwargs
    assert kw["enable_lora"] is True and kw["max_lora_rank"] == 32
    [request] = lora_requests
    assert request.lora_path == path and request.lora_name == tuned.adapter_sha and request.lora_int_id > 0
    base = VLLMLLM(model="m")
    base.generate(["q"])
    assert lora_requests[-1] is None and "enable_lora" not in FakeEngine.instances[-1].kwargs
    assert tuned.name == "m+router" and "adapter_sha=" in tuned.identity() and tuned.identity() != base.identity()
    write_adapter(tmp_path / "router", rank=32, weights=b"retrained")  # same path, new weights
    retrained = VLLMLLM(model="m", adapter=path)
    assert retrained.identity() != tuned.identity()
    assert retrained.lora_request.lora_int_id != tuned.lora_request.lora_int_id


def test_candidate_tokens_are_read_from_the_returned_top_logprobs(fake_vllm, monkeypatch):
    monkeypatch.setattr(FakeTokenizer, "convert_tokens_to_ids", lambda self, t: ord(t), raising=False)
    llm = VLLMLLM(model="m", candidate_top_logprobs=5)
    assert llm.sampling_params(llm.default.__class__(candidates=("a",))).logprobs == 5
    [[g]] = llm.generate(["q"], candidates=("a", "n", "z"))
    # the fake server returns only the chosen token's log-prob: "z" is never among them, so never scored
    assert g.candidate_logprobs[:3] == ({"a": pytest.approx(-0.1)}, {"n": pytest.approx(-0.2)}, {})
    assert len(g.candidate_logprobs) == len(g.tokens)


def test_the_engine_starts_with_the_top_logprobs_a_method_needs(fake_vllm, monkeypatch):
    """Self-RAG reads its reflection tokens among the top 5,000 log-probs, as the official code asks vLLM."""
    from hoprag.methods import SelfRAG
    from hoprag.retrieval import Retriever

    monkeypatch.setattr(FakeTokenizer, "convert_tokens_to_ids", lambda self, t: ord(t), raising=False)
    llm = VLLMLLM(model="m")
    SelfRAG(llm, Retriever([]), top_logprobs=5000)
    [[g]] = llm.generate(["q"], candidates=("a",))
    (engine,) = FakeEngine.instances
    assert engine.kwargs["max_logprobs"] == 5000 and engine.calls[0][1].logprobs == 5000
    assert VLLMLLM(model="m").engine_args.get("max_logprobs") is None  # vLLM's default when nothing asks for more


def test_more_top_logprobs_than_the_engine_allows_are_refused_before_any_request(fake_vllm):
    fixed = VLLMLLM(model="m", engine_kwargs={"max_logprobs": 100})
    with pytest.raises(ValueError, match=r"top 5000 log-probs.*engine_kwargs.max_logprobs = 100"):
        fixed.require_top_logprobs(5000)
    running = VLLMLLM(model="m")
    running.generate(["q"])  # the engine starts with vLLM's default limit
    with pytest.raises(ValueError, match=r"top 5000 log-probs.*running engine's max_logprobs = 20"):
        running.require_top_logprobs(5000)
    assert len(FakeEngine.instances) == 1 and len(FakeEngine.instances[0].calls) == 1  # nothing more was asked
    VLLMLLM(model="m", engine_kwargs={"max_logprobs": -1}).require_top_logprobs(5000)  # -1: the whole vocabulary
