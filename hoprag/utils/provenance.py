"""When and from which code a result was made, so that a report can say it (issue 33, "reports with provenance").

`eval.py` stamps each run's metrics.json with `run.started` and `run.commit`; `hoprag.compare` puts the same two
facts about itself at the top of its report, beside every run's. The commit is the checkout's, with
`+uncommitted` when tracked files differ from it (a figure made from edited code is not the commit's figure);
outside a git checkout, or without git, it is unknown (None) rather than guessed.
"""

from __future__ import annotations

import os
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

from hoprag.paths import PROJECT_ROOT

UNCOMMITTED = "+uncommitted"


def now() -> str:
    """The local time to the second, with its UTC offset (ISO 8601)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


def code_version(root: Path = PROJECT_ROOT) -> str | None:
    """The checkout's commit (12 hex digits), `+uncommitted` appended when tracked files differ from it."""
    try:
        commit = _git(root, "rev-parse", "--short=12", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + (UNCOMMITTED if dirty else "") if commit else None


def run_stamp() -> dict[str, Any]:
    """What a run records of its making: `started` (now), `commit` (when known) and the GPUs it was given
    (`CUDA_VISIBLE_DEVICES`, when set: e.g. by `gpus_per_job`)."""
    commit, gpus = code_version(), os.environ.get("CUDA_VISIBLE_DEVICES")
    return {"started": now(), **({"commit": commit} if commit else {}), **({"gpus": gpus} if gpus is not None else {})}


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30, check=True)
    return done.stdout.strip()
