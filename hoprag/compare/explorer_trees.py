"""The question explorer's drawings of a record's trace (`hoprag.compare.explorer`): each method's tree or hops
turned into one drawable shape, and the hop (or tree node) each read passage came from.

A drawable node is a dict: `t` its text, `b` a badge (kind, status), `d` details as [key, value] pairs, `c` its
children, `x` 1 when the method chose it, `n` 1 when it was rejected or cut. Known traces:

- PruneRAG (`trace.tree`: nested `query` / `kind` / `status` / `answer` / `confidence` / `children`);
- ProbTree (`trace.tree`: nested `question` / `candidates` / `chosen` / `children`);
- TreeRare and tree retrieval (`trace.tree.nodes`: the syntax tree's kept nodes in post-order, children by
  position, the root last);
- MCTS, i.e. SC-RAG's search (`trace.tree.nodes`: flat, each with `id` and `parent`; `chosen` the answer node);
- TreeHop (`trace.hops`: passage ids per hop, `trace.scores` alike).

Every other key of the trace, and a trace of a shape not known here, is drawn as a readable nested list of
its keys and items. Strings are cut at `TEXT` characters and lists at `ITEMS` items, saying so, so a page of
thousands of questions stays small.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

TEXT = 400  # characters of one string in a drawn trace
ITEMS = 60  # items of one list (and keys of one dict) in a drawn trace
NODES = 400  # nodes of one drawn tree


def cut(text: Any, limit: int = TEXT) -> str:
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


def scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def node(text: str, badge: str = "", details: Mapping[str, Any] | None = None, children: list | None = None,
         chosen: bool = False, cut_off: bool = False) -> dict[str, Any]:  # fmt: skip
    """A drawable node; details with an empty value (None, "", [], 0 counts are kept) are left out."""
    out: dict[str, Any] = {"t": cut(text)}
    if badge:
        out["b"] = badge
    pairs = [[k, cut(v if isinstance(v, str) else _short(v))] for k, v in (details or {}).items()
             if v is not None and v != "" and v != []]  # fmt: skip
    if pairs:
        out["d"] = pairs
    if children:
        out["c"] = children
    if chosen:
        out["x"] = 1
    if cut_off:
        out["n"] = 1
    return out


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and all(scalar(v) for v in value):
        more = f"; … {len(value) - ITEMS} more" if len(value) > ITEMS else ""
        return "; ".join(_short(v) for v in value[:ITEMS]) + more
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def generic(value: Any, label: str = "trace", depth: int = 0) -> dict[str, Any]:
    """Any JSON value as a nested list: a dict's keys and a list's items as children, scalars as `label: value`."""
    if scalar(value):
        return node(f"{label}: {_short(value) if value is not None else 'null'}")
    if depth > 12:
        return node(f"{label}: {cut(value)}")
    if isinstance(value, Mapping):
        items = list(value.items())
        children = [generic(v, str(k), depth + 1) for k, v in items[:ITEMS]]
        return node(f"{label} ({len(items)} keys)", children=children + _more(len(items), "keys"))
    items = list(value)
    if all(scalar(v) for v in items) and sum(len(str(v)) for v in items) < 120:  # a short list of scalars: one line
        return node(f"{label}: [{', '.join(_short(v) for v in items)}]")
    children = [generic(v, f"[{i}]", depth + 1) for i, v in enumerate(items[:ITEMS])]
    return node(f"{label} ({len(items)} items)", children=children + _more(len(items), "items"))


def _more(n: int, what: str) -> list[dict[str, Any]]:
    return [node(f"… {n - ITEMS} more {what}")] if n > ITEMS else []


def _is_prunerag(tree: Any) -> bool:
    return isinstance(tree, Mapping) and "query" in tree and "children" in tree


def _is_probtree(tree: Any) -> bool:
    return isinstance(tree, Mapping) and "question" in tree and "candidates" in tree


def _flat_nodes(tree: Any, *keys: str) -> bool:
    nodes = tree.get("nodes") if isinstance(tree, Mapping) else None
    return isinstance(nodes, list) and bool(nodes) and all(isinstance(n, Mapping) and all(k in n for k in keys)
                                                           for n in nodes)


def prunerag(tree: Mapping[str, Any], hops: dict[str, str], count: list[int]) -> dict[str, Any]:
    count[0] += 1
    depth = tree.get("depth", 1)
    for pid in tree.get("passages") or []:
        hops.setdefault(pid, f"depth {depth}")
    status = str(tree.get("status", ""))
    kids = [prunerag(c, hops, count) for c in tree.get("children") or [] if count[0] < NODES]
    details = {"answer": tree.get("answer"), "confidence": tree.get("confidence"), "passages": tree.get("titles"),
               "rejected": tree.get("rejected") or None, "error": tree.get("error")}  # fmt: skip
    badge = " · ".join(b for b in (str(tree.get("kind", "")), status if status != tree.get("kind") else "") if b)
    return node(str(tree.get("query", "")), badge, details, kids, status == "answered",
                status in ("unresolved", "parse_error", "capped"))  # fmt: skip


def probtree(tree: Mapping[str, Any], hops: dict[str, str], count: list[int], depth: int = 1) -> dict[str, Any]:
    count[0] += 1
    for pid in tree.get("passages") or []:
        hops.setdefault(pid, f"depth {depth}")
    chosen = tree.get("chosen")
    candidates = [c for c in tree.get("candidates") or [] if isinstance(c, Mapping)]
    details = {f"{c.get('kind')}{' (chosen)' if c.get('kind') == chosen else ''}":
               f"{c.get('answer')} (score {_short(c.get('score'))})" for c in candidates}  # fmt: skip
    details["decomposition score"] = tree.get("decomposition_score")
    kids = [probtree(c, hops, count, depth + 1) for c in tree.get("children") or [] if count[0] < NODES]
    answer = next((c.get("answer") for c in candidates if c.get("kind") == chosen), None)
    return node(str(tree.get("question", "")), f"answer: {answer}" if answer else "", details, kids, bool(chosen))


def treerare(tree: Mapping[str, Any], hops: dict[str, str]) -> dict[str, Any]:
    """The kept nodes (post-order, the root last) nested by their children's positions."""
    nodes = tree["nodes"]

    def build(i: int, seen: frozenset[int]) -> dict[str, Any]:
        n = nodes[i]
        for p in n.get("passages") or []:
            pid = p.get("id") if isinstance(p, Mapping) else p
            hops.setdefault(str(pid), f"level {n.get('height', '?')}")
        titles = [p.get("title") if isinstance(p, Mapping) else p for p in n.get("passages") or []]
        kids = [build(c, seen | {i}) for c in n.get("children") or [] if isinstance(c, int) and 0 <= c < len(nodes)
                and c not in seen]  # fmt: skip
        details = {"queries": n.get("queries"), "passages": titles, "answer": n.get("sag_output"),
                   "fallbacks": n.get("fallbacks") or None}  # fmt: skip
        return node(str(n.get("phrase", "")), str(n.get("label", "")), details, kids)

    root = build(len(nodes) - 1, frozenset())
    notes = {"parse": tree.get("kind"), "fallback": tree.get("fallback"), "capped": tree.get("capped")}
    root["d"] = [*(node("", details=notes).get("d") or []), *root.get("d", [])]
    return root


