"""The turn loop shared by the agentic baselines (ReAct, Self-Ask, IRCoT, Search-o1), batched over questions.

Each question of a batch carries a `TurnState`. A turn is one batched LLM step for every question still
active (the method's prompt and stop strings), then one batched retrieval for the questions whose output
asked for one, then the method's `observe` (which may make one more batched LLM call, e.g. Search-o1's
Reason-in-Documents, Self-Ask's intermediate answers). A question leaves the batch when the method marks it
answered or stalled (no answer and nothing to search); one still active after `max_turns` is marked
`capped` (its stats: `max_turns_reached: 1`). Both then go to the method's `force_finish`, the method's
documented rule for a question that ended without an answer.

A method is a strategy over this loop: `begin`, `turn_prompt`, `turn_params`, `read_turn`, `observe` and
`force_finish` (see `TurnMethod`). Transcripts that grow with every turn are written into prompts through
`transcript_context`, so the shared input-budget rule (`hoprag.llm.prompts`) drops their oldest segments
first, counted per question.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM, Prompt
from hoprag.llm.prompts import Context, ContextPrompt
from hoprag.llm.types import Generation
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.steps import llm_step, one_by_one, retrieval_step

Batching = Literal["step", "question"]
OMITTED = "[...]"


@dataclass
class TurnState:
    """One question's progress: the transcript `segments` its prompts show, every passage read (in reading
    order), the trace (one record per turn), and the answer once there is one."""

    example: QAExample
    cost: Cost
    segments: list[str] = field(default_factory=list)
    read: dict[str, Passage] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, float] = field(default_factory=dict)
    turns: int = 0
    searches: int = 0
    answer: str | None = None
    failed: bool = False
    stalled: bool = False
    capped: bool = False

    @property
    def active(self) -> bool:
        return self.answer is None and not self.stalled

    def take(self, passages: Sequence[Passage]) -> None:
        """Record `passages` as read (shown to the LLM), in reading order, each once."""
        for passage in passages:
            self.read.setdefault(passage.id, passage)

    def count(self, key: str, by: float = 1.0) -> None:
        self.counts[key] = self.counts.get(key, 0.0) + by

    def finish(self, answer: str, failed: bool = False) -> None:
        self.answer, self.failed = answer, failed

    def stats(self) -> dict[str, float]:
        return {
            "turns": float(self.turns),
            "retrievals": float(self.searches),
            "max_turns_reached": float(self.capped),
            "stalled": float(self.stalled),
            **self.counts,
        }


class TurnMethod(Protocol):
    """What a method supplies to the loop (all but `turn_prompt` and `read_turn` may do nothing)."""

    def begin(self, loop: TurnLoop, states: list[TurnState]) -> None: ...

    def turn_prompt(self, state: TurnState, turn: int) -> Prompt | ContextPrompt: ...

    def turn_params(self, turn: int) -> dict[str, Any]: ...

    def read_turn(self, state: TurnState, generation: Generation, turn: int) -> str | None:
        """Record the turn's output; finish or stall the state, or return the query to search with."""

    def observe(
        self, loop: TurnLoop, states: list[TurnState], queries: list[str], hits: list[list[Passage]]
    ) -> None: ...

    def force_finish(self, loop: TurnLoop, states: list[TurnState]) -> None: ...


class TurnLoop:
    """Runs a `TurnMethod` over a batch: at most `max_turns` turns, top `k` passages per search;
    `batching="question"` makes one call per prompt and per query instead of one per step."""

    def __init__(self, llm: LLM, retriever: Retriever, k: int, max_turns: int, batching: Batching = "step") -> None:
        self.check_settings(k, max_turns, batching)
        self.llm, self.retriever, self.k, self.max_turns = llm, retriever, k, max_turns
        self.one_by_one = one_by_one(batching)

    @staticmethod
    def check_settings(k: int, max_turns: int, batching: Batching) -> None:
        """Refuse settings the loop cannot run with; its methods call this before anything is built."""
        if max_turns < 1 or k < 1:
            raise ValueError(f"max_turns and k must be positive, got max_turns={max_turns}, k={k}")
        one_by_one(batching)

    def run(self, method: TurnMethod, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[TurnState]:
        states = [TurnState(ex, cost) for ex, cost in zip(examples, costs)]
        method.begin(self, states)
        for turn in range(1, self.max_turns + 1):
            active = [s for s in states if s.active]
            if not active:
                break
            prompts = [method.turn_prompt(s, turn) for s in active]
            generations = self.generate(active, prompts, "turn", **method.turn_params(turn))
            asking: list[tuple[TurnState, str]] = []
            for state, generation in zip(active, generations):
                state.turns += 1
                query = method.read_turn(state, generation, turn)
                if query is not None and state.active:
                    asking.append((state, query))
            if asking:
                searched = [s for s, _ in asking]
                queries = [q for _, q in asking]
                method.observe(self, searched, queries, self.search(searched, queries))
        for state in states:
            state.capped = state.active
        ended = [s for s in states if s.answer is None]
        if ended:
            method.force_finish(self, ended)
        return states

    def generate(
        self, states: Sequence[TurnState], prompts: Sequence[Prompt | ContextPrompt], stage: str, **params: Any
    ) -> list[Generation]:
        """One generation per prompt, each charged to its state's question."""
        return llm_step(self.llm, prompts, [s.cost for s in states], stage, self.one_by_one, **params)

    def search(self, states: Sequence[TurnState], queries: Sequence[str], k: int | None = None) -> list[list[Passage]]:
        """The top `k` passages per query, each search charged to (and counted by) its state's question; the
        method records what it shows the LLM with `TurnState.take`."""
        hits = retrieval_step(
            self.retriever, queries, k or self.k, [s.cost for s in states], one_by_one=self.one_by_one
        )
        for state in states:
            state.searches += 1
        return [[h.passage for h in question] for question in hits]


def transcript_context(segments: Sequence[str], separator: str = "") -> Context:
    """A transcript as a shortenable context: its segments, the newest first in priority, so the budget rule
    drops the oldest ones first; what was dropped shows as one `OMITTED` mark where it was."""
    units = tuple(Passage(str(i), "", text) for i, text in reversed(list(enumerate(segments))))

    def render(kept: Sequence[Passage]) -> str:
        shown = sorted(kept, key=lambda p: int(p.id))
        lead = [OMITTED + "\n"] if len(shown) < len(units) else []
        return separator.join(lead + [p.text for p in shown])

    return Context(units, render)
