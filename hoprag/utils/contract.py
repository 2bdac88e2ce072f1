"""What an artifact (an index, an index shard, an exported model) records about how it was made, held
against the run that wants to use it: every differing key is named with both sides, so a refusal says
what to change."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from hoprag.utils.refusals import Refusal

ABSENT = "<absent>"  # a key the artifact does not record (made by an older version): it cannot be vouched for


class ContractMismatch(Refusal, ValueError):
    """An artifact was made with other settings than the run that would use it."""


def mismatches(
    recorded: Mapping[str, Any], expected: Mapping[str, Any], sides: tuple[str, str] = ("saved", "requested")
) -> list[str]:
    """`key: saved X, requested Y` for every key of `expected` whose recorded value differs (a key not
    recorded counts as null); `sides` names the two (e.g. ("router", "method"))."""
    return [
        f"{key}: {sides[0]} {_show(recorded.get(key, ABSENT))}, {sides[1]} {_show(value)}"
        for key, value in expected.items()
        if recorded.get(key) != value
    ]


def refuse_mismatch(
    what: str, recorded: Mapping[str, Any], expected: Mapping[str, Any], fix: str, sides: tuple[str, str]
) -> None:
    """Raise ContractMismatch naming `what`, every differing key (`mismatches`) and `fix`."""
    diffs = mismatches(recorded, expected, sides)
    if diffs:
        raise ContractMismatch(f"{what} does not match this run ({'; '.join(diffs)}): {fix}")


def sha256(path: str | os.PathLike) -> str:
    """A file's content hash, read in 1 MiB chunks (a large corpus or index shard never sits in memory)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _show(value: Any) -> str:
    return value if value is ABSENT else repr(value)
