"""The scripted LLM: rules, samples, stop strings, token limits, counts, delay, call records, costs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from hoprag.cost import Cost
from hoprag.llm import SamplingParams, ScriptedLLM
from hoprag.llm.scripted import render
from hoprag.paths import PROJECT_ROOT


def chat(user: str, system: str = "Be brief.") -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def test_first_matching_rule_answers_else_the_default_reply():
    llm = ScriptedLLM(
        rules=[(r"capital of France", "Paris", -0.1), (r"capital", "Somewhere", -2.0)],
        default_reply="I don't know",
        default_logprob=-3.0,
    )
    out = llm.generate(["What is the capital of France?", "What is the capital of Peru?", "Who are you?"])
    assert [samples[0].text for samples in out] == ["Paris", "Somewhere", "I don't know"]
    assert out[0][0].logprobs == (-0.1,)
    assert out[2][0].logprobs == (-3.0, -3.0, -3.0)
    assert out[1][0].mean_logprob == -2.0


def test_regex_replies_expand_groups_and_callables_see_the_rendered_prompt():
    llm = ScriptedLLM(
        rules=[
            (r"born in (?P<year>\d{4})", r"Answer: \g<year>"),
            (lambda text: text.startswith("system:"), lambda text: f"{len(text.splitlines())} lines"),
        ]
    )
    out = llm.generate(["She was born in 1903 in Paris.", chat("hi")])
    assert out[0][0].text == "Answer: 1903"
    assert out[1][0].text == "2 lines"


def test_chat_prompts_render_as_role_lines_and_count_whitespace_tokens():
    prompt = chat("Question: who?\nAnswer:", system="Answer shortly.")
    assert render(prompt) == "system: Answer shortly.\nuser: Question: who?\nAnswer:"
    (sample,), = ScriptedLLM(default_reply="a b c").generate([prompt])
    assert sample.prompt_tokens == 7
    assert sample.completion_tokens == 3 and sample.tokens == ("a", "b", "c")


def test_n_samples_cycle_through_a_reply_list():
    llm = ScriptedLLM(rules=[("q", ["yes", "no", "maybe"], [-0.5])])
    (samples,) = llm.generate(["q"], n=4, temperature=0.7)
    assert [g.text for g in samples] == ["yes", "no", "maybe", "yes"]
    (greedy,), = llm.generate(["q"])
    assert greedy.text == "yes"


def test_stop_strings_cut_text_and_tokens_like_a_backend():
    llm = ScriptedLLM(default_reply="Paris is big.\nMore text here", default_logprob=[-1, -2, -3, -4, -5, -6])
    (g,), = llm.generate(["q"], stop=["\n"])
    assert g.text == "Paris is big."
    assert g.tokens == ("Paris", "is", "big.") and g.logprobs == (-1.0, -2.0, -3.0)
    assert g.completion_tokens == 3 and g.finish_reason == "stop"
    # a stop inside a token: the text is cut there, the straddling token is kept, generated tokens counted
    (g,), = llm.generate(["q"], stop=["g."])
    assert g.text == "Paris is bi" and g.tokens == ("Paris", "is", "big.") and g.completion_tokens == 3
    # the earliest of several stops wins
    (g,), = llm.generate(["q"], stop=["More", " is"])
    assert g.text == "Paris" and g.tokens == ("Paris",) and g.completion_tokens == 2


def test_max_new_tokens_cuts_and_reports_length():
    llm = ScriptedLLM(default_reply="one  two three four")
    (g,), = llm.generate(["q"], max_new_tokens=2)
    assert g.text == "one  two" and g.tokens == ("one", "two")
    assert g.completion_tokens == 2 and g.finish_reason == "length"
    (g,), = llm.generate(["q"], max_new_tokens=2, stop=["two"])
    assert g.text == "one  " and g.finish_reason == "stop" and g.completion_tokens == 2
    (g,), = llm.generate(["q"], max_new_tokens=4)
    assert g.text == "one  two three four" and g.finish_reason == "stop"


def test_too_few_logprobs_for_a_reply_is_an_error():
    with pytest.raises(ValueError, match="2 log-probs for the 3 tokens"):
        ScriptedLLM(default_reply="a b c", default_logprob=[-1.0, -1.0]).generate(["q"])


def test_calls_are_recorded_with_prompts_and_resolved_params():
    llm = ScriptedLLM(default={"max_new_tokens": 8})
    llm.generate(["a", chat("b")], stop=["\n"])
    llm.generate(["c"])
    assert len(llm.calls) == 2
    first = llm.calls[0]
    assert first.prompts == ["a", chat("b")] and first.texts == ["a", "system: Be brief.\nuser: b"]
    assert first.params == SamplingParams(max_new_tokens=8, stop=("\n",))
    assert llm.calls[1].params.stop == ()
    assert llm.usage.calls == 2 and llm.usage.prompts == 3


def test_delay_sleeps_once_per_batched_call():
    llm = ScriptedLLM(delay=0.2)
    started = time.perf_counter()
    llm.generate(["a", "b", "c", "d"])
    assert 0.2 <= time.perf_counter() - started < 0.6


def test_costs_are_charged_per_prompt():
    llm = ScriptedLLM(rules=[("long", "a b c d")], default_reply="x")
    costs = [Cost(), None, Cost()]
    llm.generate(["long one", "two", "three"], costs=costs, stage="answer")
    assert (costs[0].llm_calls, costs[0].prompt_tokens, costs[0].completion_tokens) == (1, 2, 4)
    assert (costs[2].llm_calls, costs[2].prompt_tokens, costs[2].completion_tokens) == (1, 1, 1)
    assert set(costs[0].seconds) == {"answer"}


def test_replies_are_identical_across_instances_and_processes():
    script = (
        "from hoprag.llm import ScriptedLLM\n"
        "llm = ScriptedLLM(rules=[('q', ['a b', 'c d e'], [-0.25, -0.5, -0.75])], default_reply='z')\n"
        "print(llm.generate(['q', 'r'], n=3, temperature=1.0, max_new_tokens=2))\n"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(runs) == 1 and "c d" in runs.pop()
