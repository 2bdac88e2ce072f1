"""A content hash of a corpus, so that a cached index is only reused for the exact corpus it was built on."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from hoprag.data.types import Passage


def corpus_fingerprint(passages: Iterable[Passage]) -> str:
    """sha256 over every passage's id and contents, in order; streamed, so any corpus size works.

    Fields are length-prefixed so that moving text between id, title and body changes the hash.
    """
    digest = hashlib.sha256()
    for passage in passages:
        for field in (passage.id, passage.title, passage.text):
            data = field.encode("utf-8")
            digest.update(len(data).to_bytes(8, "little"))
            digest.update(data)
    return digest.hexdigest()
