"""Syntax trees of a question and the nodes TreeRare processes (spec/treerare.md §2.4).

A parser (`hoprag.search.treerare.parsers`) turns a question into `SyntaxNode`s: a phrase (the node's
sub-phrase of the question), a label (a constituency label such as NP, or a dependency relation) and
children left to right. `prune` then keeps what the paper processes: a child is kept when its phrase has at
least `min_tokens` whitespace tokens, its label is not a non-informative type and it is not a bare wh-word;
a dropped child's whole subtree goes with it, and the root is always kept. The kept nodes come in post-order
(children left to right, each before its parent, the root last) with their height in the pruned tree, which
is what the level-batched traversal groups by. A tree over the traversal's ceiling (`max_nodes`) keeps only
its nodes `nearest_root`.
"""

from __future__ import annotations

import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

WH_WORDS = frozenset({"who", "when", "where", "what", "which"})
# punctuation, determiners and conjunctions: Penn Treebank tags (constituency), UD and spaCy relations (dependency)
NON_INFORMATIVE = frozenset({
    ".", ",", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP", "PUNCT", "DT", "PDT", "CC",
    "punct", "det", "predet", "cc", "preconj",
})  # fmt: skip


@dataclass
class SyntaxNode:
    """One node of a parse: its sub-phrase of the question, its label and its children (left to right)."""

    phrase: str
    label: str
    children: list[SyntaxNode] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        return len(self.phrase.split())

    def walk(self) -> Iterator[SyntaxNode]:
        """Every node, post-order."""
        for child in self.children:
            yield from child.walk()
        yield self

    def to_dict(self) -> dict[str, Any]:
        return {"phrase": self.phrase, "label": self.label, "children": [c.to_dict() for c in self.children]}


@dataclass
class SyntaxTree:
    """A question's parse: `kind` "dt" (dependency) or "ct" (constituency). Only the first sentence is
    parsed, as the official code does; `sentences` says how many the question had (logged when > 1)."""

    question: str
    root: SyntaxNode
    kind: str
    sentences: int = 1


@dataclass
class KeptNode:
    """A node TreeRare processes: its post-order position among the kept nodes of its tree, its kept
    children's positions (left to right) and its height (1 when it has no kept children)."""

    index: int
    phrase: str
    label: str
    children: list[int]
    height: int

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "phrase": self.phrase, "label": self.label, "children": self.children,
                "height": self.height}  # fmt: skip


def is_punctuation(phrase: str) -> bool:
    return all(ch in string.punctuation or ch.isspace() for ch in phrase)


def keep(node: SyntaxNode, min_tokens: int = 3) -> bool:
    """Whether a child node is processed (the root always is)."""
    return (
        node.tokens >= min_tokens
        and node.label not in NON_INFORMATIVE
        and not is_punctuation(node.phrase)
        and node.phrase.strip().lower() not in WH_WORDS
    )


def prune(tree: SyntaxTree, min_tokens: int = 3, collapse_unary: bool = False) -> list[KeptNode]:
    """The kept nodes in post-order, the root last. `collapse_unary` processes a chain of nodes with the
    same phrase once (the paper's count processes each, e.g. ROOT → SBARQ, both the whole question)."""
    kept: list[KeptNode] = []

    def visit(node: SyntaxNode) -> int:
        while collapse_unary and len(node.children) == 1 and node.children[0].phrase == node.phrase:
            node = node.children[0]
        children = [visit(c) for c in node.children if keep(c, min_tokens)]
        height = 1 + max((kept[c].height for c in children), default=0)
        kept.append(KeptNode(len(kept), node.phrase, node.label, children, height))
        return len(kept) - 1

    visit(tree.root)
    return kept


def nearest_root(nodes: list[KeptNode], max_nodes: int) -> list[KeptNode]:
    """At most `max_nodes` of the kept nodes (post-order, the root last): those nearest the root, breadth
    first from it, children left to right, again in post-order with their heights recomputed. A tree over the
    ceiling thus loses its deepest nodes, each with its subtree (as pruning drops a short phrase's: their
    words are in their ancestors' phrases), and keeps the root and the phrases closest to the question."""
    if len(nodes) <= max_nodes:
        return nodes
    chosen: set[int] = set()
    queue = [len(nodes) - 1]
    while queue and len(chosen) < max_nodes:
        index = queue.pop(0)
        chosen.add(index)
        queue += nodes[index].children
    kept: list[KeptNode] = []

    def visit(index: int) -> int:
        node = nodes[index]
        children = [visit(c) for c in node.children if c in chosen]
        height = 1 + max((kept[c].height for c in children), default=0)
        kept.append(KeptNode(len(kept), node.phrase, node.label, children, height))
        return len(kept) - 1

    visit(len(nodes) - 1)
    return kept


def subtree(nodes: list[KeptNode], index: int) -> list[int]:
    """The kept descendants of node `index`, itself excluded, in post-order."""
    out: list[int] = []
    for child in nodes[index].children:
        out += subtree(nodes, child) + [child]
    return out


def from_bracketed(text: str) -> SyntaxNode:
    """A constituency tree from its bracketed form, e.g. `(ROOT (SBARQ (WHNP (WP Who)) ...))` as Stanza and
    the Penn Treebank print it. A pre-terminal `(WP Who)` becomes a node without children; every node's
    phrase is its words joined by single spaces."""
    tokens = text.replace("(", " ( ").replace(")", " ) ").split()
    if not tokens or tokens[0] != "(":
        raise ValueError(f"not a bracketed parse: {text[:80]!r}")
    pos = 0

    def node() -> SyntaxNode:
        nonlocal pos
        pos += 1  # "("
        if pos >= len(tokens) or tokens[pos] in "()":
            raise ValueError(f"a bracket without a label at token {pos} of {text[:80]!r}")
        label = tokens[pos]
        pos += 1
        children: list[SyntaxNode] = []
        words: list[str] = []
        while pos < len(tokens) and tokens[pos] != ")":
            if tokens[pos] == "(":
                child = node()
                children.append(child)
                words.append(child.phrase)
            else:
                words.append(tokens[pos])
                pos += 1
        if pos >= len(tokens):
            raise ValueError(f"unbalanced brackets in {text[:80]!r}")
        pos += 1  # ")"
        return SyntaxNode(" ".join(words), label, children)

    root = node()
    if pos != len(tokens):
        raise ValueError(f"text after the tree's closing bracket in {text[:80]!r}")
    return root
