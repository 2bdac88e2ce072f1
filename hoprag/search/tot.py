"""Tree of Thoughts, breadth-first (Yao et al. 2023, "Tree of Thoughts", §3 and its BFS algorithm), for QA.

A state is the question's reasoning so far: a list of thoughts, one reasoning step each. At each of `depth`
steps, every kept state that has not answered samples `branching` next thoughts (the "sample" thought
generator: one prompt per state, n = `branching`, cut at the end of the line); each new state is valued by
the LLM (`evaluations` samples of a value prompt whose last line must be sure / likely / impossible, scored
20 / 1 / 0.001 and summed: ToT's value map); the best `breadth` states are kept (greedy selection, ties by
order). A state whose last thought holds `#FINAL` has answered: it is kept with its value and not expanded.
Adapted for QA, as TreeRare's ToT baseline needs (spec/treerare.md App. B): the last step asks for the
final answer, a question stops once every kept state has answered, and the answer is that of the best kept
state that answered (none: the best state's last thought, read with the extractor's fallback).

As ToT's value cache does, a new state identical to another of the same question and step is not valued
again and scores 0 (counted as `duplicate_thoughts`). A value reply whose last line is none of the three
words scores 0 (counted as `value_unparsed`); an empty thought is dropped (counted as `empty_thoughts`).
Every step makes one batched call for all thoughts of all questions, and one for all their values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ContextPrompt, Prompt
from hoprag.llm.types import Generation
from hoprag.search.cot import CoTPrompt
from hoprag.search.steps import llm_samples

VALUES = {"sure": 20.0, "likely": 1.0, "impossible": 0.001}
FINAL = re.compile(r"#?\s*FINAL\b")
NUMBERING = re.compile(r"^\s*(?:step\s*)?\d+\s*[.):]\s*", re.IGNORECASE)
PROPOSE = (
    "Answer the question one reasoning step at a time. You are given the steps written so far: write only"
    " the next step, one sentence. When the steps so far give the answer, write instead the final line:\n"
)
VALUE = (
    "Judge whether the reasoning steps below are correct and lead to the answer of the question. Reply with"
    " one word on the last line: sure (they answer it correctly), likely (right so far, not finished) or"
    " impossible (wrong or going nowhere)."
)


def steps_text(steps: Sequence[str]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1)) or "none yet"


def value_of(text: str) -> float | None:
    """ToT's value of one evaluation reply: its last non-empty line, lower-cased, without punctuation, must be
    one of VALUES; None otherwise."""
    lines = [line for line in text.splitlines() if line.strip()]
    word = re.sub(r"[^a-z]", "", lines[-1].lower()) if lines else ""
    return VALUES.get(word)


@dataclass
class State:
    steps: tuple[str, ...]
    value: float = 0.0
    votes: list[str] = field(default_factory=list)

    @property
    def final(self) -> bool:
        return bool(self.steps) and FINAL.search(self.steps[-1]) is not None


@dataclass
class Search:
    """One question's search: its kept states, the trace of every step and its counts."""

    question: str
    passages: list[Passage] | None
    cost: Cost
    kept: list[State] = field(default_factory=lambda: [State(())])
    levels: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, float] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return all(s.final for s in self.kept)

    def count(self, key: str, by: float = 1.0) -> None:
        self.counts[key] = self.counts.get(key, 0.0) + by

    def best(self) -> State:
        """The best kept state that answered, else the best kept state (the kept list is sorted best first)."""
        return next((s for s in self.kept if s.final), self.kept[0])


