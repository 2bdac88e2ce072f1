"""The package's layering, read from its import statements: no cycles between hoprag's packages, foundations
that import no method code, and no private names imported across packages."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from hoprag.paths import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "hoprag"
# the shared path; everything a method builds on, so none of it may reach up into methods or their homes
FOUNDATIONS = {"data", "retrieval", "llm", "cost", "metrics", "paths", "utils", "config"}
METHOD_CODE = {"methods", "treehop", "selectors", "search", "verifiers", "routers", "evaluation"}


def unit(module: str) -> str:
    """The package (or top-level module) a dotted hoprag module belongs to: hoprag.llm.hf -> llm."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "hoprag"


def imports() -> list[tuple[str, str, list[str], Path]]:
    """(importing unit, imported hoprag module, imported names, file) for every hoprag import."""
    found = []
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(PROJECT_ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("hoprag"):
                found.append((unit(module), node.module, [a.name for a in node.names], path))
            elif isinstance(node, ast.Import):
                found += [(unit(module), a.name, [], path) for a in node.names if a.name.startswith("hoprag.")]
    return found


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for source, target, _, _ in imports():
        if unit(target) not in (source, "hoprag"):
            edges[source].add(unit(target))
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for succ in edges.get(node, ()):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in list(edges):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_cycles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_packages():
    assert cycles(graph()) == []


def test_foundations_import_no_method_code():
    edges = graph()
    reach = {f: sorted(edges.get(f, set()) & METHOD_CODE) for f in FOUNDATIONS}
    assert {f: r for f, r in reach.items() if r} == {}


def test_no_private_names_are_imported_across_packages():
    private = [
        f"{path.relative_to(PROJECT_ROOT)}: {name} from {target}"
        for source, target, names, path in imports()
        for name in names
        if name.startswith("_") and unit(target) != source
    ]
    private += [
        f"{path.relative_to(PROJECT_ROOT)}: {target}"
        for source, target, _, path in imports()
        if any(part.startswith("_") and not part.startswith("__") for part in target.split("."))
    ]
    assert private == []
