"""bm25s imports JAX when it is installed and probes it at import, which would start JAX on the GPU and take 75 %
of its memory; hoprag imports bm25s with JAX confined to the CPU (hoprag/retrieval/bm25s_cpu.py). A stand-in
`jax` records the platforms it was started with."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hoprag.paths import PROJECT_ROOT

STAND_IN = '''import os
from pathlib import Path
Path(os.environ["JAX_RECORD"]).write_text(os.environ.get("JAX_PLATFORMS", "<unset>"))
'''
LAX = "def top_k(x, k):\n    return x[:k], list(range(k))\n"


@pytest.mark.parametrize(("given", "started_on"), [(None, "cpu"), ("cuda", "cuda")])
def test_bm25_starts_jax_on_the_cpu_unless_the_user_chose(tmp_path, given, started_on):
    jax = tmp_path / "site" / "jax"
    jax.mkdir(parents=True)
    (jax / "__init__.py").write_text(STAND_IN + "from . import lax\n")
    (jax / "lax.py").write_text(LAX)
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"} | {
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PROJECT_ROOT)]),
        "JAX_RECORD": str(tmp_path / "record"), **({"JAX_PLATFORMS": given} if given else {})}
    code = "import hoprag.retrieval.sparse, hoprag.retrieval.bm25_build"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=tmp_path, timeout=300)
    assert (tmp_path / "record").read_text() == started_on
