"""The package's layering, read from its import statements: no cycles between hoprag's packages or between its
modules, foundations that import no method code, no private names imported across packages, no module too
long to read, and method configs that configure only the method."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import NamedTuple

from hoprag.paths import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "hoprag"
# the shared path; everything a method builds on, so none of it may reach up into methods or their homes
FOUNDATIONS = {"data", "retrieval", "llm", "cost", "metrics", "paths", "utils", "config", "training"}
METHOD_CODE = {"methods", "treehop", "selectors", "search", "verifiers", "routers", "sources", "evaluation"}


def unit(module: str) -> str:
    """The package (or top-level module) a dotted hoprag module belongs to: hoprag.llm.hf -> llm."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "hoprag"


def module_name(path: Path) -> str:
    """The dotted name a file is imported as; a package's `__init__` is the package (hoprag/llm/__init__.py ->
    hoprag.llm)."""
    return ".".join(path.relative_to(PROJECT_ROOT).with_suffix("").parts).removesuffix(".__init__")


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def typing_only(test: ast.expr) -> bool:
    """`if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): its imports never run."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def statements(nodes, type_checking: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement below `nodes`, inside functions and methods too (an import deferred into a function
    still ties the two modules together), each with whether it sits under `if TYPE_CHECKING:`."""
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, type_checking
        elif isinstance(node, ast.If) and typing_only(node.test):
            yield from statements(node.body, True)
            yield from statements(node.orelse, type_checking)
        else:
            yield from statements(ast.iter_child_nodes(node), type_checking)


def absolute(module: str, node: ast.ImportFrom) -> str:
    """The module a `from` import names, relative ones resolved against the importing module's package."""
    if not node.level:
        return node.module or ""
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
    return f"{base}.{node.module}" if node.module else base


class Import(NamedTuple):
    source: str  # the importing unit (see `unit`)
    importer: str  # the importing module
    target: str  # the imported hoprag module: `from hoprag.x import y` with y a submodule imports hoprag.x.y
    names: list[str]
    path: Path
    line: int
    type_checking: bool  # under `if TYPE_CHECKING:`


def imports() -> list[Import]:
    """Every hoprag import in hoprag, one per imported module."""
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, type_checking in statements(tree.body):
            where = (path, node.lineno, type_checking)
            if isinstance(node, ast.Import):
                found += [
                    Import(unit(module), module, a.name, [], *where)
                    for a in node.names
                    if a.name == "hoprag" or a.name.startswith("hoprag.")
                ]
                continue
            base = absolute(module, node)
            if base != "hoprag" and not base.startswith("hoprag."):
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                found.append(Import(unit(module), module, target, [alias.name], *where))
    return found


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for found in imports():
        if unit(found.target) not in (found.source, "hoprag"):
            edges[found.source].add(unit(found.target))
    return edges


def module_graph() -> dict[str, dict[str, str]]:
    """importing module -> imported module -> where (file:line), for every import that runs; the imports under
    `if TYPE_CHECKING:` do not, so they cannot make a cycle."""
    edges: dict[str, dict[str, str]] = defaultdict(dict)
    for found in imports():
        if not found.type_checking and found.target != found.importer:
            where = f"{found.path.relative_to(PROJECT_ROOT)}:{found.line}"
            edges[found.importer].setdefault(found.target, where)
    return edges


def cycle_through(edges: dict[str, dict[str, str]], group: list[str]) -> list[str]:
    """A shortest import path from the group's first member back to itself, staying inside the group."""
    start, inside = group[0], set(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in sorted(set(edges.get(node, ())) & inside):
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if succ not in came_from:
                    came_from[succ] = node
                    following.append(succ)
        frontier = following
    raise ValueError(f"{group} is not a cycle")


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one package or module (Tarjan)."""
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
        f"{found.path.relative_to(PROJECT_ROOT)}: {name} from {found.target}"
        for found in imports()
        for name in found.names
        if name.startswith("_") and unit(found.target) != found.source
    ]
    private += [
        f"{found.path.relative_to(PROJECT_ROOT)}: {found.target}"
        for found in imports()
        if any(part.startswith("_") and not part.startswith("__") for part in found.target.split("."))
    ]
    assert private == []


def test_imports_in_functions_count_and_type_checking_ones_do_not():
    tree = ast.parse("if TYPE_CHECKING:\n    import a\nelse:\n    import b\ndef f():\n    import c\n")
    assert [(node.names[0].name, typing) for node, typing in statements(tree.body)] == [
        ("a", True),
        ("b", False),
        ("c", False),
    ]


def test_the_cycle_path_names_each_step():
    edges = {"a": {"b": "x"}, "b": {"c": "x", "d": "x"}, "c": {"a": "x"}, "d": {"b": "x"}}
    assert cycle_through(edges, ["a", "b", "c", "d"]) == ["a", "b", "c", "a"]


def test_no_import_cycle_between_modules():
    edges = module_graph()
    found = []
    for group in cycles({module: set(targets) for module, targets in edges.items()}):
        path = cycle_through(edges, group)
        steps = [f"{a} -> {b} ({edges[a][b]})" for a, b in pairwise(path)]
        found.append(" → ".join(path) + "\n    " + "\n    ".join(steps) + f"\n    (cycle group: {', '.join(group)})")
    assert not found, "module-level import cycles (imports inside functions count):\n" + "\n".join(found)


MAX_LINES = 450


def test_no_module_is_over_the_line_cap():
    files = [*PACKAGE.rglob("*.py"), *(PROJECT_ROOT / "scripts").rglob("*.py")]
    lengths = {path.relative_to(PROJECT_ROOT): len(path.read_text(encoding="utf-8").splitlines()) for path in files}
    over = sorted(f"{path}: {n} lines" for path, n in lengths.items() if n > MAX_LINES)
    assert not over, f"modules over {MAX_LINES} lines; split them by topic:\n" + "\n".join(over)


def test_method_configs_set_nothing_outside_the_method():
    configs = sorted((PROJECT_ROOT / "conf" / "method").rglob("*.yaml"))
    assert configs
    global_ = [
        str(path.relative_to(PROJECT_ROOT))
        for path in configs
        if any(line.lstrip("# ").startswith("@package _global_") for line in path.read_text().splitlines())
    ]
    assert not global_, (
        "method configs must configure only `method` (no `# @package _global_`); move what else a setting needs "
        "to an experiment preset or a group of its own:\n" + "\n".join(global_)
    )
