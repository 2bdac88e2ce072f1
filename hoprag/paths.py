"""Where data and caches live.

The data root is, in order: an explicit argument (a config key), the `HOPRAG_DATA` environment
variable, `../shared/data` when that folder exists beside the checkout (as in CI), else `./data`.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def data_root(override: str | os.PathLike | None = None) -> Path:
    if override:
        return Path(override).expanduser().resolve()
    env = os.environ.get("HOPRAG_DATA")
    if env:
        return Path(env).expanduser().resolve()
    shared = PROJECT_ROOT.parent / "shared" / "data"
    if shared.is_dir():
        return shared.resolve()
    return PROJECT_ROOT / "data"


def cache_root(override: str | os.PathLike | None = None) -> Path:
    """Indexes, embedding caches and converted models; `HOPRAG_CACHE` or `./.cache`."""
    if override:
        return Path(override).expanduser().resolve()
    return Path(os.environ.get("HOPRAG_CACHE", PROJECT_ROOT / ".cache")).expanduser().resolve()
