"""What this machine has, asked the way the jobs will ask: files on disk, the Hugging Face cache the environment
names (HF_HOME / HF_HUB_CACHE), Python packages by import spec, servers by a real HTTP request, the GPUs torch
sees. A stand-in environment (a fake `vllm` on PYTHONPATH, a local server, a fake hub cache) passes through the
same questions. Answers are kept for the preflight's lifetime: many jobs ask the same."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from hoprag.paths import data_root

T = TypeVar("T")
LOOPBACK = {"localhost", "127.0.0.1", "::1"}


@dataclass
class Answer:
    """An HTTP answer: the status (None when nothing answered), the JSON body when it was JSON, and why not."""

    status: int | None
    body: Any = None
    error: str = ""


@dataclass
class Host:
    """`env` is the environment the jobs will run with (default: this process's), where credentials, the data
    root, the hub cache, PYTHONPATH and server URLs are looked up (a value is never printed); `hub_cache` the
    Hugging Face cache (default: `env`'s); `timeout` the seconds a server has to answer; `gpus` the memory of
    each GPU in bytes (default: torch.cuda's)."""

    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    hub_cache: str | None = None
    timeout: float = 3.0
    gpus: list[int] | None = None
    _answers: dict[Any, Any] = field(default_factory=dict, repr=False)

    def memo(self, key: Any, compute: Callable[[], T]) -> T:
        if key not in self._answers:
            self._answers[key] = compute()
        return self._answers[key]

    def cache_dir(self) -> str:
        """The hub cache of `env` (HF_HUB_CACHE, else HF_HOME/hub), else huggingface_hub's default."""
        if self.hub_cache is None:
            from huggingface_hub import constants

            home = self.env.get("HF_HOME")
            default = str(Path(home) / "hub") if home else constants.HF_HUB_CACHE
            self.hub_cache = self.env.get("HF_HUB_CACHE") or default
        return self.hub_cache

    def data_root(self, root: str | None) -> Path:
        """A dataset's data root as the job resolves it, HOPRAG_DATA read from `env`."""
        return data_root(root or self.env.get("HOPRAG_DATA"))

    def hub_snapshots(self) -> dict[str, Path]:
        """The cached snapshot of each model repository (the one `main` names, else the latest), as
        huggingface_hub's `scan_cache_dir` finds them (a repository with a broken file is left out)."""
        def scan() -> dict[str, Path]:
            from huggingface_hub import scan_cache_dir
            from huggingface_hub.errors import CacheNotFound

            try:
                repos = scan_cache_dir(self.cache_dir()).repos
            except CacheNotFound:
                return {}
            found = {}
            for repo in (r for r in repos if r.repo_type == "model" and r.revisions):
                latest = max(repo.revisions, key=lambda r: ("main" in r.refs, r.last_modified))
                found[repo.repo_id] = latest.snapshot_path
            return found

        return self.memo(("snapshots",), scan)

    def has_env(self, name: str) -> bool:
        return bool(self.env.get(name, "").strip())

    def importable(self, module: str) -> bool:
        """Whether `import module` would find it (its spec), without running it (vLLM's import takes seconds),
        on this process's path or `env`'s PYTHONPATH (where a job started with `env` looks first)."""
        def find() -> bool:
            extra = [p for p in self.env.get("PYTHONPATH", "").split(os.pathsep) if p]
            try:
                return (importlib.machinery.PathFinder.find_spec(module, extra) is not None
                        or importlib.util.find_spec(module) is not None)  # fmt: skip
            except (ImportError, ValueError):
                return False

        return self.memo(("import", module), find)

    def gpu_memory(self) -> list[int]:
        """Each visible GPU's memory in bytes (none: an empty list)."""
        if self.gpus is None:
            import torch

            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            self.gpus = [torch.cuda.get_device_properties(i).total_memory for i in range(count)]
        return self.gpus

    def get(self, url: str, headers: Mapping[str, str] | None = None) -> Answer:
        """GET `url` once, within `timeout`; loopback addresses bypass any proxy, as the jobs' clients do."""
        return self.memo(("get", url, tuple(sorted((headers or {}).items()))), lambda: self._get(url, headers or {}))

    def _get(self, url: str, headers: Mapping[str, str]) -> Answer:
        handlers = [urllib.request.ProxyHandler({})] if urlsplit(url).hostname in LOOPBACK else []
        request = urllib.request.Request(url, headers={"accept": "application/json", **headers})
        try:
            with urllib.request.build_opener(*handlers).open(request, timeout=self.timeout) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError as e:
            return Answer(e.code, error=f"HTTP {e.code}")
        except (urllib.error.URLError, OSError) as e:
            return Answer(None, error=str(getattr(e, "reason", e)))
        try:
            return Answer(status, json.loads(raw))
        except ValueError:
            return Answer(status, error="not JSON")


def is_local(url: str) -> bool:
    """A server on this machine (no credential, no network beyond it)."""
    return urlsplit(url).hostname in LOOPBACK


def located(path: str | os.PathLike, base: Path) -> Path:
    """`path` as a job reads it: absolute, or relative to `base`."""
    path = Path(path).expanduser()
    return path if path.is_absolute() else base / path
