"""The LLM source router: the question alone in, an option letter out (spec/pruningrag.md §5.2–5.3).

One batched `generate` call routes every question: the option set's prompt per question, greedy decoding
with a few new tokens, and the reply read by `parse_option` (a reply naming no option follows
`none_policy`, and is counted in `parse_failures`). The same class is the tuned router (an LLM with the
LoRA adapter loaded) and the un-tuned one of Table 8 (the base model): only the LLM differs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hoprag.cost import Cost
from hoprag.llm.base import LLM
from hoprag.routers.options import NONE_POLICIES, OPTION_SETS, OptionSet, parse_option

DEFAULT_GENERATION = {"max_new_tokens": 4, "temperature": 0.0}


@dataclass(frozen=True)
class RouteDecision:
    """The sources chosen for one question, the router's raw reply, and whether the reply named an option."""

    sources: tuple[str, ...]
    reply: str
    parsed: bool


def option_set(options: str | OptionSet) -> OptionSet:
    """An `OptionSet` given by name (crag_single, crag_subset, tatqa) or as itself."""
    if isinstance(options, OptionSet):
        return options
    if options not in OPTION_SETS:
        raise ValueError(f"unknown option set {options!r}; one of {sorted(OPTION_SETS)}")
    return OPTION_SETS[options]


def check_none_policy(none_policy: str) -> str:
    if none_policy not in NONE_POLICIES:
        raise ValueError(f"none_policy must be one of {NONE_POLICIES}, got {none_policy!r}")
    return none_policy


class LLMRouter:
    """Routes questions with an LLM prompted by an option set; `parse_failures` counts replies naming no option."""

    def __init__(
        self,
        llm: LLM,
        options: str | OptionSet = "crag_single",
        none_policy: str = "api",
        generation: Mapping[str, Any] | None = None,
    ) -> None:
        self.llm = llm
        self.options = option_set(options)
        self.none_policy = check_none_policy(none_policy)
        self.generation = dict(DEFAULT_GENERATION if generation is None else generation)
        self.parse_failures = 0

    def route(self, questions: Sequence[str], costs: Sequence[Cost | None] | None = None) -> list[RouteDecision]:
        """One decision per question, from one batched call charged to `costs` under the stage "route"."""
        prompts = [self.options.messages(q) for q in questions]
        outputs = self.llm.generate(prompts, costs=costs, stage="route", **self.generation)
        decisions = []
        for samples in outputs:
            reply = samples[0].text if samples else ""
            sources, parsed = parse_option(reply, self.options, self.none_policy)
            decisions.append(RouteDecision(sources, reply, parsed))
        self.parse_failures += sum(not d.parsed for d in decisions)
        return decisions
