"""Tree-Retrieval (spec/treerare.md §2.7): TreeRare's tree without LLM reasoning.

Every kept node's phrase is itself a BM25 query (top `k`, paper 10, code 30); a node's candidates are its
own hits plus its kept children's results, reranked against the full question (the code's choice; the
reranker is a component, `conf/reranker/`), de-duplicated by passage id and cut to `keep` (15). The root's
list is the result. Levels are batched as in the traversal: per height one search and one rerank call for
every question of a batch. A question the parser cannot parse gets BM25 top-`keep` (counted).
The pool holds hits only: a phrase none of whose terms is in the corpus adds nothing (BM25 gives it no
hit, counted as an empty result), and the reranker only reorders what the pool holds.
"""

from __future__ import annotations

from collections.abc import Sequence

from hoprag.cost import Cost
from hoprag.retrieval.rerankers import Reranker
from hoprag.retrieval.retrievers import Hit, Retriever
from hoprag.search.steps import retrieval_step
from hoprag.search.treerare.traversal import QuestionTree, TreeParser, by_level, start_trees


class TreeRetrieval:
    def __init__(
        self,
        retriever: Retriever,
        parser: TreeParser,
        reranker: Reranker,
        kind: str = "dt",
        k: int = 10,
        keep: int = 15,
        min_tokens: int = 3,
        collapse_unary: bool = False,
        batching: str = "level",
    ) -> None:
        self.retriever, self.parser, self.reranker = retriever, parser, reranker
        self.kind, self.k, self.keep = kind, k, keep
        self.min_tokens, self.collapse_unary = min_tokens, collapse_unary
        self.one_by_one = batching == "node"

    def search(self, questions: Sequence[str], costs: Sequence[Cost]) -> tuple[list[QuestionTree], list[list[Hit]]]:
        """The traversed trees (each node's `passages` = its reranked top `keep`) and each question's result."""
        trees = start_trees(self.parser, questions, self.kind, self.min_tokens, self.collapse_unary)
        kept: dict[tuple[int, int], list[Hit]] = {}
        for level in by_level(trees):
            nodes = [trees[q].nodes[i] for q, i in level]
            level_costs = [costs[q] for q, _ in level]
            hits = retrieval_step(self.retriever, [n.phrase for n in nodes], self.k, level_costs,
                                  "retrieval", self.one_by_one)  # fmt: skip
            candidates = [own + [h for c in n.children for h in kept[q, c]]
                          for (q, _), n, own in zip(level, nodes, hits)]  # fmt: skip
            reranked = self.reranker.rerank([trees[q].question for q, _ in level], candidates, self.keep,
                                            costs=level_costs)  # fmt: skip
            for (q, i), node, top in zip(level, nodes, reranked):
                kept[q, i] = top
                node.queries = [node.phrase]
                node.passages = [h.passage for h in top]
        failed = [q for q, t in enumerate(trees) if t.fallback]
        fallback = retrieval_step(self.retriever, [questions[q] for q in failed], self.keep,
                                  [costs[q] for q in failed])  # fmt: skip
        results: list[list[Hit]] = [kept.get((q, len(t.nodes) - 1), []) for q, t in enumerate(trees)]
        for q, hits in zip(failed, fallback):
            trees[q].fallback_passages = [h.passage for h in hits]
            results[q] = hits
        return trees, results
