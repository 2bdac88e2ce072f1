"""CRAG (Meta KDD Cup 2024): each search result becomes a context passage.

The official files load as they ship (`load_questions` reads the containers): Task 1/2's
`crag_task_1_and_2_dev_v4.jsonl.bz2` (5 pages a question) and Task 3's `crag_task_3_dev_v4.tar.bz2` (50 pages; its
four parts joined with `cat`; JSONL parts `crag_task_3_dev_v4/crag_task_3_dev_v4_<i>.jsonl` inside). RM3QA, the
PruningRAG paper's release (`RM3QA_5web.jsonl.bz2`, `RM3QA_50web.bz2`), keeps this schema with `page_result`
already in Markdown (the web source's `pages_format: markdown`), and some answers as numbers (read as text).

A passage is the result's page name and snippet; the raw results (URL, last-modified date, full HTML)
stay in `metadata["search_results"]` for methods that parse pages themselves (PruningRAG).

Every field a method or metric reads is checked here, so a record without one fails at load time naming
file, line and key, never as a bare KeyError mid-run: `query`, `answer`, `query_time` (CRAG's
"mm/dd/yyyy, hh:mm:ss PT"), `domain`, `question_type`, `static_or_dynamic` (strings), `split` (an integer,
where given), and `search_results`: a list (empty allowed) of objects with `page_name`, `page_url` and
`page_snippet` strings and `page_result`, the HTML (RM3QA: Markdown), a string or null (the web source then
reads the snippet alone and counts the page). `page_last_modified` is read by nothing and is not checked.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from hoprag.data import validation as check
from hoprag.data.corpus import make_passage, unique_passages
from hoprag.data.records import extra_fields
from hoprag.data.types import Passage, QAExample

CRAG_KEYS = (
    "interaction_id",
    "query",
    "answer",
    "alternative_answers",
    "alt_ans",
    "question_type",
)
# the search-result strings the web source reads (`page_result`, the HTML, may also be null)
PAGE_TEXTS = ("page_name", "page_url", "page_snippet")


def _alternatives(record: dict[str, Any]) -> list[str]:
    # The dev file stores `alternative_answers` as a JSON-encoded string ("[]"); v3 docs say `alt_ans`.
    field = "alternative_answers" if "alternative_answers" in record else "alt_ans"
    alts = record.get(field, [])
    if isinstance(alts, str):
        try:
            alts = json.loads(alts) if alts.strip() else []
        except json.JSONDecodeError as e:
            raise ValueError(f"{field!r} is a string but not a JSON-encoded list ({e.msg})") from None
    return check.answers(alts, field, required=False)


def parse_query_time(text: str) -> datetime:
    """CRAG's "03/05/2024, 23:18:31 PT" (the zone name is dropped: every CRAG query time is PT)."""
    cleaned = re.sub(r"\s+[A-Z]{2,4}$", "", text.strip())
    for fmt in ("%m/%d/%Y, %H:%M:%S", "%m/%d/%Y %H:%M:%S", "%m/%d/%Y"):
        try:
            return datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
    raise ValueError(f"query_time {text!r} is not CRAG's 'mm/dd/yyyy, hh:mm:ss PT'")


def _page(page: Any, where: str) -> Passage:
    """One search result checked as the web source reads it, as its context passage (name and snippet)."""
    name, _, snippet = (check.text(check.key(page, k, where), f"{where}.{k}") for k in PAGE_TEXTS)
    if check.key(page, "page_result", where) is not None:
        check.text(page["page_result"], f"{where}.page_result")
    return make_passage(name, snippet)


def _checked_metadata(record: dict[str, Any]) -> dict[str, Any]:
    """The fields kept in `metadata` that methods and metrics read, checked (see the module docstring)."""
    parse_query_time(check.text(record["query_time"], "query_time"))
    for key in ("domain", "static_or_dynamic"):
        check.text(record[key], key)
    if "split" in record:
        check.integer(record["split"], "split")
    return extra_fields(record, CRAG_KEYS)


def parse_crag(record: dict[str, Any]) -> QAExample:
    results = check.objects(record["search_results"], "search_results", required=False)
    return QAExample(
        id=check.identifier(record["interaction_id"], "interaction_id"),
        question=check.question(record["query"], "query"),
        answers=[check.answer(record["answer"], "answer"), *_alternatives(record)],
        dataset="crag",
        type=check.text(record["question_type"], "question_type"),
        context=unique_passages(_page(r, f"search_results[{i}]") for i, r in enumerate(results)),
        metadata=_checked_metadata(record),
    )
