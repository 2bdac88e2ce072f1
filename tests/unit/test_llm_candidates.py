"""Candidate-token log-probs (`SamplingParams.candidates`): the interface Self-RAG reads its reflection tokens
with. The HF decoder scores vocabulary tokens, the scripted LLM its own vocabulary, the cache keeps them, and a
backend without them refuses the request."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from types import SimpleNamespace

import pytest

from hoprag.llm import OpenAICompatLLM, SamplingParams, ScriptedLLM
from hoprag.llm.cache import FORMAT, request_key
from hoprag.llm.hf_decode import Decoder

EOS, SPECIAL = 0, 27  # id 27 is an added special token, "[R]"


class Tokenizer:
    eos_token_id, unk_token_id = EOS, None

    def decode(self, ids, skip_special_tokens=True):
        return "".join("[R]" if i == SPECIAL else chr(96 + i) for i in ids if i < SPECIAL or not skip_special_tokens)

    def batch_decode(self, rows):
        return [self.decode(r, skip_special_tokens=False) for r in rows]

    def convert_tokens_to_ids(self, token):
        return SPECIAL if token == "[R]" else ord(token) - 96 if len(token) == 1 else None


def decoder() -> Decoder:
    return Decoder(SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=EOS)), Tokenizer(), prefill_each=True)


def test_hf_decoder_scores_one_token_candidates_and_keeps_special_tokens_when_asked():
    d = decoder()
    assert d.candidate_ids(("[R]", "a", "[Not one token]")) == {"[R]": SPECIAL, "a": 1}
    per_step = [{"[R]": -0.5}, {"[R]": -0.1}, {"[R]": -2.0}]
    g = d.finish([1, SPECIAL, 2, EOS], [-0.3, -0.1, -0.2, -0.4], (), 5, per_step + [{"[R]": -9.0}], True)
    assert g.text == "a[R]b" and g.candidate_logprobs == tuple(per_step)
    assert d.finish([1, SPECIAL, 2], [-0.3] * 3, (), 5).text == "ab"  # special tokens skipped by default


def test_scripted_candidates_are_single_tokens_scored_by_the_test():
    scores = {"[Relevant]": -0.2, "[Irrelevant]": -1.7}
    llm = ScriptedLLM(rules=[("q", "[Relevant]Paris[Fully supported]", -0.5)],
                      candidate_scores=lambda text, token: scores if token == "[Relevant]" else {})
    [[g]] = llm.generate(["q"], candidates=("[Relevant]", "[Irrelevant]", "[Fully supported]"))
    assert g.tokens == ("[Relevant]", "Paris", "[Fully supported]")
    assert g.candidate_logprobs == (scores, {}, {})
    [[plain]] = ScriptedLLM(rules=[("q", "[Relevant]Paris[Fully supported]", -0.5)]).generate(
        ["q"], candidates=("[Fully supported]",))
    assert plain.tokens == ("[Relevant]Paris", "[Fully supported]")  # only candidates are tokens of their own
    assert plain.candidate_logprobs == ({}, {"[Fully supported]": -0.5})  # default: the emitted one only


def test_candidates_are_cached_and_leave_the_keys_of_other_requests_unchanged(tmp_path):
    plain = SamplingParams(max_new_tokens=4)
    before = {"llm": "x", "prompt": "p", "params": {f.name: getattr(plain, f.name) for f in
              dataclasses.fields(plain) if f.name not in ("candidates", "keep_special_tokens")}, "format": FORMAT}
    assert request_key("x", "p", plain) == hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    assert request_key("x", "p", dataclasses.replace(plain, candidates=("a",))) != request_key("x", "p", plain)
    llm = ScriptedLLM(rules=[("q", "a b", -0.5)], generation_cache=str(tmp_path))
    [[fresh]] = llm.generate(["q"], candidates=("a",))
    [[cached]] = llm.generate(["q"], candidates=("a",))
    assert cached == fresh and cached.candidate_logprobs == ({"a": -0.5}, {}) and llm.usage.cache_hits == 1


def test_a_backend_without_candidate_logprobs_refuses_them():
    served = OpenAICompatLLM(model="m", base_url="http://localhost:1/v1", probe=False,
                             capabilities={"logprobs": True, "n": True, "prefill": False})
    assert served.missing_capabilities(["logprobs", "candidate_logprobs"]) == ["candidate_logprobs"]
    assert ScriptedLLM().missing_capabilities(["candidate_logprobs"]) == []
    with pytest.raises(ValueError, match="cannot score candidate tokens"):
        served.generate(["q"], candidates=("[Retrieval]",))
