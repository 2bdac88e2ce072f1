"""Turning finished trees into final answers: the "bottom-up backtrace" (spec §2.5).

- `single_call_tree` (default, the official code, which produced the reported numbers): each tree is
  serialized to nested JSON {query, answer, context, children} and one batched LLM call answers every
  question from its tree in `\\boxed{}`. The tree's shown passages are the prompt's context: over the
  LLM's input budget the lowest-ranked ones go first (every node's last passage before any node's
  second-to-last), by the rule of `hoprag.llm.prompts`.
- `recursive` (paper eq. 5, non-default): bottom-up over depths, an entity node's passages are summarized,
  a query node without an accepted answer is answered from its children's results (from its own passages
  when it has none), an accepted answer passes up unchanged; the root answers in `\\boxed{}`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage
from hoprag.llm.base import LLM
from hoprag.llm.prompts import Context, ContextPrompt, Prompt
from hoprag.search.prunerag.builder import passage_formats
from hoprag.search.prunerag.parsing import ANSWER, extract_boxed
from hoprag.search.prunerag.prompts import final_prompt, node_answer_prompt, summary_prompt
from hoprag.search.prunerag.tree import ANSWERED, ENTITY, Node
from hoprag.search.steps import llm_step

AGGREGATIONS = ("single_call_tree", "recursive")

Extract = Callable[[str], str]
"""Reads an answer out of an output without a box (the method passes its `AnswerExtractor`)."""


@dataclass(frozen=True)
class FinalAnswer:
    """The prediction read from the last `\\boxed{}`; without a box it is the fallback's reading of the
    output and `failed` is True (counted by the runner as a parse failure). `node_results` (recursive mode)
    are every node's result, breadth first."""

    prediction: str
    output: str
    failed: bool
    node_results: tuple[str, ...] = ()


def read_boxed(output: str, fallback: Extract | None = None, prefix: str = "") -> tuple[str, bool]:
    """(answer, failed): the last box's content in `prefix + output` (`output` continues a prefilled
    `prefix` such as `\\boxed{`), else `fallback(output)` (the stripped output without one)."""
    boxed = extract_boxed(prefix + output)
    if boxed is not None:
        return boxed, False
    return (fallback(output) if fallback else output.strip()), True


def shows_passages(node: Node, max_depth: int, all_leaves: bool = True, internal_context: bool = False) -> bool:
    """The code's rule: passages are shown for entity nodes, nodes whose latest action was an answer
    (accepted or not) and depth-D nodes; `all_leaves` also shows them for every other leaf (a fix, default
    on: the code drops an undecided leaf above depth D), `internal_context` for all."""
    return (
        node.kind == ENTITY
        or node.last_action == ANSWER
        or node.depth == max_depth
        or (all_leaves and node.is_leaf)
        or internal_context
    )


def serialize(
    node: Node,
    max_depth: int,
    template: str,
    all_leaves: bool = True,
    internal_context: bool = False,
    kept: Mapping[str, Passage] | None = None,
) -> dict[str, Any]:
    """The code's tree JSON, passages as "[Doc i] " lines where `shows_passages`; with `kept` (id → the
    passage as shown, possibly cut), only those passages."""
    shown = shows_passages(node, max_depth, all_leaves, internal_context)
    passages = node.passages if kept is None else [kept[p.id] for p in node.passages if p.id in kept]
    return {
        "query": node.query,
        "answer": node.answer,
        "context": passage_formats(template)[1].render(passages) if shown else "",
        "children": [serialize(c, max_depth, template, all_leaves, internal_context, kept) for c in node.children],
    }


