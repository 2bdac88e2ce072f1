"""A readable view of one TreeRare (or Tree-Retrieval) trace tree, for `scripts/runs/show_treerare.py`.

The trace keeps the processed nodes in post-order (`QuestionTree.to_dict()`: children before parents, the
root last, children as indices into the list), which is how the traversal runs but not how a tree reads; the
view draws it from the root down, each node with its label and height, its phrase, its queries, the titles
of its passages, its evidence and the fallbacks it took, so a wrong answer can be traced to the node that
queried badly, retrieved nothing useful or summarised it away.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

TITLES = 3  # passage titles shown per node (then the count of the rest)
SHORT = 200  # characters of evidence shown per node without `outputs`


def one_line(text: str) -> str:
    return " ".join(text.split())


def shorten(text: str, width: int = SHORT) -> str:
    text = one_line(text)
    return text if len(text) <= width else text[: width - 2] + " …"


def format_tree(tree: Mapping[str, Any], outputs: bool = False, brief: bool = False) -> str:
    """`tree` (a `QuestionTree.to_dict()` record) drawn from the root down, one block per node.

    Without `outputs` the evidence is cut to ~200 characters; with it, the evidence is whole and each node's
    raw QG reply (and its SAG reply when it is not the evidence itself, e.g. an empty one) is added. `brief`
    keeps each node's phrase, queries and fallbacks: the tree's shape and what it searched, in half the lines.
    """
    nodes: Sequence[Mapping[str, Any]] = tree["nodes"]
    sentences = f", first of {tree['sentences']} sentences parsed" if tree.get("sentences", 1) > 1 else ""
    if tree.get("fallback") or not nodes:
        reason = tree.get("fallback") or "no node processed"
        return f"{tree['kind'].upper()} tree: none ({reason}); the question itself was searched instead{sentences}"
    height = max(n["height"] for n in nodes)
    head = f"{tree['kind'].upper()} tree: {len(nodes)} of {tree['parse_nodes']} parse nodes processed, height {height}"
    if tree.get("capped"):
        head += f" (capped at max_nodes={tree['capped']['value']}: {tree['capped']['skipped']} deeper nodes skipped)"
    lines = [head + sentences]

    def add(index: int, prefix: str, last: bool, top: bool) -> None:
        node = nodes[index]
        branch = "" if top else ("└─ " if last else "├─ ")
        lines.append(f"{prefix}{branch}[{node['label']} h{node['height']} #{index}] {node['phrase']}")
        inner = prefix + ("" if top else ("   " if last else "│  "))
        detail = inner + ("│  " if node["children"] else "   ")
        queries = node["queries"]
        if queries == [node["phrase"]]:
            lines.append(f"{detail}queries: (the phrase)")
        elif queries:
            lines.append(f"{detail}queries: {' | '.join(queries)}")
        titles = [] if brief else [p["title"] for p in node["passages"]]
        if titles:
            rest = f" | … +{len(titles) - TITLES}" if len(titles) > TITLES else ""
            lines.append(f"{detail}docs ({len(titles)}): {' | '.join(titles[:TITLES])}{rest}")
        if not brief:
            lines.extend(f"{detail}{line}" for line in evidence_lines(node, outputs))
        if node["fallbacks"]:
            lines.append(f"{detail}fallbacks: {', '.join(node['fallbacks'])}")
        for i, child in enumerate(node["children"]):
            add(child, inner, i == len(node["children"]) - 1, False)

    add(len(nodes) - 1, "", True, True)
    return "\n".join(lines)


def evidence_lines(node: Mapping[str, Any], outputs: bool) -> list[str]:
    """The node's evidence (one SAG paragraph, or the raw passages of a fallback or an ablation) and, with
    `outputs`, its raw LLM replies."""
    evidence: Sequence[str] = node["evidence"]
    show = one_line if outputs else shorten
    lines = []
    if outputs and node.get("qg_output") is not None:
        lines.append(f"qg: {one_line(node['qg_output'])}")
    if len(evidence) == 1:
        lines.append(f"evidence: {show(evidence[0])}")
    elif evidence and outputs:
        lines += [f"evidence [{i}]: {one_line(unit)}" for i, unit in enumerate(evidence, start=1)]
    elif evidence:
        lines.append(f"evidence ({len(evidence)} units): {shorten(' | '.join(evidence))}")
    sag = node.get("sag_output")
    if outputs and sag is not None and [sag.strip()] != [e.strip() for e in evidence]:
        lines.append(f"sag: {one_line(sag) or '(empty)'}")
    return lines
