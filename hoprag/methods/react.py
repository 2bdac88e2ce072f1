"""ReAct (Yao et al., 2023): Thought / Action (Search[query] or Finish[answer]) / Observation turns.

    python eval.py +method=react data=hotpotqa [method.max_turns=7] [method.k=5] [retriever=bm25]

Turn i sends the question and the transcript so far, ending with "Thought i:", and stops at
"Observation i:" (PruneRAG's `react_pipeline.py`, its settings: at most 7 turns, top-5 passages). The output's
"Action i:" is parsed: Search[q] retrieves the top k passages for q, which become Observation i; Finish[a]
answers a; anything else (an empty Search[] too) is the observation "Invalid action." (counted: `method/invalid_actions`). A question
still searching after `max_turns` finishes with the empty answer, as the official pipeline's `finish[]`
(counted: `method/max_turns_reached`, and a parse failure). `lenient_actions` (a small-model aid, off by
default) also accepts an action written without the "Action i:" label.
"""

from __future__ import annotations

import re
from typing import Any

from hoprag.data.types import Passage
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, ContextPrompt
from hoprag.llm.types import Generation
from hoprag.methods.turn_method import TurnBasedMethod
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.turns import TurnLoop, TurnState, transcript_context

ACTION = re.compile(r"(Search|Finish)\[(.*?)\]", re.DOTALL)


class ReAct(TurnBasedMethod):
    """`prompt`'s user template has {question}, {transcript} (the turns so far, oldest dropped first over the
    input budget) and {turn}; observations show the passages with `passage_template`."""

    name = "react"
    counters = ("invalid_actions",)

    def __init__(
        self, llm: LLM, retriever: Retriever, prompt: ChatPrompt, lenient_actions: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.prompt = prompt
        self.lenient_actions = lenient_actions

    def turn_prompt(self, state: TurnState, turn: int) -> ContextPrompt:
        context = transcript_context(state.segments)
        return self.prompt.with_context("transcript", context, question=state.example.question, turn=turn)

    def turn_params(self, turn: int) -> dict[str, Any]:
        return {**self.generation, "stop": [f"Observation {turn}:"]}

    def read_turn(self, state: TurnState, generation: Generation, turn: int) -> str | None:
        thought, action = self.parse(generation.text, turn)
        kind, argument = action if action else ("", "")
        step = {"turn": turn, "thought": thought, "action": f"{kind}[{argument}]" if action else None}
        state.steps.append(step)
        if kind == "Search" and argument.strip():
            return argument.strip()
        if kind == "Finish":
            self.settle(state, argument)
            return None
        state.count("invalid_actions")
        step["observation"] = "Invalid action."
        state.segments.append(
            f"Thought {turn}: {thought}\nAction {turn}: Invalid[no action]\nObservation {turn}: Invalid action.\n"
        )
        return None

    def parse(self, text: str, turn: int) -> tuple[str, tuple[str, str] | None]:
        """The thought (the text before the last "Action i:") and the first action after that label."""
        labels = list(re.finditer(rf"\n?Action {turn}:", text))
        if labels:
            found = ACTION.search(text, labels[-1].end())
            return text[: labels[-1].start()].strip(), (found.group(1), found.group(2)) if found else None
        found = ACTION.search(text) if self.lenient_actions else None
        thought = (text[: found.start()] if found else text).strip()
        return thought, (found.group(1), found.group(2)) if found else None

    def observe(self, loop: TurnLoop, states: list[TurnState], queries: list[str], hits: list[list[Passage]]) -> None:
        for state, query, passages in zip(states, queries, hits):
            state.take(passages)
            step = state.steps[-1]
            step.update(query=query, passages=[p.id for p in passages])
            turn = step["turn"]
            observation = self.passages.render(passages) if passages else "No passages found."
            state.segments.append(
                f"Thought {turn}: {step['thought']}\nAction {turn}: Search[{query}]\nObservation {turn}: {observation}\n"
            )
