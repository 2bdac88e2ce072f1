"""Self-consistency with the scripted LLM: N samples in one call, a vote over normalised answers, USC."""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import SelfConsistency
from hoprag.search.consistency import majority_vote
from tests.fakes import KeywordRetriever

CORPUS = [Passage("p1", "France", "Paris is the capital of France.")]
EXAMPLES = [QAExample("a", "What is the capital of France?", ["Paris"]), QAExample("b", "Who wrote Hamlet?", ["Shakespeare"])]
SAMPLES = {
    "France": ["#FINAL: The answer is Lyon.", "#FINAL: The answer is Paris.", "no marker: Lyon",
               "#FINAL: the answer is paris", "#FINAL: **PARIS**"],
    "Hamlet": ["#FINAL: Marlowe", "#FINAL: Shakespeare", "#FINAL: Shakespeare.", "#FINAL: marlowe", "nothing"],
}  # fmt: skip
RULES = [
    (r"most consistent response is$", "The most consistent response is Response 4."),
    (r"capital of France\?\n(Let's think step by step.\n)?Answer:$", SAMPLES["France"]),
    (r"Hamlet\?\nAnswer:$", SAMPLES["Hamlet"]),
]


def test_majority_vote_over_normalised_answers_in_one_sampling_call():
    llm = ScriptedLLM(rules=RULES)
    costs = [Cost(), Cost()]
    method = SelfConsistency(llm, KeywordRetriever(CORPUS), samples=5, with_documents=False, seed=7, generation={"temperature": 0.7})
    outputs = method.answer(EXAMPLES, costs)

    (call,) = llm.calls  # one call, n = 5 per question, a seed per question
    assert len(call.prompts) == 2 and call.params.n == 5 and call.params.temperature == 0.7
    assert call.seeds is not None and len(set(call.seeds)) == 2
    # Paris ("Paris.", "paris", "PARIS") beats Lyon (1 parsed vote; "no marker: Lyon" is left out)
    assert outputs[0].prediction == "Paris." and not outputs[0].parse_failed
    assert outputs[0].trace["chosen"] == 1 and outputs[0].trace["samples"][2]["parsed"] is False
    assert outputs[0].stats == {
        "samples": 5.0, "samples_unparsed": 1.0, "distinct_answers": 2.0, "vote_share": 0.75,
        "llm_steps": 1.0, "retrievals": 0.0, "cut_at_max_tokens": 0.0,
    }  # fmt: skip
    # a 2 - 2 tie between Marlowe and Shakespeare goes to the answer sampled first
    assert outputs[1].prediction == "Marlowe" and outputs[1].stats["vote_share"] == 0.5
    assert [c.llm_calls for c in costs] == [1, 1]


def test_no_parsed_sample_falls_back_to_the_first_reply_as_a_parse_failure():
    vote = majority_vote([("first reply", True), ("second", True)])
    assert (vote.index, vote.failed, vote.share, vote.distinct) == (0, True, 0.0, 0)


def test_usc_shows_the_replies_and_takes_the_one_the_llm_names():
    llm = ScriptedLLM(rules=RULES)
    method = SelfConsistency(llm, KeywordRetriever(CORPUS), samples=5, vote="usc", with_documents=False, generation={"temperature": 0.7})
    outputs = method.answer(EXAMPLES, [Cost(), Cost()])

    assert [len(c.prompts) for c in llm.calls] == [2, 2] and llm.calls[1].params.n == 1
    shown = llm.calls[1].prompts[0][1]["content"]
    assert "Response 1: #FINAL: The answer is Lyon.\n\nResponse 2: #FINAL: The answer is Paris." in shown
    assert [o.prediction for o in outputs] == ["paris", "marlowe"]  # response 4 of each
    assert outputs[0].trace["selection"] == "The most consistent response is Response 4."
    assert outputs[0].stats["usc_unparsed"] == 0.0 and outputs[0].stats["llm_steps"] == 2.0


def test_usc_naming_no_valid_response_takes_response_one_counted_and_is_the_default_for_ambiguous_questions():
    llm = ScriptedLLM(rules=[(r"consistent response is$", "Response 9"), *RULES[1:]])
    method = SelfConsistency(llm, KeywordRetriever(CORPUS), samples=5, task="ambiguous", mode="zero_shot",
                             with_documents=False, generation={"temperature": 0.7})  # fmt: skip
    assert method.vote == "usc"
    out = method.answer(EXAMPLES[:1], [Cost()])[0]
    assert out.trace["chosen"] == 0 and out.stats["usc_unparsed"] == 1.0
    assert out.prediction == "The answer is Lyon."  # the long-form text after FINAL
    with pytest.raises(ValueError, match="method.vote must be one of"):
        SelfConsistency(llm, KeywordRetriever(CORPUS), vote="mean")
