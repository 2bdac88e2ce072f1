"""The shared turn loop: transcripts shortened oldest-first within the input budget, and its settings checked."""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, ReAct
from hoprag.retrieval import Retriever
from hoprag.search.turns import OMITTED, TurnLoop, transcript_context
from tests.fakes import KeywordRetriever
from tests.unit.test_methods import CORPUS


def test_a_transcript_renders_its_kept_segments_in_order_with_one_mark_for_the_dropped_oldest():
    context = transcript_context(["one\n", "two\n", "three\n"])
    assert [u.text for u in context.units] == ["three\n", "two\n", "one\n"]  # the newest first in priority
    assert context.text() == "one\ntwo\nthree\n"
    assert context.text(keep=2) == f"{OMITTED}\ntwo\nthree\n"


def test_a_long_react_transcript_loses_its_oldest_turns_first_and_the_question_counts_it():
    llm = ScriptedLLM(rules=[(r"Thought (\d+):$", r"Look.\nAction \1: Search[capital France]")], max_input_tokens=30)
    prompt = ChatPrompt("Act.", "Question: {question}\n{transcript}Thought {turn}:")
    cost = Cost()
    ReAct(llm, KeywordRetriever(CORPUS), prompt, max_turns=3, k=1).answer([QAExample("q", "Q?", ["x"])], [cost])
    last = llm.calls[-1].texts[0]
    assert f"Question: Q?\n{OMITTED}\nThought 2: Look." in last and "Observation 1:" not in last
    assert cost.truncated_prompts >= 1 and cost.context_units_dropped >= 1


def test_the_loop_refuses_bad_settings():
    with pytest.raises(ValueError, match="max_turns and k must be positive"):
        TurnLoop(ScriptedLLM(), Retriever([]), k=5, max_turns=0)
    with pytest.raises(ValueError, match="method.batching must be 'step' or 'question', got 'node'"):
        TurnLoop(ScriptedLLM(), Retriever([]), k=5, max_turns=7, batching="node")
