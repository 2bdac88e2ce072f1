"""ProbTree baseline (Cao et al. 2023; PruneRAG's Table 1 baseline, spec/prunerag.md §6, §9.1): the LLM writes
a question decomposition tree in one call, then every node, leaves first, is answered closed-book, open-book
over its own retrieval and (non-leaves) from its children's answers, keeping the most confident.

    python eval.py +method=probtree data=hotpotqa [method.k=5] [method.max_nodes=16] [method.batching=question]

The engine lives in `hoprag.search.probtree` (tree reading, confidences, rounds). The confidences are token
log-probs, so a server without them is refused before any question (`required_capabilities`); a generation
that still comes without them is counted (`missing_logprobs`) and scores the floor. The prediction is the
root's chosen answer; `parse_failed` when that answer's output had no "So the answer is:" (the extractor's
reading of it is used). `stats`: nodes, depth, rounds, searches, which kind of answer won at how many nodes,
decomposition parse failures, answers without the marker or log-probs, `capped`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.probtree.prompts import DECOMPOSE
from hoprag.search.probtree.reasoning import KINDS, Reasoner
from hoprag.search.probtree.tree import Tree, build_tree
from hoprag.search.steps import capped, llm_step, one_by_one

# the official code's requests: up to 256 tokens, greedy, an answer ends at a blank line
ANSWERING = {"max_new_tokens": 256, "temperature": 0.0, "stop": ["\n\n"]}
DECOMPOSING = {"max_new_tokens": 256, "temperature": 0.0, "stop": ["\nQ:"]}


class ProbTree(Method):
    """`k` passages per search; `max_nodes` the per-question ceiling of the tree (ours; counted as `capped`);
    `confidence` explanation (the paper's) or answer_tokens (a small-model aid); `decompose_generation` and
    `answer_generation` the sampling of the two kinds of call; `batching` step or question."""

    name = "probtree"

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        k: int = 5,
        max_nodes: int = 16,
        confidence: str = "explanation",
        decompose_generation: Mapping[str, Any] | None = None,
        answer_generation: Mapping[str, Any] | None = None,
        batching: str = "step",
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.check_max_nodes(max_nodes)
        self.max_nodes = max_nodes
        self.one_by_one = one_by_one(batching)
        self.decompose_generation = dict(DECOMPOSING if decompose_generation is None else decompose_generation)
        self.reasoner = Reasoner(
            llm, retriever, k, confidence, ANSWERING if answer_generation is None else answer_generation,
            self.one_by_one, fallback=lambda text: self.extractor(text).answer,
        )  # fmt: skip

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """`max_nodes`, `batching` and the reasoner's `confidence`, as the constructor checks them."""
        cls.check_max_nodes(setting(cls, settings, "max_nodes"))
        one_by_one(setting(cls, settings, "batching"))
        Reasoner.check_confidence(setting(cls, settings, "confidence"))

    @staticmethod
    def check_max_nodes(max_nodes: int) -> None:
        if max_nodes < 1:
            raise ValueError(f"method.max_nodes must be at least 1 (the root), got {max_nodes}")

    def required_capabilities(self) -> dict[str, str]:
        return {"logprobs": "a server returning token log-probs (ProbTree picks answers by them)"}

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        prompts = [DECOMPOSE(question=ex.question) for ex in examples]
        replies = llm_step(self.llm, prompts, costs, "decompose", self.one_by_one, **self.decompose_generation)
        trees = [build_tree(ex.question, reply, self.max_nodes) for ex, reply in zip(examples, replies)]
        rounds = self.reasoner([t.root for t in trees], costs)
        outputs = []
        for ex, tree, reply, n_rounds in zip(examples, trees, replies, rounds):
            chosen = tree.root.chosen
            trace = {"decomposition": reply.text, "tree": tree.root.to_dict()}
            if tree.capped:
                trace["capped"] = capped(ex.question, "max_nodes", self.max_nodes, questions_not_added=tree.capped)
            stats = {**tree_stats(tree), "rounds": float(n_rounds)}
            outputs.append(MethodOutput(chosen.answer, _passages(tree), trace, not chosen.marked, stats))
        return outputs


def tree_stats(tree: Tree) -> dict[str, float]:
    """Per-question figures of an answered tree (the runner averages them into `method/<key>`)."""
    nodes = list(tree.root.walk())
    candidates = [c for n in nodes for c in n.candidates]
    leaves = [n for n in nodes if not n.children]
    stats = {
        "tree_nodes": float(len(nodes)),
        "tree_depth": float(max(n.depth for n in nodes)),
        "retrieval_calls": float(len(nodes) + sum(len(n.topics) for n in leaves)),
        "decomposition_failed": float(tree.parse_failed),
        "answers_without_marker": float(sum(not c.marked for c in candidates)),
        "unscored_answers": float(sum(not c.scored for c in candidates)),
        "capped": float(bool(tree.capped)),
    }
    for kind in KINDS:
        stats[f"wins_{kind}"] = float(sum(n.chosen.kind == kind for n in nodes))
    return stats


def _passages(tree: Tree) -> list[Passage]:
    """Every passage read anywhere in the tree, in the order of the rounds that read them, distinct by id."""
    seen: dict[str, Passage] = {}
    for node in sorted(tree.root.walk(), key=lambda n: n.round):
        for p in node.passages:
            seen.setdefault(p.id, p)
    return list(seen.values())
