"""The LLM source router: the question alone in, an option letter out (spec/pruningrag.md §5.2–5.3).

One batched `generate` call routes every question: the option set's prompt per question, greedy decoding
with a few new tokens, and the reply read by `parse_option` (a reply naming no option follows
`none_policy`, and is counted in `parse_failures`). The same class is the tuned router (an LLM with the
LoRA adapter loaded) and the un-tuned one of Table 8 (the base model): only the LLM differs.

A tuned router is loaded with its contract: the export's `router.json` must name this router's option set,
prompt version and the LLM's base model (a mismatch is refused before the first question, naming both
sides of each differing key), and `check_unseen` refuses the questions it was trained on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm.base import LLM
from hoprag.routers.options import NONE_POLICIES, OPTION_SETS, OptionSet, parse_option, prompt_version
from hoprag.training.exports import from_question_record, read_router_settings
from hoprag.training.splits import check_disjoint
from hoprag.utils.bundled import resolve_model_ref
from hoprag.utils.contract import refuse_mismatch

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


def router_contract(options: OptionSet, base_model: str | None = None) -> dict[str, Any]:
    """What a router export records and a run must match: the option set (name and letters), the router
    prompt's version, and for an LLM router the base model its adapter was trained on."""
    contract: dict[str, Any] = {"options": options.name, "letters": list(options.letters),
                                "prompt_version": prompt_version(options)}  # fmt: skip
    if base_model is not None:
        contract["base_model"] = base_model
    return contract


def check_router_export(directory: str | Path, settings: Mapping[str, Any], expected: Mapping[str, Any]) -> None:
    """Refuse a router export made for other settings than the run's, naming each differing key with both
    sides (`options: router 'tatqa', method 'crag_single'`)."""
    refuse_mismatch(f"the router export {directory}", settings, expected,
                    "use a router trained for these settings, or set the run's to the export's",
                    sides=("router", "method"))  # fmt: skip


class LLMRouter:
    """Routes questions with an LLM prompted by an option set; `parse_failures` counts replies naming no option.
    An LLM with a LoRA `adapter` is a tuned router: its export is checked against the options, the prompt and
    the LLM's base model here, and `check_unseen` refuses the questions it was trained on."""

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
        self.trained_on: list[QAExample] = []
        adapter = getattr(llm, "adapter", None)
        # what a run reports as `run.router`: the un-tuned prompt (Table 8's "w/o fine-tuning") or an adapter
        self.kind, self.export = ("tuned", str(adapter)) if adapter else ("untuned", None)
        self.labelled_by: dict[str, Any] | None = None
        if adapter:
            settings = read_router_settings(resolve_model_ref(adapter))
            check_router_export(adapter, settings, router_contract(self.options, getattr(llm, "model", None)))
            self.trained_on = [from_question_record(r) for r in settings.get("trained_on", [])]
            self.labelled_by = settings.get("labelled_by")  # absent in exports made before labels were recorded

    def check_unseen(self, examples: Sequence[QAExample]) -> None:
        """Refuse to route questions (or contexts, or question texts) the tuned router was trained on."""
        check_disjoint(self.trained_on, examples)

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
