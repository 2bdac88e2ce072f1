"""What the turn-loop baselines (ReAct, Self-Ask, IRCoT, Search-o1) share: settings, the loop, the output record.

Each of them is a `TurnBasedMethod` that plays the strategy of `hoprag.search.turns.TurnLoop`; this class
turns the loop's per-question states into `MethodOutput`s: the answer, every passage shown to the LLM (in
reading order), the trace of every turn, the parse failure, and the stats (`turns`, `retrievals`,
`max_turns_reached`, `stalled` and the method's own counts), which metrics.json averages into `method/<key>`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import PassageFormat
from hoprag.llm.types import Generation
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.turns import Batching, TurnLoop, TurnState


class TurnBasedMethod(Method):
    """`max_turns` LLM turns at most, `k` passages per search written with `passage_template`; `batching`:
    "step" (one LLM call per turn for all active questions) or "question" (one call per prompt). `counters`
    are the method's own per-question counts, reported (as 0) by every question so their means are over all."""

    counters: tuple[str, ...] = ()

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        k: int = 5,
        max_turns: int = 7,
        batching: Batching = "step",
        passage_template: str = "[{rank}] {title}\n{text}",
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.loop = TurnLoop(llm, retriever, k, max_turns, batching)
        self.passages = PassageFormat(passage_template)

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """The turn loop's `k`, `max_turns` and `batching`, as the loop checks them."""
        TurnLoop.check_settings(**{name: setting(cls, settings, name) for name in ("k", "max_turns", "batching")})

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        return [self.output(state) for state in self.loop.run(self, examples, costs)]

    def output(self, state: TurnState) -> MethodOutput:
        trace = {"turns": state.steps, "max_turns_reached": state.capped}
        stats = {**dict.fromkeys(self.counters, 0.0), **state.stats()}
        return MethodOutput(state.answer or "", list(state.read.values()), trace, state.failed, stats)

    def settle(self, state: TurnState, text: str) -> None:
        """Finish `state` with the answer extracted from `text` (a failed extraction is the parse failure)."""
        extraction = self.extractor(text)
        state.finish(extraction.answer, extraction.failed)

    # -- the loop's strategy hooks that a method may leave as they are -----------------------------------

    def begin(self, loop: TurnLoop, states: list[TurnState]) -> None:
        """Before the first turn: nothing."""

    def turn_params(self, turn: int) -> dict[str, Any]:
        return dict(self.generation)

    def read_turn(self, state: TurnState, generation: Generation, turn: int) -> str | None:
        raise NotImplementedError

    def observe(self, loop: TurnLoop, states: list[TurnState], queries: list[str], hits: list[list[Passage]]) -> None:
        raise NotImplementedError

    def force_finish(self, loop: TurnLoop, states: list[TurnState]) -> None:
        """A question that ended without an answer gets the empty answer, a parse failure."""
        for state in states:
            state.finish("", failed=True)