@dataclass
class ThoughtSearch:
    """The BFS above; `prompt` gives the mode, the exemplars and how passages are shown."""

    llm: LLM
    prompt: CoTPrompt
    depth: int = 3
    branching: int = 5
    breadth: int = 5
    evaluations: int = 3
    generation: Mapping[str, Any] = field(default_factory=dict)
    value_generation: Mapping[str, Any] = field(default_factory=dict)
    seeds: Callable[[str, int, int], int] | None = None  # (question, step, stream) -> sampling seed
    one_by_one: bool = False

    def __post_init__(self) -> None:
        for key in ("depth", "branching", "breadth", "evaluations"):
            if getattr(self, key) < 1:
                raise ValueError(f"method.{key} must be positive, got {getattr(self, key)}")

    def run(self, searches: Sequence[Search]) -> None:
        for step in range(1, self.depth + 1):
            active = [s for s in searches if not s.done]
            if not active:
                return
            fresh = self._expand(active, step)
            self._evaluate(active, fresh, step)
            for search in active:
                self._select(search, fresh[id(search)], step)

    def _expand(self, active: Sequence[Search], step: int) -> dict[int, list[State]]:
        """`branching` thoughts for every unanswered kept state, in one call; the new states per question."""
        parents = [(search, state) for search in active for state in search.kept if not state.final]
        prompts = [self.propose(search, state.steps, step == self.depth) for search, state in parents]
        drawn = self._sample(prompts, [search for search, _ in parents], step, 0, self.branching, self.generation)
        fresh: dict[int, list[State]] = {id(s): [] for s in active}
        for (search, state), samples in zip(parents, drawn):
            for sample in samples:
                thought = NUMBERING.sub("", sample.text.strip().split("\n", 1)[0]).strip()
                search.count("thoughts")
                if thought:
                    fresh[id(search)].append(State(state.steps + (thought,)))
                else:
                    search.count("empty_thoughts")
        return fresh

    def _evaluate(self, active: Sequence[Search], fresh: dict[int, list[State]], step: int) -> None:
        """Value every new state once per question and step (a repeat scores 0), in one call."""
        pending: list[tuple[Search, State]] = []
        for search in active:
            seen: set[tuple[str, ...]] = set()
            for state in fresh[id(search)]:
                if state.steps in seen:
                    search.count("duplicate_thoughts")
                    continue
                seen.add(state.steps)
                pending.append((search, state))
        prompts = [self.judge(search, state.steps) for search, state in pending]
        drawn = self._sample(prompts, [s for s, _ in pending], step, 1, self.evaluations, self.value_generation)
        for (search, state), samples in zip(pending, drawn):
            search.count("evaluations", len(samples))
            values = [value_of(g.text) for g in samples]
            search.count("value_unparsed", sum(v is None for v in values))
            state.value = sum(v or 0.0 for v in values)
            state.votes = [g.text.strip() for g in samples]

    def _select(self, search: Search, fresh: list[State], step: int) -> None:
        pool = [s for s in search.kept if s.final] + fresh
        search.kept = sorted(pool, key=lambda s: -s.value)[: self.breadth] or search.kept
        search.counts["depth"] = float(step)
        search.levels.append(
            {
                "step": step,
                "states": [{"steps": list(s.steps), "value": s.value, "votes": s.votes} for s in fresh],
                "kept": [list(s.steps) for s in search.kept],
            }
        )

    def _sample(
        self,
        prompts: Sequence[Prompt | ContextPrompt],
        searches: Sequence[Search],
        step: int,
        stream: int,
        n: int,
        params: Mapping[str, Any],
    ) -> list[list[Generation]]:
        """`n` samples per prompt in one call (stream 0: thoughts, 1: values), each question seeded apart."""
        seeds = None if self.seeds is None else [self.seeds(s.question, step, stream) for s in searches]
        costs = [s.cost for s in searches]
        if not prompts:
            return []
        return llm_samples(self.llm, prompts, costs, "tot", self.one_by_one, seeds=seeds, n=n, **params)

    def propose(self, search: Search, steps: Sequence[str], last: bool) -> Prompt | ContextPrompt:
        """The thought prompt: exemplars as numbered steps (few-shot), the steps so far, the next step; at
        the last step, the final answer."""
        answer = self.prompt.answer_line
        system = self.prompt.instructions(PROPOSE + answer)
        if self.prompt.few_shot:
            shown = "\n\n".join(
                f"Question: {e.question}\nSteps:\n{steps_text([*e.steps, e.final()])}" for e in self.prompt.exemplars
            )
            system += "\n\nExamples:\n\n" + shown
        ask = f"Steps so far:\n{steps_text(steps)}\n"
        ask += f"Write the final line now:\n{answer}\nFinal answer:" if last else "Next step or final answer:"
        return self.prompt.build(system, search.question, ask, search.passages)

    def judge(self, search: Search, steps: Sequence[str]) -> Prompt | ContextPrompt:
        """The value prompt of one state."""
        ask = f"Steps:\n{steps_text(steps)}\nJudgement (sure, likely or impossible):"
        return self.prompt.build(self.prompt.instructions(VALUE), search.question, ask, search.passages)
