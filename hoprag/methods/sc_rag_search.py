"""Self-Correcting RAG, "search only" (spec/self_correcting_rag.md §5, Table 4): the top-k passages, then
NLI-guided MCTS over sampled JSON answers, then AP / CR / Sup of the chosen answer under the same verifier.

Per question, `stats` holds the three faithfulness figures, the search's cost in LLM samples and NLI pairs
(`nli_pairs`: pairs asked for; `nli_forwards` and `nli_calls`: the verifier's cache misses and batched
calls over the batch, shared evenly, as batched wall time is), and the chosen node's reward, value and
visits, and `capped` (1: the search stopped at `method.search.max_llm_calls`, see `hoprag.search.mcts`); the runner
averages them into `method/<key>`. The trace holds the whole tree (with `capped`: after how many simulations).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from hoprag.cost import Cost, charge_evenly
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, ContextPrompt, PassageFormat
from hoprag.methods.base import Method, MethodOutput
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.mcts import AnswerSearch, Node, SearchTree, iter_nodes
from hoprag.search.sc_rag_answer import SNIPPET_SEPARATOR, SNIPPET_TEMPLATE, ParsedAnswer, parse_answer
from hoprag.verifiers.base import Verifier
from hoprag.verifiers.faithfulness import Answered, FaithfulnessScorer
from hoprag.verifiers.reward import CLAIM_TEMPLATE, EvidenceExtractor, NLIReward


class SCRAGSearch(Method):
    """`prompt`'s user template has {question} and {passages} (snippets rendered with `snippet_template`).
    `search` (the MCTS: `AnswerSearch`, its settings `MCTSConfig`'s) and `reward` (`NLIReward`: `weights`
    for entailment, neutral, contradiction and `aggregation` "eq2" or "official") are given unfinished
    (Hydra `_partial_`, or the classes): the reward is completed with `verifier`, `evidence` and
    `claim_template`, which the faithfulness scores read too, the search with the LLM, the retriever, the
    prompt, the answer parser and that reward.
    `answer_prefix` (e.g. `{"answer": "`) is an assistant prefill that starts every sample's JSON for small
    models; the parser reads it back in front of the continuation. None (the paper) leaves the reply free.
    `judge` scores AP / CR / Sup with an independent verifier (the MCTS reward keeps `verifier`); None judges
    with the search's own verifier, which biases the figures in the search's favour (`run_info` says which)."""

    name = "sc_rag_search"
    completes = {"reward": ("verifier", "evidence", "claim_template"),
                 "search": ("llm", "prompt", "parse", "reward", "retriever")}

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        verifier: Verifier,
        prompt: ChatPrompt,
        k: int = 5,
        search: Callable[..., AnswerSearch] = AnswerSearch,
        evidence: EvidenceExtractor | None = None,
        reward: Callable[..., NLIReward] = NLIReward,
        claim_template: str = CLAIM_TEMPLATE,
        snippet_template: str = SNIPPET_TEMPLATE,
        faithfulness: bool = True,
        trace_raw: bool = False,
        answer_prefix: str | None = None,
        judge: Verifier | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.verifier = verifier
        self.prompt = prompt
        self.k = k
        self.snippet_template = snippet_template
        self.trace_raw = trace_raw
        self.answer_prefix = answer_prefix or ""
        evidence = evidence or EvidenceExtractor()
        self.reward = self.complete_part("reward", reward, verifier=verifier, evidence=evidence,
                                         claim_template=claim_template)
        self.judge = judge if judge is not None else verifier
        self.faithfulness = FaithfulnessScorer(self.judge, evidence, claim_template) if faithfulness else None
        self.search = self.complete_part("search", search, llm=llm, prompt=self.render, parse=self.parse,
                                         reward=self.reward, retriever=retriever)  # fmt: skip

    def required_capabilities(self) -> dict[str, str]:
        """An `answer_prefix` is an assistant prefill, which the LLM must continue, not answer anew."""
        if not self.answer_prefix:
            return {}
        return {"prefill": "llm.tokenizer=<the served model's tokenizer> (local chat template), or method.answer_prefix=null"}

    def render(self, question: str, passages: Sequence[Passage]) -> ContextPrompt:
        """The generator prompt; an `answer_prefix` is continued, not answered (the LLM returns what
        follows it). Over the LLM's input budget the last snippets are dropped first."""
        snippets = PassageFormat(self.snippet_template, SNIPPET_SEPARATOR).context(passages)
        return self.prompt.with_context("passages", snippets, prefill=self.answer_prefix, question=question)

    def parse(self, raw: str) -> ParsedAnswer:
        return parse_answer(self.answer_prefix + raw, lambda text: self.extractor(text).answer)

    def contexts(
        self, examples: Sequence[QAExample], costs: Sequence[Cost]
    ) -> tuple[list[list[Passage]], list[dict[str, float]]]:
        """The context each search starts from (here the retriever's top k), with per-question stats."""
        hits = self.retriever.search([ex.question for ex in examples], self.k, costs=costs)
        return [[h.passage for h in found] for found in hits], [{} for _ in examples]

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        contexts, context_stats = self.contexts(examples, costs)
        calls, scored = self.verifier.calls, self.verifier.pairs_scored
        trees = self.search.run([ex.question for ex in examples], contexts, costs)
        chosen = [tree.best() for tree in trees]
        if any(node is None or node.parsed is None for node in chosen):
            raise RuntimeError("a search ended without an answer node")  # impossible with simulations >= 1
        faith: list = [None] * len(trees)
        if self.faithfulness is not None:
            started = time.perf_counter()
            faith = self.faithfulness([_answered(t, n) for t, n in zip(trees, chosen)])
            share = charge_evenly(costs, time.perf_counter() - started)
            for cost in costs:
                cost.seconds["faithfulness"] += share
        nli_calls = (self.verifier.calls - calls) / len(examples)
        nli_forwards = (self.verifier.pairs_scored - scored) / len(examples)
        outputs = []
        for tree, node, f, ctx, extra in zip(trees, chosen, faith, contexts, context_stats):
            stats = {**extra, **self._stats(tree, node)}
            stats.update(nli_calls=nli_calls, nli_forwards=nli_forwards)
            trace = {"output": node.parsed.raw, "reasoning": node.parsed.reasoning, "cited": list(node.parsed.cited)}
            if f is not None:
                stats.update(f.stats())
                stats["nli_pairs"] += f.pairs
                trace["claim_labels"] = list(f.labels)
            trace["tree"] = tree.to_trace(self.trace_raw)
            outputs.append(
                MethodOutput(node.parsed.answer, self._read(ctx, tree), trace, node.parsed.failed, stats)
            )
        return outputs

    def run_info(self) -> dict[str, Any]:
        """Which verifier scored AP / CR / Sup: `search_verifier` (the reward's own, biased) or the judge's model."""
        if self.judge is self.verifier:
            return {**super().run_info(), "judge": "search_verifier"}
        return {**super().run_info(), "judge": str(getattr(self.judge, "model", None) or type(self.judge).__name__)}

    @staticmethod
    def _stats(tree: SearchTree, node: Node) -> dict[str, float]:
        answers = [n for n in iter_nodes(tree.root) if n.parsed is not None]
        return {
            "llm_samples": float(tree.samples),
            "nli_pairs": float(tree.nli_pairs),
            "missing_logprobs": float(tree.missing_logprobs),
            "tree_nodes": float(tree.size),
            "tree_depth": float(max(n.depth for n in iter_nodes(tree.root))),
            "sample_parse_failures": sum(n.parsed.failed for n in answers) / max(len(answers), 1),
            "answer_reward": float(node.reward),
            "answer_value": float(node.q),
            "answer_visits": float(node.visits),
            "context_passages": float(len(tree.root.ctx)),
            "answer_context_passages": float(len(node.ctx)),
            "capped": float(tree.capped is not None),
        }

    @staticmethod
    def _read(context: Sequence[Passage], tree: SearchTree) -> list[Passage]:
        """The starting context, then every passage augment nodes added, in the order they were added."""
        read = {p.id: p for p in context}
        for node in iter_nodes(tree.root):
            for p in node.ctx:
                read.setdefault(p.id, p)
        return list(read.values())


def _answered(tree: SearchTree, node: Node) -> Answered:
    parsed = node.parsed
    return Answered(tree.question, parsed.answer, parsed.reasoning, node.ctx, tuple(parsed.cited_passages(node.ctx)))
