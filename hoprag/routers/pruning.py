"""Coarse-grained pruning (spec/pruningrag.md §5, P18): which knowledge sources each question consults.

PruningRAG answers from what the chosen sources keep with its own prompt; the "+ Pruning" rows of Tables 1
and 8 put any answering framework on the same choice (`hoprag.methods.WithPruning`). Both hold one
`SourcePruning`: the sources (`web`, `api`, `llm`, `table`, `text`; null for one that is not available in this
run, e.g. the mock API offline), and either a router that reads the question alone (`strategy=routed`) or the
same sources for every question (`strategy=fixed`; `fallback` is PruningRAG's "LLM → X", where `fixed` names
the sources asked after the LLM abstains).

The question's CRAG domain (which false-premise examples the answer prompt shows, which API endpoints the mock
API pipeline may call) comes from one classifier, asked once per question whoever asks first (`domain`: `llm`,
the answering LLM zero-shot, the default; `embedding`, a trained head; `gold`, the question's own label: the
oracle ablation, reported as `run.oracle_domain`). A router or domain classifier that was trained is never
asked about a question it was trained on (`check_unseen`, in the runner's preflight and again per batch).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from hoprag.config import check_given, complete
from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.routers.options import ABSTAIN
from hoprag.sources.api.domain import DomainClassifier, DomainGuess, check_domain, domain_classifier
from hoprag.sources.base import Source

STRATEGIES = ("routed", "fixed", "fallback")
IDK_ANSWER = "I don't know"  # a question the router abstains on (`none_policy=abstain`), answered with no call
ROUTER_INPUTS = ("llm",)  # what the pruning completes a `_partial_` router with (its config must not set them)


class Router(Protocol):
    kind: str  # "tuned", "untuned" or "classifier": what `run.router` reports

    def route(self, questions: Sequence[str], costs: Sequence[Cost | None] | None = None) -> list[Any]: ...

    def check_unseen(self, examples: Sequence[QAExample]) -> None: ...


class RememberedDomains:
    """A domain classifier asked at most once per question id: the answer prompt's examples and the API source
    read the same guess, and an LLM classifier's tokens are charged once."""

    def __init__(self, classifier: DomainClassifier) -> None:
        self.classifier = classifier
        self.oracle = classifier.oracle
        self._guesses: dict[str, DomainGuess] = {}

    def check_unseen(self, examples: Sequence[QAExample]) -> None:
        check = getattr(self.classifier, "check_unseen", None)  # a trained classifier only
        if check is not None:
            check(examples)

    def classify(self, examples: Sequence[QAExample], costs: Sequence[Cost | None]) -> list[DomainGuess]:
        todo = [i for i, ex in enumerate(examples) if ex.id not in self._guesses]
        if todo:
            guesses = self.classifier.classify([examples[i] for i in todo], [costs[i] for i in todo])
            self._guesses.update((examples[i].id, g) for i, g in zip(todo, guesses))
        return [self._guesses[ex.id] for ex in examples]


