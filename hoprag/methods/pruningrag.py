"""PruningRAG (spec/pruningrag.md): prune knowledge sources per question, then answer from what is kept.

    python eval.py +method=pruningrag data=crag                          # routed (the un-tuned base router)
    python eval.py +method=pruningrag data=crag method.strategy=fixed method.fixed=[web,api]   # no pruning
    python eval.py +method=pruningrag data=tatqa method.router.options=tatqa method.fixed=[table,text]
    python eval.py +method=pruningrag data=crag method.strategy=fallback method.fixed=[web]   # LLM → web

Coarse pruning: a router reads the question alone and picks sources (`strategy=routed`), or the sources are
fixed (`strategy=fixed`: no pruning when all are named), or the LLM answers alone first and the `fixed`
sources are consulted only for the questions where it abstains (`strategy=fallback`, Table 3's "LLM → X";
abstaining is CRAG's missing rule: "i don't know" anywhere in the answer). Only the chosen sources are
consulted, each with its own fine-grained pruning (`hoprag.sources`), and one answer prompt reads what
they kept (P18: the answerer is unchanged; the LLM's own knowledge means no references section; a router that
abstains gives "I don't know" without an answer call). Per question the record keeps the route, the router's
reply, the context tokens the answerer read, the answer's parse result (`### Final Answer` in the CoT
variant), the LLM-alone reply of a fallback run, and the figures a source reports per question
(`question_stats`, merged into the stats as `<source>/<key>`). A tuned router comes with its contract
(`hoprag.routers.router`): an export made for other options, another router prompt or another base model is
refused when the method is built, and a question it was trained on is refused before any is routed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import Context
from hoprag.methods.base import Method, MethodOutput, complete
from hoprag.metrics.crag import MISSING, crag_outcomes
from hoprag.routers.options import ABSTAIN
from hoprag.routers.prompts import answer_prompt, final_answer, icl_examples
from hoprag.sources.base import Source
from hoprag.sources.web import format_references

STRATEGIES = ("routed", "fixed", "fallback")
IDK_ANSWER = "I don't know"


class Router(Protocol):
    def route(self, questions: Sequence[str], costs: Sequence[Cost | None] | None = None) -> list[Any]: ...

    def check_unseen(self, examples: Sequence[QAExample]) -> None: ...


def reference_context(passages: Sequence[Passage]) -> Context:
    """The kept evidence as the references section (`format_references`: "No References", one chunk raw,
    several in `<DOC>` blocks), shortenable: over the input budget the last ones go first."""
    return Context(tuple(passages), format_references)


class PruningRAG(Method):
    """`sources` maps source names (web, api, llm, table, text) to sources, or to null for a source the
    router may choose that is not available in this run (e.g. the mock API offline): a route to it is counted
    (`method/route_unavailable`) and answered from the other chosen sources, or none; `router` routes when
    `strategy=routed`, `fixed` names the sources otherwise (with `fallback`: those asked after the LLM alone
    abstains). `cot` / `icl` / `cross_domain` / `grounded` pick the answer prompt's variant (P6: the code's
    routed pipeline: no CoT, same-domain ICL; the paper: CoT with two cross-domain examples; `grounded=false`:
    the LLM may combine the references with its own knowledge, Table 3's "LLM + X")."""

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
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, None, **kwargs)
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
        if strategy == "routed" and router is None:
            raise ValueError("strategy=routed needs a router")
        unknown = [s for s in fixed if sources.get(s) is None] if strategy != "routed" else []
        if unknown:
            raise ValueError(f"fixed sources {unknown} are not configured (sources: {sorted(sources)})")
        if strategy == "fallback" and (not fixed or "llm" in fixed):
            raise ValueError(f"strategy=fallback asks the LLM alone first; `fixed` names the sources asked after "
                             f"it abstains, and not llm: {list(fixed)}")  # fmt: skip
        sources = {name: _complete(source, f"sources.{name}", llm) for name, source in sources.items()}
        router = _complete(router, "router", router_llm or llm) if strategy == "routed" else None
        self.sources, self.router, self.strategy, self.fixed = sources, router, strategy, tuple(fixed)
        self.cot, self.icl, self.cross_domain, self.grounded = cot, icl, cross_domain, grounded
        icl_examples(None, icl, cross_domain)  # checks icl's range now, not mid-run

    def check_questions(self, examples: Sequence[QAExample]) -> None:
        """A trained router (or the API source's trained domain classifier) is never evaluated on a question
        it was trained on: refused in the preflight, before the first batch."""
        if self.router is not None:
            self.router.check_unseen(examples)
        for source in self.sources.values():
            check = getattr(source, "check_questions", None)  # optional: sources with a trained part
            if check is not None:
                check(examples)

    def routes(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[tuple[tuple[str, ...], Any]]:
        if self.strategy == "fixed":
            return [(self.fixed, None) for _ in examples]
        self.router.check_unseen(examples)  # again per batch, for callers that skip the runner's preflight
        decisions = self.router.route([ex.question for ex in examples], costs)
        for d in decisions:
            missing = [s for s in d.sources if s != ABSTAIN and s not in self.sources]
            if missing:
                raise ValueError(f"the router chose {missing}, which are not configured (sources: {sorted(self.sources)})")
        return [(tuple(d.sources), d) for d in decisions]

    def evidence(
        self, examples: Sequence[QAExample], routes: Sequence[tuple[str, ...]], costs: Sequence[Cost]
    ) -> tuple[list[list[Passage]], list[dict[str, float]]]:
        """Each question's kept passages, and the figures the sources it consulted report for it: a source's
        `question_stats` (one dict per question of its last `fetch`), merged as `<source>/<key>`. Only the
        sources a question was routed to are consulted."""
        kept: list[list[Passage]] = [[] for _ in examples]
        figures: list[dict[str, float]] = [{} for _ in examples]
        for name, source in self.sources.items():
            if source is None:
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

    def ask(
        self,
        examples: Sequence[QAExample],
        routes: Sequence[tuple[str, ...]],
        kept: Sequence[list[Passage]],
        costs: Sequence[Cost],
        asking: Sequence[int],
        stage: str = "answer",
    ) -> dict[int, str]:
        """The raw replies, by question index, of one batched answer call for the questions `asking`: each
        prompt reads its question's kept passages, or none when only the LLM's own knowledge is routed."""
        if not asking:
            return {}
        prompts = []
        for i in asking:
            ex = examples[i]
            only_llm = all(s == "llm" or self.sources.get(s) is None for s in routes[i])
            refs = None if only_llm else reference_context(kept[i])
            examples_icl = icl_examples(ex.metadata.get("domain"), self.icl, self.cross_domain)
            prompts.append(answer_prompt(ex.question, str(ex.metadata.get("query_time", "")), refs, examples_icl,
                                         cot=self.cot, grounded=self.grounded))  # fmt: skip
        replies = self.llm.generate(prompts, costs=[costs[i] for i in asking], stage=stage, **self.generation)
        return {i: r[0].text for i, r in zip(asking, replies)}

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        if self.strategy == "fallback":
            return self.fallback(examples, costs)
        routed = self.routes(examples, costs)
        routes = [sources for sources, _ in routed]
        kept, figures = self.evidence(examples, routes, costs)
        replies = self.ask(examples, routes, kept, costs, [i for i, r in enumerate(routes) if ABSTAIN not in r])
        outputs = []
        for i, ((sources, decision), passages) in enumerate(zip(routed, kept)):
            text = replies.get(i)
            prediction, parsed = final_answer(text, self.cot) if text is not None else (IDK_ANSWER, True)
            trace = {"sources": list(sources), "output": text or ""}
            stats = self.route_stats(sources, passages)
            if decision is not None:
                trace["router_reply"] = decision.reply
                stats["router_parse_failed"] = float(not decision.parsed)
            outputs.append(MethodOutput(prediction, passages, trace, not parsed, {**stats, **figures[i]}))
        return outputs

    def fallback(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        """LLM → X: every question is asked of the LLM alone (one batched call, stage "llm_first"); only those
        whose answer is missing by CRAG's rule consult the `fixed` sources and are asked again with what they
        kept (a second batched call, stage "answer"), whose answer is final. Both calls are charged to the
        question; its record keeps both replies and which pass answered (`answered_by`: llm | fallback)."""
        everyone = list(range(len(examples)))
        first = self.ask(examples, [("llm",)] * len(examples), [[] for _ in examples], costs, everyone, "llm_first")
        first_answers = [final_answer(first[i], self.cot) for i in everyone]
        # the evaluator's missing check (its first, made before any gold answer is looked at)
        outcomes = crag_outcomes([(ex.question, [], answer) for ex, (answer, _) in zip(examples, first_answers)])
        abstained = {i for i, (outcome, _) in enumerate(outcomes) if outcome == MISSING}
        routes = [self.fixed if i in abstained else () for i in everyone]
        kept, figures = self.evidence(examples, routes, costs)
        second = self.ask(examples, routes, kept, costs, sorted(abstained))
        outputs = []
        for i in everyone:
            used = i in second
            prediction, parsed = final_answer(second[i], self.cot) if used else first_answers[i]
            consulted = ("llm", *routes[i])
            trace = {"sources": list(consulted), "answered_by": "fallback" if used else "llm",
                     "llm_output": first[i], "output": second[i] if used else first[i]}  # fmt: skip
            stats = {**self.route_stats(consulted, kept[i]), "fallback_used": float(used), **figures[i],
                     "llm_first_parse_failed": float(not first_answers[i][1])}  # its fallback: "I don't know"
            outputs.append(MethodOutput(prediction, kept[i], trace, not parsed, stats))
        return outputs

    def route_stats(self, sources: Sequence[str], passages: Sequence[Passage]) -> dict[str, float]:
        """Which sources a question consulted, whether one of them was unavailable, and the context tokens its
        answer prompt read."""
        stats = {f"route/{s}": float(s in sources) for s in [*self.sources, ABSTAIN]}
        stats["route_unavailable"] = float(any(self.sources.get(s, 0) is None for s in sources))
        stats["context_tokens"] = float(sum(self.llm.count_tokens([p.text for p in passages]))) if passages else 0.0
        return stats


def _complete(component: Any, key: str, llm: LLM) -> Any:
    """A Hydra `_partial_` component (`method.<key>`) finished with `llm=`; a finished one as it is."""
    return complete(component, key, llm=llm) if isinstance(component, functools.partial) else component
