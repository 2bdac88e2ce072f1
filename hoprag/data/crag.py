"""CRAG (Meta KDD Cup 2024, Task 1/2 bz2 JSONL): each search result becomes a context passage.

A passage is the result's page name and snippet; the raw results (URL, last-modified date, full HTML)
stay in `metadata["search_results"]` for methods that parse pages themselves (PruningRAG).
"""

from __future__ import annotations

import json
from typing import Any

from hoprag.data import validation as check
from hoprag.data.corpus import make_passage, unique_passages
from hoprag.data.records import extra_fields
from hoprag.data.types import QAExample

CRAG_KEYS = (
    "interaction_id", "query", "answer", "alternative_answers", "alt_ans", "question_type",
)


def _alternatives(record: dict[str, Any]) -> list[str]:
    # The dev file stores `alternative_answers` as a JSON-encoded string ("[]"); v3 docs say `alt_ans`.
    field = "alternative_answers" if "alternative_answers" in record else "alt_ans"
    alts = record.get(field, [])
    if isinstance(alts, str):
        alts = json.loads(alts) if alts.strip() else []
    return check.answers(alts, field, required=False)


def parse_crag(record: dict[str, Any]) -> QAExample:
    results = record.get("search_results", [])
    return QAExample(
        id=check.identifier(record["interaction_id"], "interaction_id"),
        question=check.question(record["query"], "query"),
        answers=[check.answer(record["answer"], "answer"), *_alternatives(record)],
        dataset="crag",
        type=record.get("question_type"),
        context=unique_passages(
            make_passage(
                check.text(r["page_name"], f"search_results[{i}].page_name"),
                check.text(r["page_snippet"], f"search_results[{i}].page_snippet"),
            )
            for i, r in enumerate(results)
        ),
        metadata=extra_fields(record, CRAG_KEYS),
    )
