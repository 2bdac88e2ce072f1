"""MultiHop-RAG (official `MultiHopRAG.json` queries and `corpus.json` news articles).

A query record is `{query, answer, question_type, evidence_list: [{title, author, url, source, category,
published_at, fact}]}`: its gold passages are the evidence articles, by title, as TreeHop scores recall.
The release has no question ids, so a query's id is a hash of its text (stable across runs and subsets).

The corpus is 609 whole articles `{title, author, source, published_at, category, url, body}`, not
chunked (TreeHop's digest §8.1). Each article is one passage: its title, and as text the outlet and
body labelled as TreeHop's template for this corpus has them (Table 10). An embedder does not label a
text twice (`Embedder.passage_text`), so BGE-M3's App. C template `Title: {title}\\nContext: {text}`
(conf/embedder/bge_m3_title_context.yaml, the one TreeHop's 2Wiki and MuSiQue passages use) gives
exactly `Title: <title>\\nSource: <source>\\nContext: <body>`, the Context label once. BGE-M3 reads
the first 512 tokens of each; an index build counts and logs the articles it cuts there.
"""

from __future__ import annotations

import hashlib
from typing import Any

from hoprag.data import validation as check
from hoprag.data.corpus import passage_id, register_layout
from hoprag.data.records import distinct, extra_fields
from hoprag.data.types import Passage, QAExample

QUERY_KEYS = ("query", "answer", "question_type")


def query_id(query: str) -> str:
    return "mhr_" + hashlib.sha1(query.encode("utf-8")).hexdigest()[:12]


def parse_multihop_rag(record: dict[str, Any]) -> QAExample:
    query = check.question(record["query"], "query")
    evidence = record["evidence_list"]
    if not isinstance(evidence, list):
        raise ValueError(f"'evidence_list' must be a list, got {type(evidence).__name__}")
    titles = [check.text(e["title"], f"evidence_list[{i}].title") for i, e in enumerate(evidence)]
    return QAExample(
        id=query_id(query),
        question=query,
        answers=[check.answer(record["answer"], "answer")],
        dataset="multihop_rag",
        type=record.get("question_type"),
        supporting_titles=distinct(titles),
        metadata=extra_fields(record, QUERY_KEYS),
    )


def is_article(record: dict[str, Any]) -> bool:
    """A corpus record is an article (`title`, `source`, `body`), not a FlashRAG passage."""
    return "body" in record and "source" in record


def article_passage(record: dict[str, Any]) -> Passage:
    """One corpus article as a passage (see the module docstring for its text)."""
    title = check.text(record["title"], "title")
    text = f"Source: {check.text(record['source'], 'source')}\nContext: {check.text(record['body'], 'body')}"
    return Passage(id=passage_id(title, text), title=title, text=text)


register_layout("multihop_rag", is_article, article_passage)
