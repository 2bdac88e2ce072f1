"""PruningRAG (spec/pruningrag.md): prune knowledge sources per question, then answer from what is kept.

    python eval.py +method=pruningrag data=crag                          # routed (the un-tuned base router)
    python eval.py +method=pruningrag data=crag method.strategy=fixed method.fixed=[web,api]   # no pruning
    python eval.py +method=pruningrag data=tatqa method.router.options=tatqa method.fixed=[table,text]

Coarse pruning: a router reads the question alone and picks sources (`strategy=routed`), or the sources are
fixed (`strategy=fixed`: no pruning when all are named). Only the chosen sources are consulted, each with its
own fine-grained pruning (`hoprag.routers.sources`), and one answer prompt reads what they kept (P18: the
answerer is unchanged; the LLM's own knowledge means no references section; a router that abstains gives
"I don't know" without an answer call). Per question the record keeps the route, the router's reply, the
context tokens the answerer read, and the answer's parse result (`### Final Answer` in the CoT variant).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import Context
from hoprag.methods.base import Method, MethodOutput
from hoprag.routers.options import ABSTAIN
from hoprag.routers.prompts import answer_prompt, final_answer, icl_examples
from hoprag.routers.sources.base import Source
from hoprag.routers.sources.web import format_references

STRATEGIES = ("routed", "fixed")
IDK_ANSWER = "I don't know"


class Router(Protocol):
    def route(self, questions: Sequence[str], costs: Sequence[Cost | None] | None = None) -> list[Any]: ...


def reference_context(passages: Sequence[Passage]) -> Context:
    """The kept evidence as the references section (`format_references`: "No References", one chunk raw,
    several in `<DOC>` blocks), shortenable: over the input budget the last ones go first."""
    return Context(tuple(passages), format_references)


class PruningRAG(Method):
    """`sources` maps source names (web, api, llm, table, text) to sources, or to null for a source the
    router may choose that is not available in this run (e.g. the mock API offline): a route to it is counted
    (`method/route_unavailable`) and answered from the other chosen sources, or none; `router` routes when
    `strategy=routed`, `fixed` names the sources otherwise. `cot` / `icl` / `cross_domain` / `grounded` pick
    the answer prompt's variant (P6: the code's routed pipeline: no CoT, same-domain ICL; the paper: CoT with
    two cross-domain examples)."""

    name = "pruningrag"
    needs_retriever = False
    # Sources and routers that need an LLM (the API source's NER, the router) may be given unfinished, as
    # Hydra `_partial_` objects: the method completes them with its own LLM, or the router with `router_llm`.

    def __init__(
        self,
        llm: LLM,
        sources: Mapping[str, Source | Callable[..., Source] | None],
        router: Router | Callable[..., Router] | None = None,
        router_llm: LLM | None = None,
        strategy: str = "routed",
        fixed: Sequence[str] = ("web",),
        cot: bool = False,
        icl: int = 0,
        cross_domain: bool = False,
        grounded: bool = True,
        retriever: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, None, **kwargs)
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if strategy == "routed" and router is None:
            raise ValueError("strategy=routed needs a router")
        unknown = [s for s in fixed if sources.get(s) is None] if strategy == "fixed" else []
        if unknown:
            raise ValueError(f"fixed sources {unknown} are not configured (sources: {sorted(sources)})")
        sources = {name: _complete(source, llm) for name, source in sources.items()}
        router = _complete(router, router_llm or llm) if strategy == "routed" else None
        self.sources, self.router, self.strategy, self.fixed = sources, router, strategy, tuple(fixed)
        self.cot, self.icl, self.cross_domain, self.grounded = cot, icl, cross_domain, grounded
        icl_examples(None, icl, cross_domain)  # checks icl's range now, not mid-run

    def routes(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[tuple[tuple[str, ...], Any]]:
        if self.strategy == "fixed":
            return [(self.fixed, None) for _ in examples]
        decisions = self.router.route([ex.question for ex in examples], costs)
        for d in decisions:
            missing = [s for s in d.sources if s != ABSTAIN and s not in self.sources]
            if missing:
                raise ValueError(f"the router chose {missing}, which are not configured (sources: {sorted(self.sources)})")
        return [(tuple(d.sources), d) for d in decisions]

    def evidence(self, examples: Sequence[QAExample], routes: Sequence[tuple[str, ...]], costs: Sequence[Cost]):
        """Each question's kept passages: only the sources it was routed to are consulted."""
        kept: list[list[Passage]] = [[] for _ in examples]
        for name, source in self.sources.items():
            if source is None:
                continue
            asked = [i for i, route in enumerate(routes) if name in route]
            if not asked:
                continue
            found = source.fetch([examples[i] for i in asked], [costs[i] for i in asked])
            for i, passages in zip(asked, found):
                kept[i] += passages
        return kept

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        routed = self.routes(examples, costs)
        routes = [sources for sources, _ in routed]
        kept = self.evidence(examples, routes, costs)
        prompts, asking = [], []
        for i, (ex, sources, passages) in enumerate(zip(examples, routes, kept)):
            if ABSTAIN in sources:
                continue
            only_llm = all(s == "llm" or self.sources[s] is None for s in sources)
            examples_icl = icl_examples(ex.metadata.get("domain"), self.icl, self.cross_domain)
            refs = None if only_llm else reference_context(passages)
            prompts.append(answer_prompt(ex.question, str(ex.metadata.get("query_time", "")), refs, examples_icl,
                                         cot=self.cot, grounded=self.grounded))  # fmt: skip
            asking.append(i)
        replies = self.llm.generate(prompts, costs=[costs[i] for i in asking], stage="answer", **self.generation)
        by_question = dict(zip(asking, (r[0] for r in replies)))
        outputs = []
        for i, (ex, (sources, decision), passages) in enumerate(zip(examples, routed, kept)):
            reply = by_question.get(i)
            text = reply.text if reply is not None else ""
            prediction, parsed = final_answer(text, self.cot) if reply is not None else (IDK_ANSWER, True)
            trace = {"sources": list(sources), "output": text}
            if decision is not None:
                trace["router_reply"] = decision.reply
            stats = {f"route/{s}": float(s in sources) for s in [*self.sources, ABSTAIN]}
            stats["route_unavailable"] = float(any(self.sources.get(s, 0) is None for s in sources))
            stats["context_tokens"] = float(sum(self.llm.count_tokens([p.text for p in passages]))) if passages else 0.0
            if decision is not None:
                stats["router_parse_failed"] = float(not decision.parsed)
            outputs.append(MethodOutput(prediction, passages, trace, not parsed, stats))
        return outputs


def _complete(component: Any, llm: LLM) -> Any:
    """A Hydra `_partial_` component finished with `llm=`; anything else as it is."""
    return component(llm=llm) if isinstance(component, functools.partial) else component
