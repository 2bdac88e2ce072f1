"""PruningRAG's answer prompts: false-premise examples (behaviour 12) and the final-answer reading (11)."""

from __future__ import annotations

import pytest

from hoprag.data.types import Passage
from hoprag.llm.prompts import PassageFormat
from hoprag.routers.prompts import FALSE_PREMISES, answer_prompt, final_answer, icl_examples


def test_cross_domain_examples_never_come_from_the_querys_domain_and_n_are_inserted():
    for domain in FALSE_PREMISES:
        chosen = icl_examples(domain, 2, cross_domain=True)
        assert len(chosen) == 2 and FALSE_PREMISES[domain] not in chosen
        assert icl_examples(domain, 1, cross_domain=False) == [FALSE_PREMISES[domain]]  # the code's same domain
    assert icl_examples("music", 0, cross_domain=True) == []
    with pytest.raises(ValueError):
        icl_examples("music", 6, cross_domain=True)
    prompt = answer_prompt("q?", "03/05/2024, 23:18:31 PT", None, icl_examples("music", 3, True))[1]["content"]
    assert prompt.count("\n  - ") == 3 and "Examples of invalid questions" in prompt
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
