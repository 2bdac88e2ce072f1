"""IRCoT (Trivedi et al., 2023): interleave chain-of-thought sentences with retrieval.

    python eval.py +method=ircot data=hotpotqa [method.k=4] [method.max_turns=8] [method.max_paragraphs=15]

The question retrieves k paragraphs; then each turn shows every paragraph collected so far, the question and
the chain of thought so far ("A: ..."), and keeps the first sentence the model writes. A sentence containing
"answer is" ends the chain (its answer is the text after it); any other sentence retrieves k more paragraphs
with itself as the query. The paper's settings (§3.1, §4): k ∈ {2, 4, 6, 8} chosen on dev (4 here), at most
8 reasoning steps, at most 15 paragraphs in the prompt (later ones are not added: counted
`method/paragraphs_capped`). A chain with no answer after `max_turns` sentences, or an empty sentence, is
closed by asking once with "So the answer is:" appended (counted `method/max_turns_reached`, `method/stalled`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from hoprag.data.types import Passage
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, ContextPrompt
from hoprag.llm.types import Generation
from hoprag.methods.answer_extraction import SENTENCE_END
from hoprag.methods.base import setting
from hoprag.methods.turn_method import TurnBasedMethod
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.turns import TurnLoop, TurnState

ANSWER_IS = re.compile(r"answer is:?", re.IGNORECASE)
CLOSE = "So the answer is:"


class IRCoT(TurnBasedMethod):
    """`prompt`'s user template has {paragraphs} (written with `passage_template`, in reading order; over the
    input budget the latest are dropped first), {question} and {cot} (the sentences so far)."""

    name = "ircot"
    counters = ("paragraphs_capped",)

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        prompt: ChatPrompt,
        k: int = 4,
        max_turns: int = 8,
        max_paragraphs: int = 15,
        final_generation: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, k=k, max_turns=max_turns, **kwargs)
        self.check_paragraphs(max_paragraphs, k)
        self.prompt, self.max_paragraphs = prompt, max_paragraphs
        self.final_generation = dict(final_generation or {})

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """The turn loop's settings, and `max_paragraphs` against `k`, as the constructor checks them."""
        super().check_settings(settings)
        cls.check_paragraphs(setting(cls, settings, "max_paragraphs"), setting(cls, settings, "k"))

    @staticmethod
    def check_paragraphs(max_paragraphs: int, k: int) -> None:
        if max_paragraphs < k:
            raise ValueError(f"max_paragraphs ({max_paragraphs}) must be at least k ({k})")

    def begin(self, loop: TurnLoop, states: list[TurnState]) -> None:
        """The first retrieval, with the question."""
        queries = [s.example.question for s in states]
        self.collect(states, queries, loop.search(states, queries), turn=0)

    def turn_prompt(self, state: TurnState, turn: int, close: str = "") -> ContextPrompt:
        cot = " ".join([*state.segments, close] if close else state.segments)
        context = self.passages.context(list(state.read.values()))
        return self.prompt.with_context(
            "paragraphs", context, question=state.example.question, cot=f" {cot}" if cot else ""
        )

    def read_turn(self, state: TurnState, generation: Generation, turn: int) -> str | None:
        lines = [line.strip() for line in generation.text.splitlines() if line.strip()]
        sentence = SENTENCE_END.split(lines[0], maxsplit=1)[0].strip() if lines else ""
        state.steps.append({"turn": turn, "output": generation.text, "sentence": sentence})
        if not sentence:
            state.stalled = True
            return None
        state.segments.append(sentence)
        found = ANSWER_IS.search(sentence)
        if found:
            self.settle(state, sentence[found.end() :].strip().removesuffix("."))
            return None
        return sentence

    def observe(self, loop: TurnLoop, states: list[TurnState], queries: list[str], hits: list[list[Passage]]) -> None:
        self.collect(states, queries, hits, turn=None)

    def collect(self, states: list[TurnState], queries: list[str], hits: list[list[Passage]], turn: int | None) -> None:
        """Add each question's new paragraphs, up to `max_paragraphs` in all (the rest counted, not shown)."""
        for state, query, passages in zip(states, queries, hits):
            new = [p for p in passages if p.id not in state.read]
            room = max(self.max_paragraphs - len(state.read), 0)
            state.take(new[:room])
            state.count("paragraphs_capped", len(new[room:]))
            record = {"query": query, "passages": [p.id for p in passages], "added": [p.id for p in new[:room]]}
            if turn == 0:
                state.steps.append({"turn": 0, **record})
            else:
                state.steps[-1].update(record)

    def force_finish(self, loop: TurnLoop, states: list[TurnState]) -> None:
        """Close the chain with "So the answer is:" and ask once (one batched call)."""
        prompts = [self.turn_prompt(s, s.turns, close=CLOSE) for s in states]
        for state, generation in zip(states, loop.generate(states, prompts, "answer", **self.final_generation)):
            state.steps.append({"forced_final": generation.text})
            self.settle(state, generation.text)
