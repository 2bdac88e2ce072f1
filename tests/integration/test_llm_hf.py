"""HFLLM on the real SmolLM2-135M-Instruct (the bundled GGUF, converted once into the cache), fp32, CPU.

The model is loaded once for the module; generations are kept short so the file runs in about a minute
on two cores.
"""

from __future__ import annotations

import time

import pytest
import torch

from hoprag.cost import Cost
from hoprag.data.corpus import make_passage
from hoprag.llm import HFLLM, SamplingParams
from hoprag.llm.gguf import converted_dir, is_converted
from hoprag.llm.hf import DEFAULT_MODEL
from hoprag.llm.hf_loading import load_causal_lm
from hoprag.llm.prompts import ChatPrompt, PassageFormat, PromptTooLongError
from hoprag.utils.bundled import resolve_model_ref

pytestmark = pytest.mark.real

PROMPTS = [
    "What is the capital of France? Answer in one word.",
    "Name three colors.",
    "Passage: The Eiffel Tower was completed in 1889 in Paris.\nQuestion: When was the Eiffel Tower completed?",
    "Say hello.",
    [{"role": "system", "content": "You answer with one word."}, {"role": "user", "content": "Largest planet?"}],
    "Who wrote Hamlet?",
]


@pytest.fixture(scope="module")
def llm():
    threads = torch.get_num_threads()
    model = HFLLM(DEFAULT_MODEL, name="smollm2-135m-instruct", dtype="float32", device="cpu", threads=1,
                  batch_size=4, default={"max_new_tokens": 12})
    model.load()
    yield model
    torch.set_num_threads(threads)


