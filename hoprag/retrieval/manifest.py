"""The manifest saved beside every index: what it was built from, so a stale cache is refused, not used.

`manifest.json` is written last when an index is saved, so a directory without one is an unfinished
build and is treated as absent. Besides what must match, it records how the build went, e.g.
`truncated_passages` (`TRUNCATED`): how many passages were longer than the embedder reads and cut.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import hoprag
from hoprag.utils.contract import ContractMismatch, mismatches

MANIFEST = "manifest.json"
IDS_FILE = "ids.json"  # an index's passage ids, in index order
TRUNCATED = "truncated_passages"  # passages cut at the embedder's token limit (Embedder.passage_chunks counts them)


class IndexMismatchError(ContractMismatch):
    """A saved index was built from another corpus or with other settings than the ones requested."""


def new_manifest(kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        **fields,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "hoprag_version": hoprag.__version__,
    }


def write_manifest(directory: Path, manifest: Mapping[str, Any]) -> None:
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")


def read_manifest(directory: str | Path, kind: str) -> dict[str, Any]:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"no {kind} index in {directory} ({MANIFEST} missing)")
    manifest = json.loads(path.read_text(encoding="utf-8"))
    if manifest.get("kind") != kind:
        raise IndexMismatchError(f"{directory} holds a {manifest.get('kind')!r} index, not a {kind!r} one")
    return manifest


def read_ids(directory: Path) -> list[str]:
    """The passage ids a saved index keeps beside it: read only when asked for (at wiki-18 scale, 21M strings)."""
    return json.loads((directory / IDS_FILE).read_text(encoding="utf-8"))


REBUILD_HINT = "force=true rebuilds it in place (deleting it), or point cache_dir elsewhere"


def check_manifest(
    directory: str | Path, manifest: Mapping[str, Any], expected: Mapping[str, Any], fix: str = REBUILD_HINT
) -> None:
    """Raise IndexMismatchError naming every field of `expected` that the saved manifest contradicts,
    and `fix`, what to do about it."""
    diffs = mismatches(manifest, expected)
    if diffs:
        raise IndexMismatchError(
            f"the index in {directory} does not match the request ({'; '.join(diffs)}); it is left as it is: {fix}"
        )


def settings_digest(settings: Mapping[str, Any]) -> str:
    """8 hex chars of sha256 over `settings` as canonical JSON: the part of an index directory's name that
    keeps indexes built with different settings (passage template, embedder, ...) apart."""
    canonical = json.dumps(dict(settings), sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:8]


def slug(text: str) -> str:
    """A file-name-safe form of a model or factory name: `IVF1024,PQ64` -> `ivf1024-pq64`."""
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "x"
