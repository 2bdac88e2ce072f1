"""The CoT baseline with the scripted LLM: zero- / few-shot prompts, passages, the FINAL answer form."""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import CoT
from hoprag.search.cot_exemplars import EXEMPLARS, LongFormExemplar
from tests.fakes import KeywordRetriever

CORPUS = [
    Passage("p1", "France", "Paris is the capital of France."),
    Passage("p2", "Lyon", "Lyon is a city in France."),
    Passage("p3", "Rhone", "The Rhone flows through Lyon."),
]
EXAMPLES = [QAExample("a", "What is the capital of France?", ["Paris"]), QAExample("b", "Where does the Rhone flow?", ["Lyon"])]
RULES = [
    (r"Question: What is the capital of France\?\n(Let's think step by step.\n)?Answer:$",
     "#Explanations: The passage says Paris is the capital.\n#FINAL: The answer is Paris."),
    (r"Question: Where does the Rhone flow\?", "The Rhone flows through Lyon."),  # no FINAL marker
]  # fmt: skip


def test_few_shot_with_documents_retrieves_once_prompts_once_and_reads_after_final():
    llm, retriever = ScriptedLLM(rules=RULES), KeywordRetriever(CORPUS)
    costs = [Cost(), Cost()]
    outputs = CoT(llm, retriever, k=2).answer(EXAMPLES, costs)

    assert retriever.batches == [[ex.question for ex in EXAMPLES]]
    assert len(llm.calls) == 1 and len(llm.calls[0].prompts) == 2
    system, user = llm.calls[0].prompts[0]
    assert all(e.question in system["content"] for e in EXEMPLARS["hotpotqa"])
    assert "#FINAL: The answer is Stephen King." in system["content"]
    assert user["content"].startswith("Passages:\n[1] France\nParis is the capital of France.\n\n[2]")
    assert "step by step" not in user["content"] and user["content"].endswith("Answer:")
    assert [(o.prediction, o.parse_failed) for o in outputs] == [("Paris.", False), ("The Rhone flows through Lyon.", True)]
    assert [p.id for p in outputs[0].retrieved] == outputs[0].trace["passages"] == ["p1", "p2"]
    assert outputs[0].stats == {"llm_steps": 1.0, "retrievals": 1.0, "cut_at_max_tokens": 0.0}
    assert [(c.llm_calls, c.retrieval_calls) for c in costs] == [(1, 1), (1, 1)]


def test_zero_shot_closed_book_has_the_trigger_and_no_retrieval_and_question_batching_calls_per_question():
    llm, retriever = ScriptedLLM(rules=RULES), KeywordRetriever(CORPUS)
    method = CoT(llm, retriever, mode="zero_shot", with_documents=False, batching="question")
    outputs = method.answer(EXAMPLES, [Cost(), Cost()])

    assert retriever.batches == [] and [len(c.prompts) for c in llm.calls] == [1, 1]
    system, user = llm.calls[0].prompts[0]
    assert user["content"] == "Question: What is the capital of France?\nLet's think step by step.\nAnswer:"
    assert "Examples" not in system["content"] and "#FINAL" in system["content"]
    assert outputs[0].prediction == "Paris." and outputs[0].retrieved == []
    assert outputs[0].stats["retrievals"] == 0.0


def test_exemplars_are_chosen_by_dataset_name_and_an_unknown_one_or_bad_setting_is_refused():
    llm = ScriptedLLM()
    assert CoT(llm, KeywordRetriever(CORPUS), exemplars="2wiki_open").prompt.exemplars == EXEMPLARS["2wiki"]
    with pytest.raises(ValueError, match=r"no few-shot CoT exemplars for data 'bamboogle'.*method.mode=zero_shot"):
        CoT(llm, KeywordRetriever(CORPUS), exemplars="bamboogle")
    assert CoT(llm, KeywordRetriever(CORPUS), mode="zero_shot", exemplars="bamboogle").prompt.exemplars == ()
    with pytest.raises(ValueError, match="method.mode must be one of"):
        CoT(llm, KeywordRetriever(CORPUS), mode="few-shot")
    with pytest.raises(ValueError, match="method.batching must be .step. or .question."):
        CoT(llm, KeywordRetriever(CORPUS), batching="node")


def test_the_exemplars_are_three_per_dataset_in_the_final_form():
    for shots in EXEMPLARS.values():
        assert len(shots) == 3
        for e in shots:
            long_form = isinstance(e, LongFormExemplar)  # the ambiguous sets': the long answer is the final line
            final = f"\n#FINAL: {e.answer}" if long_form else f"#FINAL: The answer is {e.answer}."
            assert e.explained().endswith(final)