class Aggregator:
    """Final answers for a batch of trees, by `mode` (see the module docstring)."""

    def __init__(
        self,
        llm: LLM,
        mode: str = "single_call_tree",
        max_depth: int = 3,
        passage_template: str = "{title}\n{text}",
        include_context_for_all_leaves: bool = True,
        show_internal_context: bool = False,
        one_by_one: bool = False,
        fallback: Extract | None = None,
        generation: Mapping[str, Any] | None = None,
        answer_prefix: str | None = None,
    ) -> None:
        self.check_mode(mode)
        self.llm, self.mode, self.max_depth = llm, mode, max_depth
        self.template = passage_template
        self.all_leaves, self.internal_context = include_context_for_all_leaves, show_internal_context
        self.one_by_one = one_by_one
        self.fallback = fallback
        self.generation = dict(generation or {})
        self.prefix = answer_prefix or ""  # prefilled start of the boxed answer's reply (small models)

    @staticmethod
    def check_mode(mode: str) -> None:
        """Refuse an unknown `mode`; PruneRAG calls this before anything is built."""
        if mode not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {mode!r}")

    def __call__(self, roots: Sequence[Node], costs: Sequence[Cost | None]) -> list[FinalAnswer]:
        return self._single_call(roots, costs) if self.mode == "single_call_tree" else self._recursive(roots, costs)

    def tree_json(self, root: Node, kept: Sequence[Passage] | None = None) -> str:
        """The serialized tree; with `kept`, only those of its shown passages (as given, possibly cut)."""
        shown = None if kept is None else {p.id: p for p in kept}
        tree = serialize(root, self.max_depth, self.template, self.all_leaves, self.internal_context, shown)
        return json.dumps(tree, ensure_ascii=False, indent=1)

    def tree_context(self, root: Node) -> Context:
        """The shown passages of a tree, by rank across nodes (every node's first passage, then every
        node's second, ...), distinct by id: what a prompt over budget drops from the end."""
        nodes = [n for n in root.walk() if shows_passages(n, self.max_depth, self.all_leaves, self.internal_context)]
        ranked: dict[str, Passage] = {}
        for rank in range(max((len(n.passages) for n in nodes), default=0)):
            for n in nodes:
                if rank < len(n.passages):
                    ranked.setdefault(n.passages[rank].id, n.passages[rank])
        return Context(tuple(ranked.values()), lambda kept: self.tree_json(root, kept))

    def _single_call(self, roots: Sequence[Node], costs: Sequence[Cost | None]) -> list[FinalAnswer]:
        prompts = [
            ContextPrompt(lambda tree, q=root.query: final_prompt(tree, q, self.prefix), self.tree_context(root))
            for root in roots
        ]
        outputs = llm_step(self.llm, prompts, costs, "answer", self.one_by_one, **self.generation)
        answers = []
        for output in outputs:
            prediction, failed = read_boxed(output.text, self.fallback, self.prefix)
            answers.append(FinalAnswer(prediction, self.prefix + output.text, failed))
        return answers

    def _recursive(self, roots: Sequence[Node], costs: Sequence[Cost | None]) -> list[FinalAnswer]:
        """One batched call per depth, deepest first, over every node of every tree that needs one."""
        owner = {id(n): cost for root, cost in zip(roots, costs) for n in root.walk()}
        results: dict[int, str] = {}
        nodes = [n for root in roots for n in root.walk()]
        root_outputs: dict[int, str] = {}
        for depth in range(max(n.depth for n in nodes), 0, -1):
            todo = []
            for node in (n for n in nodes if n.depth == depth):
                if node.status == ANSWERED:
                    results[id(node)] = node.answer
                else:
                    todo.append(node)
            prompts = [self._node_prompt(n, results) for n in todo]
            stage = "answer" if depth == 1 else "aggregate"
            charged = [owner[id(n)] for n in todo]
            outputs = llm_step(self.llm, prompts, charged, stage, self.one_by_one, **self.generation)
            for node, output in zip(todo, outputs):
                if depth == 1:
                    root_outputs[id(node)] = output.text
                    results[id(node)] = read_boxed(output.text, self.fallback, self.prefix)[0]
                else:
                    results[id(node)] = output.text.strip()
        answers = []
        for root in roots:
            trail = tuple(results[id(n)] for n in root.walk())
            if id(root) in root_outputs:
                prediction, failed = read_boxed(root_outputs[id(root)], self.fallback, self.prefix)
                answers.append(FinalAnswer(prediction, self.prefix + root_outputs[id(root)], failed, trail))
            else:  # the root's own answer was accepted: nothing left to aggregate
                answers.append(FinalAnswer(root.answer, root.answer, False, trail))
        return answers

    def _node_prompt(self, node: Node, results: Mapping[int, str]) -> Prompt | ContextPrompt:
        plain, labelled = passage_formats(self.template)
        if node.kind == ENTITY:
            return ContextPrompt(
                lambda text: summary_prompt(node.query, node.parent_query, text), plain.context(node.passages)
            )
        boxed = node.depth == 1
        if node.children:
            evidence = "\n".join(
                f"- {'About ' + c.query if c.kind == ENTITY else c.query}: {results[id(c)]}" for c in node.children
            )
            return node_answer_prompt(node.query, evidence, boxed=boxed, prefix=self.prefix)
        return ContextPrompt(
            lambda text: node_answer_prompt(node.query, text, boxed=boxed, prefix=self.prefix),
            labelled.context(node.passages),
        )
