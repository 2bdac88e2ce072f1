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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import Context
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.metrics.crag import MISSING, crag_outcomes
from hoprag.routers.options import ABSTAIN
from hoprag.routers.prompts import answer_prompt, final_answer, icl_examples
from hoprag.routers.pruning import IDK_ANSWER, Router, SourcePruning
from hoprag.sources.api.domain import DomainGuess
from hoprag.sources.base import Source
from hoprag.sources.web import format_references


def reference_context(passages: Sequence[Passage]) -> Context:
    """The kept evidence as the references section (`format_references`: "No References", one chunk raw,
    several in `<DOC>` blocks), shortenable: over the input budget the last ones go first."""
    return Context(tuple(passages), format_references)


class PruningRAG(Method):
    """`sources`, `router`, `router_llm`, `strategy`, `fixed`, `domain` and `domain_export` make its
    `SourcePruning` (`hoprag.routers.pruning`): a route to a source that is null here (e.g. the mock API
    offline) is counted (`method/route_unavailable`) and answered from the other chosen sources, or none;
    `fallback` asks the LLM alone first and the `fixed` sources only where it abstains. `cot` / `icl` /
    `cross_domain` / `grounded` pick the answer prompt's variant (P6: the code's routed pipeline: no CoT,
    same-domain ICL; the paper: CoT with two cross-domain examples; `grounded=false`: the LLM may combine the
    references with its own knowledge, Table 3's "LLM + X"); the examples follow the question's domain as
    `domain` gives it."""

    name = "pruningrag"
    needs_retriever = False
    # Sources and routers that need an LLM (the API source's NER, the router) may be given unfinished, as
    # Hydra `_partial_` objects: the pruning completes them with this LLM, or the router with `router_llm`.

    def __init__(
        self,
        llm: LLM,
        sources: Mapping[str, Source | Callable[..., Source] | None],
        router: Router | Callable[..., Router] | None = None,
        router_llm: LLM | None = None,
        strategy: str = "routed",
        fixed: Sequence[str] = ("web",),
        domain: str = "llm",
        domain_export: str | None = None,
        cot: bool = False,
        icl: int = 0,
        cross_domain: bool = False,
        grounded: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, None, **kwargs)
        self.check_fallback(strategy, fixed)
        icl_examples(None, icl, cross_domain)  # checks icl's range now, not mid-run
        self.pruning = SourcePruning(llm, sources, router, router_llm, strategy, fixed, domain, domain_export)
        self.sources, self.router = self.pruning.sources, self.pruning.router
        self.strategy, self.fixed = strategy, tuple(fixed)
        self.cot, self.icl, self.cross_domain, self.grounded = cot, icl, cross_domain, grounded

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """The strategy against `fixed`, `icl`'s range and the sources the strategy needs, as the constructor
        and its `SourcePruning` check them."""
        strategy, fixed = setting(cls, settings, "strategy"), setting(cls, settings, "fixed")
        cls.check_fallback(strategy, fixed)
        icl_examples(None, setting(cls, settings, "icl"), setting(cls, settings, "cross_domain"))
        SourcePruning.check_settings(settings["sources"], setting(cls, settings, "router"), strategy, fixed,
                                     setting(cls, settings, "domain"), setting(cls, settings, "domain_export"))

    @staticmethod
    def check_fallback(strategy: str, fixed: Sequence[str]) -> None:
        if strategy == "fallback" and (not fixed or "llm" in fixed):
            raise ValueError(f"strategy=fallback asks the LLM alone first; `fixed` names the sources asked after "
                             f"it abstains, and not llm: {list(fixed)}")  # fmt: skip

    def check_questions(self, examples: Sequence[QAExample]) -> None:
        """A trained router (or domain classifier, or a source's trained part) is never evaluated on a question
        it was trained on: refused in the preflight, before the first batch."""
        self.pruning.check_unseen(examples)

    def run_info(self) -> dict[str, Any]:
        return {**super().run_info(), **self.pruning.run_info()}

    def ask(
        self,
        examples: Sequence[QAExample],
        routes: Sequence[tuple[str, ...]],
        kept: Sequence[list[Passage]],
        costs: Sequence[Cost],
        asking: Sequence[int],
        stage: str = "answer",
    ) -> tuple[dict[int, str], dict[int, DomainGuess]]:
        """The raw replies, by question index, of one batched answer call for the questions `asking`: each
        prompt reads its question's kept passages, or none when only the LLM's own knowledge is routed; and,
        with `icl`, the domain whose false-premise examples each prompt showed."""
        if not asking:
            return {}, {}
        asked = [examples[i] for i in asking]
        asked_costs = [costs[i] for i in asking]
        guesses = dict(zip(asking, self.pruning.domains.classify(asked, asked_costs))) if self.icl else {}
        prompts = []
        for i in asking:
            ex = examples[i]
            refs = None if not self.pruning.available(routes[i]) else reference_context(kept[i])
            examples_icl = icl_examples(guesses[i].domain if i in guesses else None, self.icl, self.cross_domain)
            prompts.append(answer_prompt(ex.question, str(ex.metadata.get("query_time", "")), refs, examples_icl,
                                         cot=self.cot, grounded=self.grounded))  # fmt: skip
        replies = self.llm.generate(prompts, costs=asked_costs, stage=stage, **self.generation)
        return {i: r[0].text for i, r in zip(asking, replies)}, guesses

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        if self.strategy == "fallback":
            return self.fallback(examples, costs)
        routed = self.pruning.routes(examples, costs)
        routes = [sources for sources, _ in routed]
        kept, figures = self.pruning.evidence(examples, routes, costs)
        replies, guesses = self.ask(examples, routes, kept, costs, [i for i, r in enumerate(routes) if ABSTAIN not in r])
        outputs = []
        for i, ((sources, decision), passages) in enumerate(zip(routed, kept)):
            text = replies.get(i)
            prediction, parsed = final_answer(text, self.cot) if text is not None else (IDK_ANSWER, True)
            trace = {"sources": list(sources), "output": text or ""}
            stats = {**self.route_stats(sources, passages), **icl_domain(guesses.get(i), trace)}
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
        first, guesses = self.ask(examples, [("llm",)] * len(examples), [[] for _ in examples], costs, everyone,
                                  "llm_first")  # fmt: skip
        first_answers = [final_answer(first[i], self.cot) for i in everyone]
        # the evaluator's missing check (its first, made before any gold answer is looked at)
        outcomes = crag_outcomes([(ex.question, [], answer) for ex, (answer, _) in zip(examples, first_answers)])
        abstained = {i for i, (outcome, _) in enumerate(outcomes) if outcome == MISSING}
        routes = [self.fixed if i in abstained else () for i in everyone]
        kept, figures = self.pruning.evidence(examples, routes, costs)
        second, _ = self.ask(examples, routes, kept, costs, sorted(abstained))  # the same domains, remembered
        outputs = []
        for i in everyone:
            used = i in second
            prediction, parsed = final_answer(second[i], self.cot) if used else first_answers[i]
            consulted = ("llm", *routes[i])
            trace = {"sources": list(consulted), "answered_by": "fallback" if used else "llm",
                     "llm_output": first[i], "output": second[i] if used else first[i]}  # fmt: skip
            stats = {**self.route_stats(consulted, kept[i]), "fallback_used": float(used), **figures[i],
                     **icl_domain(guesses.get(i), trace),
                     "llm_first_parse_failed": float(not first_answers[i][1])}  # its fallback: "I don't know"
            outputs.append(MethodOutput(prediction, kept[i], trace, not parsed, stats))
        return outputs

    def route_stats(self, sources: Sequence[str], passages: Sequence[Passage]) -> dict[str, float]:
        """The pruning's route figures, and the context tokens the question's answer prompt read."""
        stats = self.pruning.route_stats(sources)
        stats["context_tokens"] = float(sum(self.llm.count_tokens([p.text for p in passages]))) if passages else 0.0
        return stats


def icl_domain(guess: DomainGuess | None, trace: dict[str, Any]) -> dict[str, float]:
    """The domain whose false-premise examples the prompt showed, into the trace; a reply that named no domain
    (the examples then follow the fallback, `open`) counted as `icl_domain_parse_failed`."""
    if guess is None:
        return {}
    trace["icl_domain"] = guess.domain
    return {"icl_domain_parse_failed": float(not guess.parsed)}
