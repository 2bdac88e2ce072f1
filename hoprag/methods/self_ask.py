"""Self-Ask (Press et al., 2023): the model asks follow-up questions, retrieval answers them, then it answers.

    python eval.py +method=self_ask data=hotpotqa [method.max_turns=5] [method.k=5]

The prompt ends with "Are follow up questions needed here:"; each turn the model continues the transcript and
stops at "Intermediate answer:" (the paper's stop). A "Follow up: q" line retrieves the top k passages for q
and one batched LLM call answers q from them (`answer_prompt`); its answer is written after "Intermediate
answer:". "So the final answer is: a" answers a. A turn with neither, or a question still asking after
`max_turns` (PruningRAG's Self-Ask: at most 5 iterations; counted `method/max_turns_reached`), gets the paper's
rule: "So the final answer is:" is appended and the model is asked once more.
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

FOLLOW_UP = re.compile(r"Follow up:[ \t]*(.*)")
FINAL = "So the final answer is:"
INTERMEDIATE = "Intermediate answer:"


class SelfAsk(TurnBasedMethod):
    """`prompt`'s user template has {question} and {transcript}; `answer_prompt`'s {passages} and {question}
    (the follow-up question) give the intermediate answers; `final_generation` samples the forced final answer."""

    name = "self_ask"
    counters = ("intermediate_parse_failures",)

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        prompt: ChatPrompt,
        answer_prompt: ChatPrompt,
        max_turns: int = 5,
        final_generation: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, max_turns=max_turns, **kwargs)
        self.prompt, self.answer_prompt = prompt, answer_prompt
        self.final_generation = dict(final_generation or {})

    def turn_prompt(self, state: TurnState, turn: int, segments: list[str] | None = None) -> ContextPrompt:
        context = transcript_context(state.segments if segments is None else segments)
        return self.prompt.with_context("transcript", context, question=state.example.question)

    def turn_params(self, turn: int) -> dict[str, Any]:
        return {**self.generation, "stop": [INTERMEDIATE]}

    def read_turn(self, state: TurnState, generation: Generation, turn: int) -> str | None:
        text = generation.text
        step: dict[str, Any] = {"turn": turn, "output": text}
        state.steps.append(step)
        if FINAL in text:
            state.segments.append(text)
            self.settle(state, text.split(FINAL, 1)[1].strip())
            return None
        state.segments.append(text if text.endswith("\n") else text + "\n")
        asked = FOLLOW_UP.findall(text)
        if not asked or not asked[-1].strip():
            state.stalled = True
            return None
        step["follow_up"] = asked[-1].strip()
        return step["follow_up"]

    def observe(self, loop: TurnLoop, states: list[TurnState], queries: list[str], hits: list[list[Passage]]) -> None:
        prompts = [
            self.answer_prompt.with_context("passages", self.passages.context(passages), question=query)
            for query, passages in zip(queries, hits)
        ]
        for state, passages, generation in zip(states, hits, loop.generate(states, prompts, "intermediate_answer")):
            state.take(passages)
            extraction = self.extractor(generation.text)
            state.count("intermediate_parse_failures", extraction.failed)
            state.steps[-1].update(passages=[p.id for p in passages], intermediate_answer=extraction.answer)
            state.segments.append(f"{INTERMEDIATE} {extraction.answer}\n")

    def force_finish(self, loop: TurnLoop, states: list[TurnState]) -> None:
        """The paper's rule: append "So the final answer is:" and ask once (one batched call)."""
        prompts = [self.turn_prompt(s, s.turns, [*s.segments, FINAL]) for s in states]
        for state, generation in zip(states, loop.generate(states, prompts, "answer", **self.final_generation)):
            state.steps.append({"forced_final": generation.text})
            self.settle(state, generation.text)
