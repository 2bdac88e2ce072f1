"""`hoprag.compare` is a face: its names are defined in modules by responsibility (runs, discovery, groups,
columns, significance, comparison, render, cli), and the report's plots and page import those modules, not
the face, so the face can import them without a cycle."""

from __future__ import annotations

import ast

import hoprag.compare as compare
from hoprag.paths import PROJECT_ROOT

FOLDER = PROJECT_ROOT / "hoprag" / "compare"


def test_the_face_defines_none_of_its_names():
    public = [name for name in vars(compare) if not name.startswith("_")]
    defined_here = [n for n in public if getattr(vars(compare)[n], "__module__", None) == "hoprag.compare"]
    assert "main" in public and "build" in public and defined_here == []


def test_plots_and_page_import_the_modules_not_the_face():
    for name in ("plots", "page"):
        tree = ast.parse((FOLDER / f"{name}.py").read_text(encoding="utf-8"))
        from_face = [
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "hoprag.compare"
            for alias in node.names
            if not (FOLDER / f"{alias.name}.py").is_file()  # `from hoprag.compare import plots` names a module
        ]
        assert from_face == [], f"{name}.py imports {from_face} from the package face"
