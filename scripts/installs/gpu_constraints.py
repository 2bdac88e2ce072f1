"""Writes constraints-gpu.txt, the versions `make GPU=1 install` installs, as pip resolves them from PyPI.

vLLM pins its own torch and caps transformers below the version constraints.txt pins, so one constraints file
cannot serve both stacks. This resolves hoprag's GPU extras with constraints.txt's pins, less those the vLLM
release rules out (MOVED, each with its reason), plus the release's pins (PINS), and writes every resolved
version, so that a later upstream release cannot change a GPU set-up either. Run it after changing PINS or
refreshing constraints.txt (about 4 minutes, mostly pip reading metadata):

    python scripts/installs/gpu_constraints.py
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from hoprag.paths import PROJECT_ROOT

PINS = {"vllm": "0.33.0", "torch": "2.14.0", "faiss-gpu": "1.15.1"}  # torch: the one vllm 0.33.0 requires
MOVED = {
    "transformers": "vllm 0.33.0 requires >=5.16.1,<5.21 (hoprag: >=5.0,<5.24)",
    "certifi": "vllm 0.33.0 requires >=2026.10.19",
    "numpy": "mistral_common (vLLM's) requires <2.4 on Python <= 3.12",
}
GPU_EXTRAS = "vllm,faiss-gpu,test,models,docs"  # what `make GPU=1 install` installs
NOT_PINNED = {"hoprag", "pip", "setuptools", "wheel"}  # as `pip freeze` leaves them out


def canonical(name: str) -> str:
    """A distribution's name as PyPI compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: Path) -> dict[str, str]:
    """A constraints file's `name==version` lines, by canonical name."""
    pins = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[canonical(name)] = version.strip()
    return pins


def resolve(extras: str, constraints: Iterable[Path], requirements: Iterable[str] = ()) -> dict[str, dict]:
    """What `pip install -e ".[extras]" requirements -c constraints...` would install into an empty environment,
    {canonical name: its metadata (version, requires_dist, ...)}, resolved by pip without installing anything.
    `--isolated`: this machine's pip configuration (local wheels, a global constraint) stays out, so the answer
    is PyPI's."""
    cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--dry-run",
           "--quiet", "--ignore-installed", "--report", "-", "-e", f".[{extras}]", *requirements]  # fmt: skip
    for path in constraints:
        cmd += ["-c", str(path)]
    out = subprocess.run(cmd, cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"pip could not resolve .[{extras}]:\n{out.stderr}")
    report = json.loads(out.stdout)
    return {canonical(item["metadata"]["name"]): item["metadata"] for item in report["install"]}


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    cpu = read_pins(PROJECT_ROOT / "constraints.txt")
    kept = {name: version for name, version in cpu.items() if name not in MOVED}
    with tempfile.TemporaryDirectory() as tmp:
        start = Path(tmp) / "constraints.txt"
        start.write_text("".join(f"{n}=={v}\n" for n, v in sorted({**kept, **PINS}.items())))
        resolved = {name: meta["version"] for name, meta in resolve(GPU_EXTRAS, [start]).items()}
    python = f"CPython {platform.python_version()} on {platform.system()} {platform.machine()}"
    header = [
        f"# The versions `make GPU=1 install` installs (hoprag[{GPU_EXTRAS}]), resolved by pip from PyPI on",
        f"# {datetime.date.today()} for {python}; written by scripts/installs/gpu_constraints.py, which says how.",
        "# constraints.txt's pins (the CPU stack `make test` passed with) where vLLM allows them; not run here (no GPU).",
        "# Pinned for the GPU stack: " + ", ".join(f"{n}=={v}" for n, v in PINS.items()) + ".",
        "# Moved from constraints.txt's pins:",
        *(f"#   {name} {cpu[name]} -> {resolved[name]}: {why}" for name, why in MOVED.items()),
    ]
    pins = [f"{name}=={version}" for name, version in sorted(resolved.items()) if name not in NOT_PINNED]
    (PROJECT_ROOT / "constraints-gpu.txt").write_text("\n".join(header + pins) + "\n")
    print(f"constraints-gpu.txt: {len(pins)} pins; transformers {resolved['transformers']}, torch {resolved['torch']}")


if __name__ == "__main__":
    main()
