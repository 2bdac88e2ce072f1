"""The scripts under `scripts/`, loaded by path as modules (they are files to run, not a package), for tests that
call their functions."""

from __future__ import annotations

import importlib.util
from types import ModuleType

from hoprag.paths import PROJECT_ROOT


def load_script(path: str) -> ModuleType:
    """`scripts/<path>` (e.g. `runs/show_trees.py`) as a module named after its file."""
    file = PROJECT_ROOT / "scripts" / path
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
