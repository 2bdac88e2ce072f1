"""A content hash of a corpus, so that a cached index is only reused for the exact corpus it was built on."""

from __future__ import annotations

from collections.abc import Iterable

from hoprag.data.corpus_identity import PassageDigest
from hoprag.data.corpus_store import CorpusStore, MemoryCorpus
from hoprag.data.types import Passage


def corpus_fingerprint(passages: Iterable[Passage] | CorpusStore | MemoryCorpus) -> str:
    """sha256 over every passage's id and contents, in order (`PassageDigest`); streamed, so any corpus size
    works. A corpus store or memory corpus answers with the digest it already holds, without a pass."""
    if isinstance(passages, (CorpusStore, MemoryCorpus)):
        return passages.fingerprint
    return PassageDigest().add_all(passages).hexdigest()