def mcts(tree: Mapping[str, Any], hops: dict[str, str]) -> dict[str, Any]:
    """Flat nodes with parent ids, nested; the chosen answer node and its ancestors marked."""
    nodes = {n["id"]: n for n in tree["nodes"]}
    children: dict[Any, list] = {}
    for n in tree["nodes"]:
        children.setdefault(n.get("parent"), []).append(n["id"])
        for pid in n.get("added") or []:
            hops.setdefault(str(pid), f"augment #{n['id']}")
    on_path, at = set(), tree.get("chosen")
    while at is not None and at in nodes and at not in on_path:
        on_path.add(at)
        at = nodes[at].get("parent")

    def build(i: Any, seen: frozenset) -> dict[str, Any]:
        n = nodes[i]
        details = {"visits": n.get("visits"), "value": n.get("value"), "reward": n.get("reward"),
                   "format": n.get("format"), "added": n.get("added"), "raw": n.get("raw")}  # fmt: skip
        text = f"#{i}" + (f": {n['answer']}" if n.get("answer") else "")
        kids = [build(c, seen | {i}) for c in children.get(i, []) if c not in seen]
        return node(text, str(n.get("kind", "")), details, kids, i in on_path)

    roots = [build(i, frozenset()) for i in children.get(None, [])] or [build(next(iter(nodes)), frozenset())]
    top = {"chosen": tree.get("chosen"), "best reward answer": tree.get("best_reward_answer"),
           "capped": tree.get("capped")}  # fmt: skip
    return node("search tree", "MCTS", top, roots)


def treehop(trace: Mapping[str, Any], hops: dict[str, str], title: Callable[[str], str]) -> dict[str, Any]:
    scores = trace.get("scores") if isinstance(trace.get("scores"), list) else []
    rounds = []
    for h, ids in enumerate(trace["hops"], 1):
        marks = scores[h - 1] if h - 1 < len(scores) and isinstance(scores[h - 1], list) else []
        leaves = []
        for j, pid in enumerate(ids[:ITEMS]):
            hops.setdefault(str(pid), f"hop {h}")
            score = f" ({_short(marks[j])})" if j < len(marks) else ""
            leaves.append(node(f"{title(str(pid))}{score}", details={"id": pid}))
        rounds.append(node(f"hop {h}: {len(ids)} passages", children=leaves))
    return node("TreeHop hops", children=rounds)


def drawings(trace: Any, title: Callable[[str], str] = str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The drawings of one record's trace as [{"name", "root"}] (the method's tree or hops first, the rest of
    the trace last, with `flat`: its keys drawn as the top level), and passage id -> the hop or tree node that
    retrieved it (where the trace says)."""
    if trace is None or trace == {} or trace == []:
        return [], {}
    hops: dict[str, str] = {}
    views: list[dict[str, Any]] = []
    rest = dict(trace) if isinstance(trace, Mapping) else None
    if rest is None:
        return [{"name": "trace", "root": generic(trace), "flat": 1}], hops
    tree = rest.get("tree")
    try:
        if _is_prunerag(tree):
            views.append({"name": "PruneRAG tree", "root": prunerag(tree, hops, [0])})
        elif _is_probtree(tree):
            views.append({"name": "ProbTree tree", "root": probtree(tree, hops, [0])})
        elif _flat_nodes(tree, "phrase", "children"):
            views.append({"name": f"syntax tree ({tree.get('kind', '?')})", "root": treerare(tree, hops)})
        elif _flat_nodes(tree, "id", "parent"):
            views.append({"name": "MCTS search tree", "root": mcts(tree, hops)})
        if views:
            rest.pop("tree")
        if isinstance(rest.get("hops"), list) and all(isinstance(h, list) for h in rest["hops"]):
            views.append({"name": "hops", "root": treehop(rest, hops, title)})
            rest.pop("hops")
            rest.pop("scores", None)
    except (TypeError, KeyError, AttributeError, ValueError):  # a shape that only looks known: drawn as it is
        views, hops, rest = [], {}, dict(trace)
    if rest:
        views.append({"name": "trace" if not views else "rest of the trace", "root": generic(rest, "trace"), "flat": 1})
    return views, hops
