"""A question too long for the LLM's input budget is that question's failure, not the run's (issue 44 item 10):
it is left unanswered (an empty answer, scored as wrong), named in the log and counted in metrics.json as
`questions_too_long`, and the other questions are answered; instructions too long whatever the question are
still refused. The scripted LLM counts whitespace words as tokens."""

from __future__ import annotations

import json

import pytest

from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import ChatPrompt, PromptTooLongError, ScriptedLLM
from hoprag.methods import StandardRAG
from tests.fakes import KeywordRetriever

PASSAGES = [Passage(f"p{i}", f"Town{i}", f"Town{i} lies on river R{i}.") for i in range(3)]
PROMPT = ChatPrompt("Answer briefly.", "{passages}\nQuestion: {question}")
LONG = "where " * 3_400  # 20,400 characters


def examples() -> list[QAExample]:
    questions = {"q1": "Which river runs by Town0?", "q2": LONG, "q3": "Which river runs by Town2?"}
    return [QAExample(qid, question, ["R0"]) for qid, question in questions.items()]


def method(prompt: ChatPrompt = PROMPT) -> StandardRAG:
    llm = ScriptedLLM(rules=[(r"\[1\] (Town\d)", r"Answer: \1")], max_input_tokens=200)
    return StandardRAG(llm, KeywordRetriever(PASSAGES), prompt, k=2)


def test_a_question_too_long_is_left_unanswered_counted_and_named_and_the_run_goes_on(tmp_path, caplog):
    metrics = run(method(), examples(), tmp_path, batch_size=3)
    records = {r["id"]: r for r in map(json.loads, (tmp_path / "predictions.jsonl").read_text().splitlines())}
    assert records["q1"]["prediction"] == "Town0" and records["q3"]["prediction"] == "Town2"
    assert records["q2"]["prediction"] == "" and records["q2"]["question_too_long"] is True
    assert "question_too_long" not in records["q1"]
    assert "max_input_tokens" in records["q2"]["trace"]["question_too_long"]
    assert metrics["questions_too_long"] == 1 and metrics["n"] == 3
    assert "'q2' is too long" in caplog.text


def test_instructions_too_long_whatever_the_question_are_still_refused(tmp_path):
    wordy = ChatPrompt("Answer briefly. " * 150, "{passages}\nQuestion: {question}")  # 300 words of instructions
    with pytest.raises(PromptTooLongError, match="instructions alone"):
        run(method(wordy), examples()[:1], tmp_path)
