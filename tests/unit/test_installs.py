"""Both set-ups resolve with the constraints the project ships: pip's resolver run against PyPI without installing.

`make install` (hoprag[faiss-cpu,...] with constraints.txt) and `make GPU=1 install` (hoprag[vllm,faiss-gpu,...]
with constraints-gpu.txt): each resolves, with transformers in hoprag's own range and exactly one FAISS build;
the GPU file pins every package the GPU set-up installs, so none floats. Minutes each (pip reads the metadata
of ~300 packages), hence `slow`; skipped when PyPI cannot be reached.
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest
from packaging.requirements import Requirement

from hoprag.paths import PROJECT_ROOT
from tests.scripts import load_script

pytestmark = [pytest.mark.network, pytest.mark.slow]

installs = load_script("installs/gpu_constraints.py")


@pytest.fixture(scope="module", autouse=True)
def pypi() -> None:
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=15).close()
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        pytest.skip(f"PyPI cannot be reached: {err}")


def check_common(resolved: dict[str, dict], faiss: str) -> None:
    """transformers in hoprag's own range (as pip read it from pyproject.toml), and one FAISS build."""
    hoprag = map(Requirement, resolved["hoprag"]["requires_dist"])
    transformers = next(r for r in hoprag if r.name == "transformers")
    version = resolved["transformers"]["version"]
    assert transformers.specifier.contains(version), (version, str(transformers))
    assert [name for name in resolved if name.startswith("faiss")] == [faiss]


def test_default_install_resolves():
    torch = re.search(r"^TORCH_SPEC \?= (torch==\S+)$", (PROJECT_ROOT / "Makefile").read_text(), re.MULTILINE)[1]
    resolved = installs.resolve("faiss-cpu,test,models,docs", [PROJECT_ROOT / "constraints.txt"], [torch])
    check_common(resolved, "faiss-cpu")
    assert "vllm" not in resolved
    assert resolved["torch"]["version"] == torch.split("==")[1]


def test_gpu_install_resolves_to_its_pins():
    constraints = PROJECT_ROOT / "constraints-gpu.txt"
    resolved = installs.resolve(installs.GPU_EXTRAS, [constraints])
    check_common(resolved, "faiss-gpu")
    assert {name: resolved[name]["version"] for name in installs.PINS} == installs.PINS
    pinned = installs.read_pins(constraints)
    unpinned = set(resolved) - set(pinned) - installs.NOT_PINNED
    assert not unpinned, f"constraints-gpu.txt pins no version of {sorted(unpinned)}: rerun gpu_constraints.py"
