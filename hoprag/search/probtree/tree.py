"""ProbTree's understanding phase: the LLM's hierarchical question decomposition, read into a tree.

The decomposition is one JSON object mapping a question to its list of sub-questions; the first key is the
root's, and a sub-question that is itself a key is decomposed further (the official code's
`1_build_tree.py`). Its confidence (`decomposition_score`) is the mean token log-prob of the sub-question
list, from `[` to `]` (`2_postprocess.py`). As in the code, a list that repeats its own question makes the
node a leaf, and a sub-question that names a sibling's answer (<1>, <2> ...) is not decomposed further.

A reply without a readable object is a parse failure: the tree is the root alone (answered closed-book and
open-book), counted by the caller. The tree holds at most `max_nodes` nodes (ours; the paper has no
ceiling): sub-questions past it are not added, and are kept in `Tree.capped` for the trace.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from hoprag.data.types import Passage
from hoprag.llm.types import Generation
from hoprag.search.prunerag.parsing import token_offsets

REFERENCE = re.compile(r"<(\d+)>")
_LIST = re.compile(r'"\s*:\s*(\[[^\[\]]*\])')


@dataclass(eq=False)
class Node:
    """A (sub-)question: `question` as decomposed (references unresolved), `index` its 1-based place among
    its siblings, `depth` 1 for the root. The reasoning phase fills `resolved` (references replaced by the
    siblings' answers), `topics` (those answers), `passages`, `candidates` and `chosen`."""

    question: str
    depth: int = 1
    index: int = 1
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    decomposition_score: float | None = None
    resolved: str = ""
    topics: list[str] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    candidates: list[Any] = field(default_factory=list)
    chosen: Any = None
    round: int = 0  # the reasoning round that answered it (1 for the first)

    def walk(self):
        """This node and its descendants, breadth first."""
        queue = [self]
        while queue:
            node = queue.pop(0)
            yield node
            queue.extend(node.children)

    def siblings(self) -> list[Node]:
        return self.parent.children if self.parent else [self]

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.resolved or self.question,
            "decomposition_score": self.decomposition_score,
            "passages": [p.id for p in self.passages],
            "candidates": [c.to_dict() for c in self.candidates],
            "chosen": self.chosen.kind if self.chosen else None,
            "children": [c.to_dict() for c in self.children],
        }


@dataclass
class Tree:
    root: Node
    parse_failed: bool = False
    capped: list[str] = field(default_factory=list)


def mean_logprob(generation: Generation, start: int, end: int) -> float | None:
    """Mean log-prob of the generated tokens overlapping text[start:end]; None without log-probs or tokens."""
    if generation.logprobs is None:
        return None
    picked = [
        lp
        for (a, b), lp in zip(token_offsets(generation.text, generation.tokens), generation.logprobs)
        if a < end and b > start
    ]
    return sum(picked) / len(picked) if picked else None


def read_decomposition(generation: Generation) -> dict[str, tuple[list[str], float | None]] | None:
    """question → (sub-questions, their list's mean log-prob), in the reply's order; None when unreadable."""
    text = generation.text
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        return None
    try:
        tree = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    if not isinstance(tree, dict) or not tree:
        return None
    spans = [m.span(1) for m in _LIST.finditer(text, start, end + 1)]
    read = {}
    for i, (question, subs) in enumerate(tree.items()):
        if not isinstance(subs, list) or not all(isinstance(s, str) and s.strip() for s in subs):
            return None
        score = mean_logprob(generation, *spans[i]) if len(spans) == len(tree) else None
        read[question.strip()] = ([s.strip() for s in subs], score)
    return read


def build_tree(question: str, generation: Generation, max_nodes: int) -> Tree:
    """The tree of `question` from its decomposition reply (module docstring)."""
    decomposition = read_decomposition(generation)
    root = Node(question)
    if decomposition is None:
        return Tree(root, parse_failed=True)
    tree, count = Tree(root), 1
    queue = [(root, next(iter(decomposition)))]
    while queue:
        node, key = queue.pop(0)
        subs, score = decomposition[key]
        if key in subs or not subs:
            continue  # the code's rule: a list that repeats its question is no decomposition
        if count + len(subs) > max_nodes:
            tree.capped.extend(subs)
            continue
        node.decomposition_score = score
        count += len(subs)
        for i, sub in enumerate(subs, 1):
            child = Node(sub, node.depth + 1, i, node)
            node.children.append(child)
            path = {n.question for n in _ancestors(child)}
            if sub in decomposition and not REFERENCE.search(sub) and sub not in path:
                queue.append((child, sub))
    return tree


def _ancestors(node: Node) -> list[Node]:
    found = []
    while node.parent is not None:
        node = node.parent
        found.append(node)
    return found
