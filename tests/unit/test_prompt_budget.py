"""Prompt budgets: only a prompt's context is shortened, by one rule, and every cut is counted.

The scripted LLM counts whitespace words as tokens, so every budget here is exact arithmetic.
"""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import Generation, ScriptedLLM
from hoprag.llm.openai_http import choice_logprobs
from hoprag.llm.prompts import ChatPrompt, Context, ContextPrompt, PassageFormat, PromptTooLongError, fit_prompt
from hoprag.llm.scripted import render
from hoprag.methods import StandardRAG
from hoprag.search.prunerag.aggregate import Aggregator
from hoprag.search.prunerag.tree import Node
from tests.fakes import KeywordRetriever

PASSAGES = [Passage(f"p{i}", f"T{i}", " ".join([f"w{i}"] * 10)) for i in range(4)]  # 11 words each with title
PROMPT = ChatPrompt("Answer in JSON. Example: Paris", "{passages}\nQuestion: {question}")
WORDS = lambda prompt: len(render(prompt).split())  # noqa: E731


def prompt_with(passages=PASSAGES) -> ContextPrompt:
    return PROMPT.with_context("passages", PassageFormat("{title} {text}", "\n").context(passages), question="why?")


def test_a_prompt_that_fits_is_sent_whole():
    whole = WORDS(prompt_with().render())
    fit = fit_prompt(prompt_with(), WORDS, whole)
    assert not fit.truncated and fit.prompt == prompt_with().render() and fit.units_dropped == 0


def test_the_lowest_ranked_passages_go_first_and_the_instructions_stay():
    whole = WORDS(prompt_with().render())  # 9 instruction words + 4 x 11
    fit = fit_prompt(prompt_with(), WORDS, whole - 1)
    assert fit.units_dropped == 1 and fit.sent_tokens == whole - 11 and fit.tokens == whole
    assert fit.prompt[0]["content"] == PROMPT.system  # the instructions are never cut
    assert fit.prompt == prompt_with(PASSAGES[:3]).render()
    assert fit_prompt(prompt_with(), WORDS, whole - 23).prompt == prompt_with(PASSAGES[:1]).render()


def test_a_top_passage_too_long_alone_is_cut_from_its_end():
    instructions = WORDS(prompt_with([]).render())
    fit = fit_prompt(prompt_with(), WORDS, instructions + 5)  # title + 4 words of the top passage
    assert fit.cut and fit.units_dropped == 3 and fit.sent_tokens == instructions + 5
    user = fit.prompt[1]["content"]
    assert user.startswith("T0 w0 w0 w0 w0") and "w1" not in user


def test_instructions_alone_over_the_budget_are_refused():
    with pytest.raises(PromptTooLongError, match="instructions alone"):
        fit_prompt(prompt_with(), WORDS, 3)


def test_generate_fits_context_prompts_and_charges_what_was_cut():
    llm = ScriptedLLM(default_reply="ok", max_input_tokens=WORDS(prompt_with().render()) - 1)
    cost = Cost()
    [[g]] = llm.generate([prompt_with()], costs=[cost])
    assert g.prompt_tokens == cost.prompt_tokens == WORDS(prompt_with(PASSAGES[:3]).render())  # what was sent
    record = cost.to_dict()
    assert (record["truncated_prompts"], record["context_units_dropped"], record["prompt_tokens_dropped"]) == (1, 1, 11)
    assert llm.calls[0].prompts == [prompt_with(PASSAGES[:3]).render()]


def test_a_plain_prompt_over_the_budget_is_refused_not_cut_somewhere():
    llm = ScriptedLLM(max_input_tokens=5)
    with pytest.raises(PromptTooLongError, match="ContextPrompt"):
        llm.generate([prompt_with().render()])
    assert llm.calls == []  # refused before the model was asked


def test_standard_rag_prompts_lose_passages_not_instructions():
    """A method's prompt over the budget keeps its system message, question and top passages."""
    examples = [QAExample("q1", "Where is w0?", ["x"])]
    llm = ScriptedLLM(default_reply="Answer: x")
    method = StandardRAG(llm, KeywordRetriever(PASSAGES), PROMPT, k=4, passage_template="{title} {text}")
    sent_whole = WORDS(method.context_prompt(examples[0], PASSAGES).render())
    llm.max_input_tokens = sent_whole - 20
    cost = Cost()
    method.answer(examples, [cost])
    [sent] = llm.calls[-1].prompts
    assert sent[0]["content"] == PROMPT.system and sent[1]["content"].endswith("Question: Where is w0?")
    assert cost.truncated_prompts == 1 and cost.context_units_dropped == 2


def test_prunerag_tree_prompts_drop_every_nodes_last_passage_first():
    root = Node("Q?", "query", 1)
    a, b = root.add_child("A?", "query"), root.add_child("B?", "query")
    a.passages = [Passage("a1", "A1", "alpha one"), Passage("a2", "A2", "alpha two")]
    b.passages = [Passage("b1", "B1", "beta one"), Passage("b2", "B2", "beta two")]
    aggregator = Aggregator(ScriptedLLM(), max_depth=2)
    context = aggregator.tree_context(root)
    assert [p.id for p in context.units] == ["a1", "b1", "a2", "b2"]  # by rank across nodes
    kept = context.text(keep=3)
    assert "alpha two" in kept and "beta two" not in kept and "beta one" in kept


def test_context_cuts_only_the_last_kept_unit():
    context = Context(tuple(PASSAGES[:2]), PassageFormat("{text}", "|").render)
    assert context.text(keep=2, chars=5) == f"{PASSAGES[0].text}|{PASSAGES[1].text[:5]}"


def test_generations_without_logprobs_are_counted_per_question():
    class NoLogprobs(ScriptedLLM):
        def _generate(self, prompts, params, seeds=None):
            return [[Generation(g.text, g.tokens, None, g.prompt_tokens, g.completion_tokens) for g in gens]
                    for gens in super()._generate(prompts, params, seeds)]

    costs = [Cost(), Cost()]
    NoLogprobs().generate(["a", "b"], costs=costs, n=2, temperature=1.0)
    assert [c.missing_logprobs for c in costs] == [2, 2]


def test_a_null_server_logprob_is_unknown_not_probability_one():
    tokens, logprobs = choice_logprobs({"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": None}]})
    assert tokens == ["a", "b"] and logprobs is None
    tokens, logprobs = choice_logprobs({"tokens": ["a"], "token_logprobs": [None]})
    assert logprobs is None
    assert choice_logprobs({"content": [{"token": "a", "logprob": -0.5}]})[1] == [-0.5]
