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
    if isinstance(raw, dict):  # FlashRAG's dict of lists
        titles, ids = raw.get("title", []), raw.get("sent_id")
        if ids is None:
            return [(str(t), -1) for t in titles]  # titles only; -1 = sentence unknown
        if len(ids) != len(titles):
            raise ValueError("metadata.supporting_facts: 'title' and 'sent_id' differ in length")
        return [(str(t), int(i)) for t, i in zip(titles, ids)]
    return [(str(t), int(i)) for t, i in raw]  # list of [title, sent_id]


def join_sentences(sentences: list[str]) -> str:
    """Join with a space only where neither side has one (HotpotQA sentences carry their leading
    space, 2Wiki's do not; FlashRAG mixes both under the same keys)."""
    text = ""
    for s in sentences:
        if text and s and not text[-1].isspace() and not s[:1].isspace():
            text += " "
        text += s
    return text


def _context(raw: Any) -> list[Passage]:
    if isinstance(raw, dict):
        raw = zip(raw["title"], raw["sentences"] if "sentences" in raw else raw["content"])
    return unique_passages(
        make_passage(
            check.text(t, f"metadata.context[{i}] title"),
            join_sentences(check.sentences(s, f"metadata.context[{i}] sentences")),
        )
        for i, (t, s) in enumerate(raw)
    )


def parse_flashrag(record: dict[str, Any]) -> QAExample:
    answers = check.answers(record["golden_answers"], "golden_answers")
    meta = dict(record.get("metadata") or {})
    facts = _facts(meta.get("supporting_facts", []))
    titles = meta.get("supporting_titles", [t for t, _ in facts])
    return QAExample(
        id=check.identifier(record["id"], "id"),
        question=check.question(record["question"]),
        answers=answers,
        dataset="flashrag",
        type=meta.get("type"),
        supporting_titles=distinct(titles),
        supporting_facts=[f for f in facts if f[1] >= 0],
        decomposition=[Hop(**h) for h in meta.get("decomposition", [])],
        evidences=[(str(s), str(r), str(o)) for s, r, o in meta.get("evidences", [])],
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
