"""FlashRAG dataset JSONL `{id, question, golden_answers, metadata}`: read, and export any dataset to it.

FlashRAG keeps dataset-specific gold data in `metadata`: `supporting_facts` as a dict of lists
(`{"title": [...], "sent_id": [...]}`), `type`, and for HotpotQA / 2Wiki the distractor `context` as
`{"title": [...], "sentences" | "content": [[...]]}`. The exporter writes the same keys, plus
`supporting_titles`, `decomposition` and `evidences` where FlashRAG has no slot, so that
`write_flashrag` → `load_questions` gives back the same `QAExample`s (context passage ids are content
hashes and are recomputed identically).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from hoprag.data import validation as check
from hoprag.data.corpus import make_passage, unique_passages
from hoprag.data.records import distinct, write_jsonl
from hoprag.data.types import Hop, Passage, QAExample

# metadata keys that map onto QAExample fields; everything else stays in QAExample.metadata
GOLD_KEYS = ("type", "supporting_facts", "supporting_titles", "decomposition", "evidences", "context")


def _facts(raw: Any) -> list[tuple[str, int]]:
    field = "metadata.supporting_facts"
    if not isinstance(raw, dict):
        return check.each(raw, field, check.fact)  # list of [title, sent_id]
    titles = check.each(raw.get("title", []), f"{field}.title", check.text)  # FlashRAG's dict of lists
    if raw.get("sent_id") is None:
        return [(t, -1) for t in titles]  # titles only; -1 = sentence unknown
    ids = check.each(raw["sent_id"], f"{field}.sent_id", check.integer)
    if len(ids) != len(titles):
        raise ValueError(f"{field}: 'title' and 'sent_id' differ in length")
    return list(zip(titles, ids))


def _hop(raw: Any, field: str) -> Hop:
    """A decomposition step as `to_flashrag` writes it: `{question, answer, support_title}`."""
    support = check.mapping(raw, field).get("support_title")
    return Hop(
        check.text(check.key(raw, "question", field), f"{field}.question"),
        check.answer(check.key(raw, "answer", field), f"{field}.answer"),
        None if support is None else check.text(support, f"{field}.support_title"),
    )


def join_sentences(sentences: list[str]) -> str:
    """Join with a space only where neither side has one (HotpotQA sentences carry their leading
    space, 2Wiki's do not; FlashRAG mixes both under the same keys)."""
    text = ""
    for s in sentences:
        if text and s and not text[-1].isspace() and not s[:1].isspace():
            text += " "
        text += s
    return text


def _paired(columns: dict[str, Any], field: str) -> list[list[Any]]:
    """FlashRAG's `{title: [...], sentences | content: [[...]]}` as `[title, sentences]` pairs."""
    texts = "sentences" if "sentences" in columns else "content"
    titles = check.listed(check.key(columns, "title", field), f"{field}.title")
    paragraphs = check.listed(check.key(columns, texts, field), f"{field}.{texts}")
    if len(titles) != len(paragraphs):
        raise ValueError(f"{field}: 'title' and {texts!r} differ in length")
    return [list(pair) for pair in zip(titles, paragraphs)]


def _context(raw: Any) -> list[Passage]:
    field = "metadata.context"
    raw = _paired(raw, field) if isinstance(raw, dict) else raw
    pairs = check.each(raw, field, lambda item, where: check.shaped(item, where, ("title", "sentences")))
    return unique_passages(
        make_passage(
            check.text(t, f"{field}[{i}] title"),
            join_sentences(check.sentences(s, f"{field}[{i}] sentences")),
        )
        for i, (t, s) in enumerate(pairs)
    )


def parse_flashrag(record: dict[str, Any]) -> QAExample:
    answers = check.answers(record["golden_answers"], "golden_answers")
    meta = dict(check.mapping(record.get("metadata") or {}, "metadata"))
    facts = _facts(meta.get("supporting_facts", []))
    titles = check.each(meta.get("supporting_titles", [t for t, _ in facts]), "metadata.supporting_titles", check.text)
    return QAExample(
        id=check.identifier(record["id"], "id"),
        question=check.question(record["question"]),
        answers=answers,
        dataset="flashrag",
        type=meta.get("type"),
        supporting_titles=distinct(titles),
        supporting_facts=[f for f in facts if f[1] >= 0],
        decomposition=check.each(meta.get("decomposition", []), "metadata.decomposition", _hop),
        evidences=check.each(meta.get("evidences", []), "metadata.evidences", check.triple),
        context=_context(meta.get("context", [])),
        metadata={k: v for k, v in meta.items() if k not in GOLD_KEYS},
    )


def to_flashrag(example: QAExample) -> dict[str, Any]:
    """One FlashRAG dataset record; passages are written as one-sentence paragraphs (exact text)."""
    meta = dict(example.metadata)
    if example.type is not None:
        meta["type"] = example.type
    if example.supporting_facts:
        meta["supporting_facts"] = {
            "title": [t for t, _ in example.supporting_facts],
            "sent_id": [i for _, i in example.supporting_facts],
        }
    if example.supporting_titles:
        meta["supporting_titles"] = list(example.supporting_titles)
    if example.decomposition:
        meta["decomposition"] = [asdict(h) for h in example.decomposition]
    if example.evidences:
        meta["evidences"] = [list(e) for e in example.evidences]
    if example.context:
        meta["context"] = {
            "title": [p.title for p in example.context],
            "sentences": [[p.text] for p in example.context],
        }
    return {
        "id": example.id,
        "question": example.question,
        "golden_answers": list(example.answers),
        "metadata": meta,
    }


def write_flashrag(examples: Iterable[QAExample], path: str | os.PathLike) -> Path:
    """Export to FlashRAG dataset JSONL (FlashRAG itself reads `<dataset>/<split>.jsonl`)."""
    return write_jsonl((to_flashrag(ex) for ex in examples), path)
