"""Tree-Retrieval (spec/treerare.md §2.7): TreeRare's parse tree as a retriever, no LLM reasoning.

    python eval.py +experiment=tree_retrieval data=hotpotqa [reranker@method.search.reranker=none]
    python eval.py +experiment=tree_retrieval data=hotpotqa method.generate=true

Sub-phrase BM25 per kept node, merged over each subtree and reranked against the question
(`hoprag.search.treerare.tree_retrieval`); the root's top `keep` are `retrieved`. No LLM call unless
`generate=true`, which answers with TreeRare's FAG prompt over those passages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm.base import LLM
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.cot import read_final
from hoprag.search.steps import llm_step
from hoprag.search.treerare import prompts as P
from hoprag.search.treerare.traversal import TreeParser, as_evidence, ordered_context, parser_for
from hoprag.search.treerare.tree_retrieval import TreeRetrieval


class TreeRetrievalMethod(Method):
    """`search` is the tree retrieval, given unfinished (Hydra `_partial_`) with its own knobs
    (`TreeRetrieval`'s: reranker, k, keep ...) and completed here with the retriever, the parser of `tree`
    (among `parsers`) and `batching` (level or node), which the FAG answer reads too. `task` picks that
    answer's prompt (multihop or ambiguous) when `generate` is on."""

    name = "tree_retrieval"
    completes = {"search": ("retriever", "parser", "kind", "batching")}

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        parsers: Mapping[str, TreeParser],
        search: Callable[..., TreeRetrieval],
        tree: str = "dt",
        batching: str = "level",
        generate: bool = False,
        task: str = "multihop",
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.check_task(task)
        self.generates, self.task = generate, task
        self.one_by_one = batching == "node"
        self.search = self.complete_part("search", search, retriever=retriever, parser=parser_for(parsers, tree),
                                         kind=tree, batching=batching)  # fmt: skip

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """`task`, and `tree` among the configured parsers, as the constructor checks them."""
        cls.check_task(setting(cls, settings, "task"))
        parser_for(settings["parsers"], setting(cls, settings, "tree"))
        super().check_settings(settings)

    @staticmethod
    def check_task(task: str) -> None:
        if task not in P.TASKS:
            raise ValueError(f"task must be one of {P.TASKS}, got {task!r}")

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        trees, results = self.search.search([ex.question for ex in examples], costs)
        replies: list[Any] = [None] * len(examples)
        if self.generates:
            prompts = [
                P.FAG[self.task].with_context(
                    "context", ordered_context([(as_evidence(h.passage), (r,)) for r, h in enumerate(hits)], P.EVIDENCE),
                    question=ex.question,
                )
                for ex, hits in zip(examples, results)
            ]
            replies = llm_step(self.llm, prompts, costs, "answer", self.one_by_one, **self.generation)
        outputs = []
        for tree, hits, reply in zip(trees, results, replies):
            prediction, failed = read_final(reply.text, self.task, self.extractor) if reply else ("", False)
            trace = {"tree": tree.to_dict(), "scores": [round(h.score, 4) for h in hits]}
            if reply:
                trace["output"] = reply.text
            stats = {k: v for k, v in tree.stats().items() if k in STATS}
            outputs.append(MethodOutput(prediction, [h.passage for h in hits], trace, failed, stats))
        return outputs


STATS = ("tree_nodes", "processed_nodes", "tree_height", "traversal_fallback", "multi_sentence")