def teacher_forced_logprobs(llm: HFLLM, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.inference_mode():
        logits = llm.hf_model(ids).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    start = len(prompt_ids) - 1
    return [logp[start + k, t].item() for k, t in enumerate(completion_ids)]


def completion_ids(llm: HFLLM, tokens: tuple[str, ...]) -> list[int]:
    """Ids of the generated tokens, re-derived from their texts one by one (each is a single token)."""
    out = []
    for t in tokens:
        ids = llm.tokenizer(t, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1, (t, ids)
        out.append(ids[0])
    return out


def test_batched_greedy_equals_one_at_a_time(llm):
    batched = llm.generate(PROMPTS)  # 2 batches of <= 4, sorted by length
    for prompt, [b] in zip(PROMPTS, batched):
        [[s]] = llm.generate([prompt])
        assert b.text == s.text
        assert b.tokens == s.tokens
        assert b.logprobs == pytest.approx(s.logprobs, abs=1e-4)
        assert (b.prompt_tokens, b.completion_tokens, b.finish_reason) == (
            s.prompt_tokens, s.completion_tokens, s.finish_reason)
    assert batched[0][0].text.strip()  # a real answer


@pytest.mark.parametrize("sampling", [False, True], ids=["greedy", "sampled"])
def test_logprobs_are_raw_and_match_teacher_forcing(llm, sampling):
    params = SamplingParams(max_new_tokens=10, temperature=1.7 if sampling else 0.0, top_p=0.8 if sampling else 1.0,
                            seed=3)
    out = llm.generate(PROMPTS[:3], params)  # batched: left-padded decode after unpadded prefill
    for prompt, [g] in zip(PROMPTS[:3], out):
        ids = completion_ids(llm, g.tokens)
        expected = teacher_forced_logprobs(llm, llm.prompt_ids(prompt), ids)
        # raw model log-probs, not temperature/top-p processed ones
        assert g.logprobs == pytest.approx(expected, abs=1e-3)
        assert all(lp <= 0 for lp in g.logprobs)


def test_stop_strings_cut_text_tokens_and_logprobs(llm):
    prompt = "Count from 1 to 10, one number per line."
    [[full]] = llm.generate([prompt], max_new_tokens=16)
    assert "\n" in full.text
    [[cut]] = llm.generate([prompt], max_new_tokens=16, stop=["\n"])
    assert cut.text == full.text.split("\n")[0]
    assert "".join(cut.tokens) == cut.text
    n = len(cut.tokens)
    assert cut.tokens == full.tokens[:n] and cut.logprobs == pytest.approx(full.logprobs[:n], abs=1e-5)
    assert cut.finish_reason == "stop"
    assert cut.completion_tokens == n + 1  # generation ended on the newline token, which is not reported


def test_n_samples_with_temperature_are_seeded(llm):
    params = SamplingParams(max_new_tokens=8, temperature=1.0, n=3, seed=7)
    [a] = llm.generate([PROMPTS[1]], params)
    [b] = llm.generate([PROMPTS[1]], params)
    [c] = llm.generate([PROMPTS[1]], params, seed=8)
    assert len(a) == 3
    assert len({g.text for g in a}) > 1  # samples differ from one another
    assert [g.text for g in a] == [g.text for g in b]  # same seed, same samples
    assert [g.text for g in a] != [g.text for g in c]
    assert all(g.prompt_tokens == a[0].prompt_tokens for g in a)


def test_chat_template_is_applied(llm):
    rendered = llm.render("hi")
    assert rendered.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert rendered.startswith("<|im_start|>system\n")  # SmolLM2's default system prompt
    custom = llm.render([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert custom == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    raw = HFLLM(DEFAULT_MODEL, device="cpu", chat_template=False)
    assert raw.render("hi") == "hi"
    assert raw.prompt_ids("hi") == llm.tokenizer("hi")["input_ids"]


def test_token_counts_and_finish_reasons(llm):
    [[short]] = llm.generate([PROMPTS[0]], max_new_tokens=3)
    assert short.finish_reason == "length" and short.completion_tokens == 3 == len(short.tokens)
    [[done]] = llm.generate([PROMPTS[0]], max_new_tokens=24)
    assert done.finish_reason == "stop" and done.completion_tokens == len(done.tokens)  # EOS not counted
    assert done.prompt_tokens == len(llm.tokenizer(llm.render(PROMPTS[0]), add_special_tokens=False)["input_ids"])
    assert done.text == llm.tokenizer.decode(completion_ids(llm, done.tokens))


def test_costs_are_charged_through_generate(llm):
    costs = [Cost(), None, Cost()]
    usage_before = llm.usage.completion_tokens
    out = llm.generate(PROMPTS[:3], max_new_tokens=4, costs=costs, stage="answer")
    for cost, [g] in zip((costs[0], costs[2]), (out[0], out[2])):
        assert cost.llm_calls == 1
        assert (cost.prompt_tokens, cost.completion_tokens) == (g.prompt_tokens, g.completion_tokens)
        assert cost.seconds["answer"] > 0
    assert llm.usage.completion_tokens - usage_before == sum(o[0].completion_tokens for o in out)


def test_long_prompts_lose_context_never_instructions(llm):
    """Over the budget, the system message stays whole and the lowest-ranked passage goes; a plain prompt
    over the budget is refused instead of being cut somewhere."""
    passages = [make_passage(f"Doc {i}", "The Eiffel Tower was completed in 1889 in Paris. " * 3) for i in range(4)]
    prompt = ChatPrompt("You answer with one word.", "{passages}\nQuestion: When was it completed?")
    whole = llm.prompt_token_count(prompt(passages=PassageFormat().render(passages)))
    short = HFLLM(DEFAULT_MODEL, device="cpu", max_input_tokens=whole - 5, default={"max_new_tokens": 2})
    cost = Cost()
    [[g]] = short.generate([prompt.with_context("passages", PassageFormat().context(passages))], costs=[cost])
    sent = prompt(passages=PassageFormat().render(passages[:3]))
    assert g.prompt_tokens == llm.prompt_token_count(sent) <= whole - 5
    assert (cost.truncated_prompts, cost.context_units_dropped) == (1, 1)
    assert cost.prompt_tokens_dropped == whole - g.prompt_tokens and cost.prompt_tokens == g.prompt_tokens
    with pytest.raises(PromptTooLongError, match="max_input_tokens"):
        short.generate([prompt(passages=PassageFormat().render(passages))])
    assert short.hf_model is llm.hf_model  # one model per process


def test_second_load_reuses_the_converted_folder(llm):
    folder = converted_dir(resolve_model_ref(DEFAULT_MODEL))
    assert is_converted(folder) and llm.load().source == str(folder)
    stamp = (folder / "config.json").stat().st_mtime_ns
    started = time.perf_counter()
    again = load_causal_lm(DEFAULT_MODEL, dtype="float32", device="cpu", shared=False)
    seconds = time.perf_counter() - started
    assert again.source == str(folder) and (folder / "config.json").stat().st_mtime_ns == stamp
    assert seconds < 15, f"reloading the converted folder took {seconds:.1f} s"  # the GGUF takes ~20 s


def test_padded_batch_prefill_matches_per_prompt_prefill(llm):
    """prefill="batched" (the GPU default: one left-padded forward) gives what the CPU default gives."""
    padded = HFLLM(DEFAULT_MODEL, device="cpu", prefill="batched", batch_size=4, default={"max_new_tokens": 8})
    each = llm.generate(PROMPTS[:4], max_new_tokens=8)
    for [a], [b] in zip(padded.generate(PROMPTS[:4]), each):
        assert a.text == b.text and a.tokens == b.tokens
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-3)
        assert a.completion_tokens == b.completion_tokens
