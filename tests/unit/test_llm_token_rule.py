"""One token rule for every backend (`Generation`'s docstring): `completion_tokens` leaves the
end-of-sequence token out, as llama.cpp's and the OpenAI API's `usage` do."""

from __future__ import annotations

from types import SimpleNamespace

from hoprag.llm import ScriptedLLM
from hoprag.llm.hf_decode import Decoder
from hoprag.llm.vllm import _ended_at_eos

EOS = 0


class CharTokenizer:
    """Token id i > 0 is chr(96 + i) ("a" = 1); id 0 is EOS, a special token."""

    eos_token_id = EOS

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(96 + i) for i in ids if i != EOS or not skip_special_tokens)

    def batch_decode(self, rows):
        return [self.decode(r) for r in rows]


def decoder() -> Decoder:
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=EOS))
    return Decoder(model, CharTokenizer(), prefill_each=True)


def test_hf_decoder_does_not_count_the_eos_token():
    g = decoder().finish([1, 2, 3, EOS], [-0.1, -0.2, -0.3, -0.4], stop=(), prompt_tokens=5)
    assert (g.text, g.completion_tokens, g.finish_reason) == ("abc", 3, "stop")
    assert g.tokens == ("a", "b", "c") and g.logprobs == (-0.1, -0.2, -0.3)


def test_hf_decoder_counts_up_to_the_stop_string_and_every_token_at_length():
    d = decoder()
    stopped = d.finish([1, 2, 3, 4], [-0.1] * 4, stop=("c",), prompt_tokens=5)
    assert (stopped.text, stopped.completion_tokens) == ("ab", 3)
    cut = d.finish([1, 2], [-0.1] * 2, stop=(), prompt_tokens=5)
    assert (cut.completion_tokens, cut.finish_reason) == (2, "length")


def test_vllm_eos_is_left_out_only_when_vllm_stopped_at_it():
    def completion(finish, stop_reason):
        return SimpleNamespace(finish_reason=finish, stop_reason=stop_reason, token_ids=[5, 6, 2])

    assert _ended_at_eos(completion("stop", None)) == 1
    assert _ended_at_eos(completion("stop", "\n")) == 0  # a stop string: its tokens are generated text
    assert _ended_at_eos(completion("length", None)) == 0


def test_scripted_replies_have_no_end_token_to_count():
    [[g]] = ScriptedLLM(rules=[("q", "one two three", -0.5)]).generate(["q"])
    assert g.completion_tokens == 3 == len(g.tokens)
