"""Assistant prefill: a chat prompt ending with an assistant message is continued, by every backend, and
the returned text is the continuation only."""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from hoprag.llm import HFLLM, OpenAICompatLLM, SamplingParams, ScriptedLLM
from hoprag.llm import vllm as vllm_backend
from hoprag.llm.base import chat_template_flags, continues_reply
from hoprag.llm.hf import DEFAULT_MODEL
from hoprag.llm.hf_loading import LoadedModel

USER = {"role": "user", "content": "Capital of France? Reply in JSON."}
PREFILL = [USER, {"role": "assistant", "content": '{"answer": "'}]


def test_only_a_final_assistant_message_is_a_prefill():
    assert continues_reply(PREFILL)
    assert not continues_reply([USER]) and not continues_reply("plain") and not continues_reply([])
    assert not continues_reply([PREFILL[1], USER])
    assert chat_template_flags([USER]) == {"add_generation_prompt": True}
    assert chat_template_flags(PREFILL) == {"add_generation_prompt": False, "continue_final_message": True}


def test_openai_chat_request_asks_the_server_to_continue():
    vllm_like = {"probe": False, "capabilities": {"logprobs": True, "n": True, "prefill": True}}  # no probe
    llm = OpenAICompatLLM("m", **vllm_like)
    url, body = llm.request(PREFILL, SamplingParams())
    assert url.endswith("/chat/completions")
    assert body["messages"][-1] == PREFILL[1]
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    _, plain = llm.request([USER], SamplingParams())
    assert "continue_final_message" not in plain and "add_generation_prompt" not in plain
    _, override = OpenAICompatLLM("m", extra_body={"add_generation_prompt": True}, **vllm_like).request(
        PREFILL, SamplingParams()
    )
    assert override["add_generation_prompt"] is True  # extra_body still has the last word


class RecordingTokenizer:
    def __init__(self) -> None:
        self.kwargs: list[dict[str, Any]] = []

    def apply_chat_template(self, messages, tokenize=False, **kwargs):
        self.kwargs.append(kwargs)
        text = "".join(f"<{m['role']}>{m['content']}" for m in messages)
        return text + ("<assistant>" if kwargs.get("add_generation_prompt") else "")

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [ord(c) for c in text]}


def test_vllm_renders_a_prefill_open(monkeypatch):
    tokenizer = RecordingTokenizer()
    engine = types.SimpleNamespace(get_tokenizer=lambda: tokenizer)
    module = types.ModuleType("vllm")
    module.LLM = lambda **kwargs: engine
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(vllm_backend, "_ENGINES", {})
    llm = vllm_backend.VLLMLLM(model="m")
    ids = llm.engine_prompt(PREFILL)["prompt_token_ids"]
    assert "".join(map(chr, ids)).endswith('<assistant>{"answer": "')
    assert tokenizer.kwargs[-1] == {"add_generation_prompt": False, "continue_final_message": True}
    llm.engine_prompt([USER])
    assert tokenizer.kwargs[-1] == {"add_generation_prompt": True}


def test_scripted_sees_the_prefill_and_replies_the_continuation():
    llm = ScriptedLLM(rules=[(r'assistant: \{"answer": "$', 'Paris"}', -0.1)], default_reply="no")
    out = llm.generate([PREFILL, [USER]])
    assert [o[0].text for o in out] == ['Paris"}', "no"]


@pytest.fixture(scope="module")
def smollm_tokenizer():
    """The default model's real tokenizer and chat template, without loading its weights."""
    from transformers import AutoTokenizer

    from hoprag.llm.gguf import converted_gguf
    from hoprag.utils.bundled import resolve_model_ref

    return AutoTokenizer.from_pretrained(str(converted_gguf(resolve_model_ref(DEFAULT_MODEL))))


def test_hf_leaves_the_prefill_open_in_the_chat_template(smollm_tokenizer):
    llm = HFLLM()
    llm._loaded = LoadedModel(None, smollm_tokenizer, "tokenizer only", "cpu", 0.0)
    opened, continued = llm.render([USER]), llm.render(PREFILL)
    assert opened.endswith("<|im_start|>assistant\n")
    assert continued == opened + '{"answer": "'  # no end-of-turn token after the prefix
    ids = llm.prompt_ids(PREFILL)
    assert smollm_tokenizer.decode(ids).endswith('assistant\n{"answer": "')


@pytest.mark.real
def test_hf_continuation_is_the_rest_of_the_greedy_reply():
    """Greedy decoding with the first tokens of the model's own reply prefilled gives the rest of it."""
    llm = HFLLM(threads=1)
    [[full]] = llm.generate([[USER]], max_new_tokens=12)
    head = "".join(full.tokens[:4])
    [[rest]] = llm.generate([[USER, {"role": "assistant", "content": head}]], max_new_tokens=8)
    assert not rest.text.startswith(head)
    assert head + rest.text == "".join(full.tokens[:12])[: len(head) + len(rest.text)]
    assert rest.completion_tokens == 8 and rest.logprobs is not None
