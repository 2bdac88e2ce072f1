"""CRAG (Meta KDD Cup 2024, Task 1/2 bz2 JSONL): each search result becomes a context passage.

A passage is the result's page name and snippet; the raw results (URL, last-modified date, full HTML)
stay in `metadata["search_results"]` for methods that parse pages themselves (PruningRAG).
"""

from __future__ import annotations

import json
from typing import Any

from hoprag.data.corpus import make_passage, unique_passages
from hoprag.data.records import extra_fields
from hoprag.data.types import QAExample

CRAG_KEYS = (
    "interaction_id", "query", "answer", "alternative_answers", "alt_ans", "question_type",
)


def _alternatives(record: dict[str, Any]) -> list[str]:
    # The dev file stores `alternative_answers` as a JSON-encoded string ("[]"); v3 docs say `alt_ans`.
    alts = record.get("alternative_answers", record.get("alt_ans", []))
    if isinstance(alts, str):
        alts = json.loads(alts) if alts.strip() else []
    if not isinstance(alts, list):
        raise ValueError(f"alternative answers must be a list, got {type(alts).__name__}")
    return [str(a) for a in alts]


def parse_crag(record: dict[str, Any]) -> QAExample:
    return QAExample(
        id=str(record["interaction_id"]),
        question=record["query"],
        answers=[str(record["answer"]), *_alternatives(record)],
        dataset="crag",
        type=record.get("question_type"),
        context=unique_passages(
            make_passage(r["page_name"], r["page_snippet"]) for r in record.get("search_results", [])
        ),
        metadata=extra_fields(record, CRAG_KEYS),
    )
