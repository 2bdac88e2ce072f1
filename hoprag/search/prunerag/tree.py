"""PruneRAG's tree: query nodes (decided by the LLM) and entity nodes (retrieval only), and their views.

A query node is `N_q = (q, d, a)` (paper eq. 1): its query, the top-k passages retrieved with it and an
answer once one is accepted. An entity node `N_e = (e, d)` (eq. 2) is always a leaf and is never sent to
the LLM. Nodes also keep what the run needs to explain itself: status, confidence, raw decision outputs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hoprag.data.types import Passage

# status of a query node after the build (entity nodes are always "entity")
PENDING = "pending"            # queued for a decision (first one, or a retry after a rejected answer)
ANSWERED = "answered"          # answer accepted: a leaf, never expanded again
DECOMPOSED = "decomposed"      # split into sub-query children
ENTITY_PARENT = "entity_parent"  # could be neither answered nor split: entity children retrieve for it
UNRESOLVED = "unresolved"      # never decided (depth D) or its retries ran out: a leaf keeping its passages
PARSE_ERROR = "parse_error"    # the decision output did not parse: a leaf keeping its passages
CAPPED = "capped"              # its split would take the tree over `max_nodes`: not made, a leaf keeping its passages
ENTITY = "entity"


@dataclass(eq=False)
class Node:
    """One node. `kind` is "query" or "entity"; the root has depth 1 and parent None."""

    query: str
    kind: str
    depth: int
    parent: Node | None = None
    passages: list[Passage] = field(default_factory=list)
    status: str = PENDING
    answer: str = ""
    confidence: float | None = None
    last_action: str | None = None  # the type of the latest parsed decision
    rejected: int = 0  # answers rejected for low (or unknown) confidence (each one costs a retry round)
    fallbacks: int = 0  # free-text replies read as answer attempts (`parsing.free_text_answer`)
    repairs: int = 0  # decisions salvaged from broken or cut-off JSON (lenient parsing)
    missing_logprobs: int = 0  # answers whose output came without log-probs: confidence unknown, rejected
    outputs: list[str] = field(default_factory=list)  # raw decision outputs, in order
    error: str = ""  # why the latest decision output did not parse
    children: list[Node] = field(default_factory=list)

    @property
    def parent_query(self) -> str:
        """The goal context of a decision; the question's own parent is literally "ROOT" (as the code)."""
        return self.parent.query if self.parent is not None else "ROOT"

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def add_child(self, query: str, kind: str) -> Node:
        child = Node(query, kind, self.depth + 1, parent=self, status=ENTITY if kind == ENTITY else PENDING)
        self.children.append(child)
        return child

    def walk(self) -> Iterator[Node]:
        """This node and its descendants, breadth first (the order nodes were created and retrieved)."""
        queue = [self]
        while queue:
            node = queue.pop(0)
            yield node
            queue.extend(node.children)

    def to_dict(self) -> dict[str, Any]:
        """The full record for traces (passages by id): what `format_tree` prints."""
        return {
            "query": self.query,
            "kind": self.kind,
            "depth": self.depth,
            "status": self.status,
            "answer": self.answer,
            "confidence": None if self.confidence is None else round(self.confidence, 4),
            "rejected": self.rejected,
            "fallbacks": self.fallbacks,
            "repairs": self.repairs,
            "missing_logprobs": self.missing_logprobs,
            "passages": [p.id for p in self.passages],
            "titles": [p.title for p in self.passages],
            "outputs": list(self.outputs),
            "error": self.error,
            "children": [c.to_dict() for c in self.children],
        }


def tree_stats(root: Node) -> dict[str, float]:
    """Per-question figures of one tree (the runner averages them into `method/<key>`)."""
    nodes = list(root.walk())
    queries = [n for n in nodes if n.kind == "query"]
    return {
        "tree_nodes": len(nodes),
        "entity_nodes": len(nodes) - len(queries),
        "tree_depth": max(n.depth for n in nodes),
        "decision_calls": sum(len(n.outputs) for n in queries),
        "decision_parse_errors": sum(n.status == PARSE_ERROR for n in queries),
        "decision_fallbacks": sum(n.fallbacks for n in queries),
        "decision_repairs": sum(n.repairs for n in queries),
        "expanded": float(len(nodes) > 1),
        "answers_accepted": sum(n.status == ANSWERED for n in queries),
        "answers_rejected": sum(n.rejected for n in queries),
        "missing_logprobs": sum(n.missing_logprobs for n in queries),
        "root_answered": float(root.status == ANSWERED),
        "capped": float(any(n.status == CAPPED for n in queries)),
    }


def format_tree(tree: Mapping[str, Any], width: int = 110, outputs: bool = False) -> str:
    """A readable, indented view of a `Node.to_dict()` record (for the demo and `scripts/runs/show_trees.py`)."""
    lines: list[str] = []

    def cut(line: str) -> str:
        return line if len(line) <= width else line[: width - 2] + " …"

    def add(node: Mapping[str, Any], prefix: str, last: bool, top: bool) -> None:
        branch = "" if top else ("└─ " if last else "├─ ")
        tag = "E" if node["kind"] == ENTITY else "Q"
        # small-model fallbacks and answers without log-probs are flagged inside the tag, where a long query
        # cannot cut them off
        named = (("fallbacks", "free-text"), ("repairs", "repaired"), ("missing_logprobs", "without log-probs"))
        flags = "".join(f", {node[k]} {name}" for k, name in named if node.get(k))
        head = f"{prefix}{branch}[{tag}{node['depth']} {node['status']}{flags}] {node['query']}"
        if node["answer"]:
            head += f"  => {node['answer']!r}"
        if node["confidence"] is not None:
            head += f"  (conf {node['confidence']:.3f})"
        if node["rejected"]:
            head += f"  [{node['rejected']} rejected]"

        lines.append(cut(head))
        inner = prefix + ("" if top else ("   " if last else "│  "))
        if node["titles"]:
            lines.append(cut(f"{inner}   docs: {' | '.join(node['titles'])}"))
        if outputs:
            for out in node["outputs"]:
                lines.append(cut(f"{inner}   llm: {' '.join(out.split())}"))
        children = node["children"]
        for i, child in enumerate(children):
            add(child, inner, i == len(children) - 1, False)

    add(tree, "", True, True)
    return "\n".join(lines)