class SourcePruning:
    """The sources, the router or the fixed choice, and the question's domain, built for one answering LLM.

    `sources` maps names to sources, Hydra `_partial_` sources (completed here with `llm=`, and `domain=` for a
    source class that declares `uses_domain`), or null; `router` is completed with `router_llm` (null: the
    answering LLM, an un-tuned router; a `_partial_` one is built only when the strategy routes). `domain` is `llm` | `embedding` (with `domain_export`) | `gold`."""

    def __init__(
        self,
        llm: LLM,
        sources: Mapping[str, Source | Callable[..., Source] | None],
        router: Router | Callable[..., Router] | None = None,
        router_llm: LLM | Callable[[], LLM] | None = None,
        strategy: str = "routed",
        fixed: Sequence[str] = ("web",),
        domain: str = "llm",
        domain_export: str | None = None,
    ) -> None:
        self.check_settings(sources, router, strategy, fixed, domain, domain_export)
        self.domains = RememberedDomains(domain_classifier(domain, llm, export=domain_export))
        self.sources = {name: self._source(source, name, llm) for name, source in sources.items()}
        if isinstance(router_llm, functools.partial):  # a tuned router given unbuilt: built only to route
            router_llm = router_llm() if strategy == "routed" else None
        routed = strategy == "routed"
        self.router = _complete(router, "router", **dict.fromkeys(ROUTER_INPUTS, router_llm or llm)) if routed else None
        self.strategy, self.fixed = strategy, tuple(fixed)

    @staticmethod
    def check_settings(
        sources: Mapping[str, Any],
        router: Any,
        strategy: str,
        fixed: Sequence[str],
        domain: str,
        domain_export: str | None,
    ) -> None:
        """Refuse a strategy these sources and router cannot follow, a domain classifier that cannot be built
        (`check_domain`), and a `_partial_` router or source config that sets what the pruning completes it
        with; given their configs (a null source or router: none), PruningRAG and "+ Pruning" call this before
        anything is built."""
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if strategy == "routed" and router is None:
            raise ValueError("strategy=routed needs a router")
        unknown = [s for s in fixed if sources.get(s) is None] if strategy != "routed" else []
        if unknown:
            raise ValueError(f"fixed sources {unknown} are not configured (sources: {sorted(sources)})")
        check_domain(domain, domain_export)
        for name, source in sources.items():
            if _unfinished(source):
                from hydra.utils import get_class  # here: hydra.utils is slow to import

                check_given(f"sources.{name}", source, source_inputs(get_class(source["_target_"])))
        if strategy == "routed" and _unfinished(router):
            check_given("router", router, ROUTER_INPUTS)

    def _source(self, source: Any, name: str, llm: LLM) -> Any:
        if not isinstance(source, functools.partial):
            return source
        inputs = {"llm": llm, "domain": self.domains}
        return _complete(source, f"sources.{name}", **{key: inputs[key] for key in source_inputs(source.func)})

    def check_unseen(self, examples: Sequence[QAExample]) -> None:
        """Refuse questions a trained router, domain classifier or source part was trained on."""
        if self.router is not None:
            self.router.check_unseen(examples)
        self.domains.check_unseen(examples)
        for source in self.sources.values():
            check = getattr(source, "check_questions", None)  # optional: sources with a trained part
            if check is not None:
                check(examples)

    def routes(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[tuple[tuple[str, ...], Any]]:
        """(sources, the router's decision or None) per question: the fixed sources, or the router's choice."""
        if self.router is None:
            return [(self.fixed, None) for _ in examples]
        self.router.check_unseen(examples)  # again per batch, for callers that skip the runner's preflight
        decisions = self.router.route([ex.question for ex in examples], costs)
        for d in decisions:
            missing = [s for s in d.sources if s != ABSTAIN and s not in self.sources]
            if missing:
                raise ValueError(f"the router chose {missing}, which are not configured (sources: {sorted(self.sources)})")
        return [(tuple(d.sources), d) for d in decisions]

    def available(self, route: Sequence[str]) -> tuple[str, ...]:
        """The sources of a route that can be consulted here (not the LLM's own knowledge, not a null source)."""
        return tuple(s for s in route if s not in ("llm", ABSTAIN) and self.sources.get(s) is not None)

    def evidence(
        self, examples: Sequence[QAExample], routes: Sequence[Sequence[str]], costs: Sequence[Cost], only: str | None = None
    ) -> tuple[list[list[Passage]], list[dict[str, float]]]:
        """Each question's kept passages (every source it was routed to, or just `only`), and the figures those
        sources report for it: a source's `question_stats` (one dict per question of its last `fetch`), merged
        as `<source>/<key>`."""
        kept: list[list[Passage]] = [[] for _ in examples]
        figures: list[dict[str, float]] = [{} for _ in examples]
        for name, source in self.sources.items():
            if source is None or (only is not None and name != only):
                continue
            asked = [i for i, route in enumerate(routes) if name in route]
            if not asked:
                continue
            found = source.fetch([examples[i] for i in asked], [costs[i] for i in asked])
            for i, passages in zip(asked, found):
                kept[i] += passages
            reported = getattr(source, "question_stats", None)
            if reported is None:
                continue
            if len(reported) != len(asked):
                raise RuntimeError(f"source {name!r} reported question_stats for {len(reported)} questions; "
                                   f"it was asked {len(asked)}")  # fmt: skip
            for i, stats in zip(asked, reported):
                figures[i].update({f"{name}/{key}": float(value) for key, value in stats.items()})
        return kept, figures

    def route_stats(self, sources: Sequence[str]) -> dict[str, float]:
        """Which sources a question consulted, and whether one of them was unavailable here."""
        stats = {f"route/{s}": float(s in sources) for s in [*self.sources, ABSTAIN]}
        stats["route_unavailable"] = float(any(self.sources.get(s, 0) is None for s in sources))
        return stats

    def run_info(self) -> dict[str, Any]:
        """What qualifies every figure of the run: the router (`tuned` with its export, `untuned`, `classifier`,
        or `none` when the sources are fixed) and whether the domain is the gold label (the oracle)."""
        router = "none" if self.router is None else getattr(self.router, "kind", "untuned")
        info: dict[str, Any] = {"router": router, "oracle_domain": bool(self.domains.oracle)}
        export = getattr(self.router, "export", None)
        if export:
            info["router_export"] = str(export)
        labelled_by = getattr(self.router, "labelled_by", None)
        if labelled_by:  # how its training labels were made: a stand-in judge's labels say so in every run
            info["router_labels"] = labelled_by
        return info


def source_inputs(source_class: Any) -> tuple[str, ...]:
    """What the pruning completes a `_partial_` source with: the answering LLM, and the question's domain
    classifier for a source class that declares `uses_domain` (its config must not set them)."""
    return ("llm", "domain") if getattr(source_class, "uses_domain", False) else ("llm",)


def _unfinished(config: Any) -> bool:
    """Whether a router's or source's config is a `_partial_` one, which the pruning completes."""
    return isinstance(config, Mapping) and bool(config.get("_partial_"))


def _complete(component: Any, key: str, **given: Any) -> Any:
    """A Hydra `_partial_` component (`method.<key>`) finished with `given`; a finished one as it is."""
    return complete(component, key, **given) if isinstance(component, functools.partial) else component
