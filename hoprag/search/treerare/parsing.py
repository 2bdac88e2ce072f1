"""Reading TreeRare's LLM replies: the QG query list and the answer after the FINAL marker (spec §3, §8)."""

from __future__ import annotations

import re

RESPONSE = re.compile(r"#?\s*response\s*:", re.IGNORECASE)
FINAL = re.compile(r"#?\s*FINAL(?:\s*\(Step 2\))?\s*:?")


def parse_queries(text: str, limit: int) -> list[str] | None:
    """The queries after the last `response:` (a leading `#` tolerated), split on `;`, stripped, empties
    dropped, the first `limit` kept; None when there is no marker or no query (a parse failure)."""
    markers = list(RESPONSE.finditer(text))
    if not markers:
        return None
    line = text[markers[-1].end():].strip().split("\n", 1)[0]
    queries = [q.strip() for q in line.split(";") if q.strip()]
    return queries[:limit] or None


def final_answer(text: str) -> str | None:
    """The text after the last FINAL marker, stripped; None when the marker is missing."""
    markers = list(FINAL.finditer(text))
    return text[markers[-1].end():].strip() if markers else None
