"""Tolerant answer extraction and its counted failures."""

from __future__ import annotations

import pytest

from hoprag.methods import AnswerExtractor, Extraction

CASES = [
    ("Paris", "Paris"),
    ("Answer: Paris", "Paris"),
    ("answer: paris", "paris"),
    ("The answer is Paris.", "Paris."),
    ('The answer is: "Paris"', "Paris"),
    ("A: The answer is **Paris**", "Paris"),
    ("**Answer:** Paris", "Paris"),
    ("Final answer: 42", "42"),
    ("`1990`", "1990"),
    ("- Paris", "Paris"),
    ("## Answer: Paris", "Paris"),
    ("\n\n  Paris\nIt is in France.", "Paris"),  # the first non-empty line
    ("Answer:\nParis", "Paris"),  # a prefix alone on its line: the next line answers
    ("Paris. It is the capital of France.", "Paris."),  # first sentence
    ("St. Louis Cardinals", "St. Louis Cardinals"),  # abbreviations are not sentence ends
    ("The U.S. Army. Founded in 1775.", "The U.S. Army."),
    ("A car", "A car"),  # "A" is only a prefix with a colon
    ("The answer isn't known", "The answer isn't known"),
    ("Yes", "Yes"),
]


@pytest.mark.parametrize(("output", "answer"), CASES)
def test_extracts_the_answer(output, answer):
    assert AnswerExtractor()(output) == Extraction(answer, False)


@pytest.mark.parametrize(
    ("output", "fallback"),
    [("", ""), ("  \n\t\n", ""), ("Answer:", "Answer:"), ("**Answer:**\n\n  ``  ", "**Answer:**")],
)
def test_nothing_extractable_is_a_failure_with_the_first_line_as_fallback(output, fallback):
    assert AnswerExtractor()(output) == Extraction(fallback, True)


def test_options_come_from_config():
    whole = AnswerExtractor(first_sentence=False)
    assert whole("Paris. It is the capital.").answer == "Paris. It is the capital."
    custom = AnswerExtractor(prefixes=["Final:"])
    assert custom("final: 42").answer == "42"
    assert custom("Answer: 42").answer == "Answer: 42"
