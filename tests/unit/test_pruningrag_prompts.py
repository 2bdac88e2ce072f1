"""PruningRAG's answer prompts: false-premise examples (behaviour 12; Table 5's N same-domain or N* cross-domain
examples) and the final-answer reading (11)."""

from __future__ import annotations

import pytest

from hoprag.data.types import Passage
from hoprag.llm.prompts import PassageFormat
from hoprag.routers.prompts import DOMAINS, FALSE_PREMISES, MAX_ICL, answer_prompt, final_answer, icl_examples


def test_every_domain_has_three_distinct_false_premises_the_spec_kind_first():
    assert set(FALSE_PREMISES) == set(DOMAINS) and MAX_ICL == 3
    assert FALSE_PREMISES["music"][0][0] == "How long was Phil Rudd the drummer of Van Halen?"
    questions = [q for examples in FALSE_PREMISES.values() for q, _ in examples]
    assert len(questions) == len(set(questions)) == 15
    assert all(len(examples) == MAX_ICL and all(q.endswith("?") and why for q, why in examples)
               for examples in FALSE_PREMISES.values())  # fmt: skip


@pytest.mark.parametrize("n", range(MAX_ICL + 1))
def test_same_domain_shows_the_first_n_examples_of_the_querys_domain(n):
    for domain in DOMAINS:
        assert icl_examples(domain, n, cross_domain=False) == list(FALSE_PREMISES[domain][:n])


@pytest.mark.parametrize("n", range(MAX_ICL + 1))
def test_cross_domain_shows_the_first_example_of_each_of_the_n_domains_after_the_querys(n):
    for domain in DOMAINS:
        chosen = icl_examples(domain, n, cross_domain=True)
        assert len(chosen) == n and not set(chosen) & set(FALSE_PREMISES[domain])  # behaviour 12
        assert len({d for d in DOMAINS for example in chosen if example in FALSE_PREMISES[d]}) == n  # one a domain
        assert chosen == icl_examples(domain, n, cross_domain=True)  # always the same ones
    assert icl_examples("music", 3, cross_domain=True) == [FALSE_PREMISES[d][0] for d in ("movie", "open", "sports")]
    assert icl_examples("open", 2, cross_domain=True) == [FALSE_PREMISES[d][0] for d in ("sports", "finance")]


def test_an_unknown_domain_gets_the_first_examples_of_the_first_domains_and_n_is_checked():
    for domain in (None, "weather"):
        for cross in (False, True):
            assert icl_examples(domain, 2, cross) == [FALSE_PREMISES["sports"][0], FALSE_PREMISES["finance"][0]]
    assert icl_examples(None, 0, False) == icl_examples("music", 0, True) == []
    for bad in (-1, 4):
        with pytest.raises(ValueError, match="0..3"):
            icl_examples("music", bad, cross_domain=False)
    prompt = answer_prompt("q?", "03/05/2024, 23:18:31 PT", None, icl_examples("music", 3, False))[1]["content"]
    assert prompt.count("\n  - ") == 3 and "Examples of invalid questions" in prompt
    assert "Mick Jagger" in prompt  # the domain's second example
    assert "Examples of invalid questions" not in answer_prompt("q?", "t", None)[1]["content"]


def test_references_are_the_shortenable_context_and_braces_in_text_are_kept():
    refs = PassageFormat("<DOC>\n{text}\n</DOC>").context([Passage("1", "t", "a {b} c")])
    prompt = answer_prompt("what {x}?", "03/05/2024", refs)
    user = prompt.render()[1]["content"]
    assert "### References\n<DOC>\na {b} c\n</DOC>\n### Question\nwhat {x}?\n### Answer" in user
    assert "Use only the references" in user
    assert "Use only the references" not in answer_prompt("q?", "t", refs, grounded=False).render()[1]["content"]
    assert "### References" not in answer_prompt("q?", "t", None)[1]["content"]  # the LLM's own knowledge


def test_final_answer_after_the_marker_and_i_dont_know_without_it():
    assert final_answer("### Thought\nA then B.\n### Final Answer\n Paris \n", cot=True) == ("Paris", True)
    assert final_answer("### Final Answer: x\n### Final Answer: Paris", cot=True) == ("Paris", True)
    assert final_answer("Paris, I think", cot=True) == ("i don't know", False)
    assert final_answer("  Paris\n", cot=False) == ("Paris", True)  # a non-CoT prompt: the raw output
