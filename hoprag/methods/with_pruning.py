"""Any framework that reads passages, with PruningRAG's source pruning in front: Tables 1, 7 and 8's "+ Pruning".

    python eval.py +method=hyde +pruning=routed data=crag              # HyDE + Pruning (the router's choice)
    python eval.py +method=standard_rag +pruning=fixed data=crag       # Naive RAG on 5 web pages, no pruning
    python eval.py +method=iter_retgen +pruning=fixed 'pruning.fixed=[web,api]' data=crag

The paper plugs each baseline into pruning unchanged (spec/pruningrag.md P18, §9 "+ Pruning applies source
routing and the fine-grained pruning before the method runs"): the router (or a fixed choice) picks each
question's sources, and the framework then runs as it always does, with its own prompts, queries, `k` and
rounds, searching only what those sources hold (`hoprag.sources.scoped.ScopedSources`: the question's web
chunks ranked per query, its API passages). A question routed to the LLM's own knowledge (or only to sources
not available in this run) is answered with no retrieval by `closed_book` (the `no_retrieval` method with the
same LLM); one the router abstains on (`none_policy=abstain`) is answered "I don't know" with no call.

Questions of a batch routed to sources are answered in one framework call, so the framework batches its steps
across them as it does alone. Each record keeps the framework's trace and stats, plus under `pruning` the
route, the router's reply and who answered (`framework`, `closed_book`, `abstain`); the route figures
(`route/<source>`, `route_unavailable`, `router_parse_failed`) and the sources' own (`web/<key>`, `api/<key>`)
are averaged as `method/<key>`. The run is recorded as `<framework>+pruning`, and `run.router` says whether its
router was tuned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.methods.no_retrieval import NoRetrieval
from hoprag.routers.options import ABSTAIN
from hoprag.routers.pruning import IDK_ANSWER, Router, SourcePruning
from hoprag.sources.base import Source
from hoprag.sources.scoped import ScopedSources

CLOSED_BOOK_PROMPT = ChatPrompt("Answer the question with a short phrase.", "Question: {question}\nAnswer:")


class WithPruning(Method):
    """`framework`: the `_partial_` method being pruned (completed here with the LLM and the scoped retriever);
    `sources`, `router`, `router_llm`, `strategy` (routed | fixed), `fixed`, `domain`, `domain_export`: its
    `SourcePruning` (`hoprag.routers.pruning`); `closed_book`: the `_partial_` method for questions routed to no
    source that can be searched here."""

    name = "pruning"  # a run is recorded as "<framework>+pruning" (the instance's `name`)
    needs_retriever = False  # the framework's retriever is built here, over each question's sources
    completes = {"framework": ("llm", "retriever"), "closed_book": ("llm",)}
    completed_as = {"framework": "method", "closed_book": "pruning.closed_book"}

    def __init__(
        self,
        llm: LLM,
        framework: Callable[..., Method],
        sources: Mapping[str, Source | Callable[..., Source] | None],
        router: Router | Callable[..., Router] | None = None,
        router_llm: LLM | None = None,
        strategy: str = "routed",
        fixed: Sequence[str] = ("web",),
        domain: str = "llm",
        domain_export: str | None = None,
        closed_book: Callable[..., Method] | None = None,
    ) -> None:
        super().__init__(llm, None)
        self.check_framework(strategy, getattr(framework, "func", framework), getattr(framework, "keywords", {}))
        self.pruning = SourcePruning(llm, sources, router, router_llm, strategy, fixed, domain, domain_export)
        self.retriever = ScopedSources(self.pruning.sources)
        self.framework = self.complete_part("framework", framework, llm=llm, retriever=self.retriever)
        closed_book = closed_book or (lambda llm: NoRetrieval(llm, CLOSED_BOOK_PROMPT))
        self.closed_book = self.complete_part("closed_book", closed_book, llm=llm)
        self.name = f"{self.framework.name}+pruning"  # type: ignore[misc]

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """The strategy, the framework and the sources, as the constructor and its `SourcePruning` check them;
        `settings["framework"]` is the framework's settings (the runner's `cfg.method`, with its `_target_`)."""
        from hydra.utils import get_class  # here: hydra.utils is slow to import, and this module is imported widely

        framework = settings["framework"]
        strategy = setting(cls, settings, "strategy")
        cls.check_framework(strategy, get_class(framework["_target_"]), framework)
        SourcePruning.check_settings(settings["sources"], setting(cls, settings, "router"), strategy,
                                     setting(cls, settings, "fixed"), setting(cls, settings, "domain"),
                                     setting(cls, settings, "domain_export"))  # fmt: skip
        super().check_settings(settings)  # the framework's and closed_book's configs against what they are given

    @staticmethod
    def check_framework(strategy: str, method_class: type[Method], framework_settings: Mapping[str, Any]) -> None:
        if strategy == "fallback":
            raise ValueError("+pruning takes strategy routed or fixed; the LLM-first fallback is PruningRAG's own "
                             "(+method=pruningrag method.strategy=fallback)")  # fmt: skip
        if not method_class.reads_passages(framework_settings):
            raise ValueError(f"+pruning gives a framework that reads passages the sources a router chose; "
                             f"{method_class.__name__} with these settings reads none")  # fmt: skip

    def required_capabilities(self) -> dict[str, str]:
        return {**self.closed_book.required_capabilities(), **self.framework.required_capabilities()}

    def check_questions(self, examples: Sequence[QAExample]) -> None:
        self.pruning.check_unseen(examples)
        self.framework.check_questions(examples)

    def run_info(self) -> dict[str, Any]:
        return {**self.framework.run_info(), **self.pruning.run_info(), "pruning": self.pruning.strategy}

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        routed = self.pruning.routes(examples, costs)
        routes = [sources for sources, _ in routed]
        searched = [i for i, r in enumerate(routes) if ABSTAIN not in r and self.pruning.available(r)]
        closed = [i for i, r in enumerate(routes) if ABSTAIN not in r and not self.pruning.available(r)]
        outputs: dict[int, MethodOutput] = {}
        figures: dict[int, dict[str, float]] = {}
        if searched:
            self.retriever.scope([examples[i] for i in searched], [routes[i] for i in searched],
                                 [costs[i] for i in searched])  # fmt: skip
            answered = self.framework.answer([examples[i] for i in searched], [costs[i] for i in searched])
            outputs.update(zip(searched, answered))
            figures.update(zip(searched, self.retriever.question_stats))
        if closed:
            outputs.update(zip(closed, self.closed_book.answer([examples[i] for i in closed], [costs[i] for i in closed])))
        results = []
        for i, (sources, decision) in enumerate(routed):
            out = outputs.get(i) or MethodOutput(IDK_ANSWER)
            by = "framework" if i in figures else "closed_book" if i in outputs else "abstain"
            out.trace["pruning"] = {"sources": list(sources), "answered_by": by}
            out.stats.update(self.pruning.route_stats(sources))
            out.stats.update(figures.get(i, {}))
            if decision is not None:
                out.trace["pruning"]["router_reply"] = decision.reply
                out.stats["router_parse_failed"] = float(not decision.parsed)
            results.append(out)
        return results
