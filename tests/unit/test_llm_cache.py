"""The generation cache: greedy requests are served from disk, keyed by the full request."""

from __future__ import annotations

from hoprag.cost import Cost
from hoprag.llm import ScriptedLLM
from hoprag.llm.cache import GenerationCache


def scripted(directory) -> ScriptedLLM:
    return ScriptedLLM(rules=[("capital", "Answer: Paris", [-0.1, -0.2])], default_reply="no", generation_cache=directory)


def asked(llm: ScriptedLLM) -> int:
    return sum(len(call.prompts) for call in llm.calls)


def test_a_second_process_gets_the_same_generations_without_asking_the_model(tmp_path):
    prompts = ["the capital of France?", [{"role": "user", "content": "hello"}], "the capital of France?"]
    first = scripted(tmp_path)
    costs = [Cost() for _ in prompts]
    expected = first.generate(prompts, costs=costs)
    assert asked(first) == 2  # the repeated prompt is generated once
    assert [c.llm_cache_hits for c in costs] == [0, 0, 0]

    again = scripted(tmp_path)
    costs = [Cost() for _ in prompts]
    assert again.generate(prompts, costs=costs) == expected
    assert asked(again) == 0
    assert [c.llm_cache_hits for c in costs] == [1, 1, 1]
    # a hit still charges the tokens: they are what the method costs
    assert [c.completion_tokens for c in costs] == [2, 1, 2] and again.usage.cache_hits == 3


def test_the_key_covers_parameters_and_backend(tmp_path):
    llm = scripted(tmp_path)
    llm.generate(["the capital?"])
    llm.generate(["the capital?"], max_new_tokens=1)
    other = ScriptedLLM(default_reply="other", generation_cache=tmp_path)
    assert other.generate(["the capital?"])[0][0].text == "other"
    assert asked(llm) == 2 and asked(other) == 1
    assert len(GenerationCache(tmp_path)) == 3


def test_sampled_requests_are_never_cached(tmp_path):
    llm = scripted(tmp_path)
    for _ in range(2):
        llm.generate(["the capital?"], temperature=0.7, n=2, seed=1)
    assert asked(llm) == 2 and len(GenerationCache(tmp_path)) == 0


def test_without_a_location_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    llm = ScriptedLLM(default_reply="x")
    llm.generate(["a"])
    llm.generate(["a"])
    assert llm.cache is None and asked(llm) == 2 and not list(tmp_path.iterdir())


def test_an_entry_written_before_thinking_was_held_apart_is_never_served(tmp_path, monkeypatch):
    """Format 2 stored a reasoning model's reply whole: read back today it would hand the thinking to the method."""
    from hoprag.llm import cache as cache_module
    from hoprag.llm.types import Generation

    thinking = ScriptedLLM(rules=[("capital", "Answer: Paris")], think="Lyon?", generation_cache=str(tmp_path))
    monkeypatch.setattr(cache_module, "FORMAT", 2)
    old_key = cache_module.request_key(thinking.identity(), "the capital?", thinking.default)
    GenerationCache(tmp_path).put({old_key: [Generation("<think>\nLyon?\n</think>\n\nAnswer: Paris")]})
    monkeypatch.undo()
    (g,) = thinking.generate(["the capital?"])[0]
    assert (g.text, g.reasoning) == ("Answer: Paris", "Lyon?") and asked(thinking) == 1
