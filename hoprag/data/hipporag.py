"""HippoRAG 2's evaluation subsets (OSU-NLP-Group/HippoRAG `reproduce/dataset/<set>.json`, hub `osunlp/HippoRAG_2`):
NQ and PopQA as Self-Correcting RAG evaluates them (its digest §8.1).

A record is `{question, <answers>, paragraphs: [{title, text, is_supporting}]}`; the set's corpus is
`<set>_corpus.json`, a JSON list of `{title, text}`, read as FlashRAG's title + text fallback
(`hoprag.data.corpus`): content-hash ids, so a question's paragraphs and their corpus entries share ids, and
two entries under one title stay two passages (digest A12). Answers are read as HippoRAG's `main.py` reads
them: `answer` (a string or a list; older dumps `gold_ans`) plus `answer_aliases`, and PopQA's
`possible_answers`, the answer with its aliases stored as a JSON *string* that must be parsed (digest §8.2).
The gold passages are the paragraphs marked `is_supporting` (digest A12), not every paragraph as the paper's
released loader counts them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hoprag.data import validation as check
from hoprag.data.corpus import make_passage, unique_passages
from hoprag.data.records import distinct, extra_fields
from hoprag.data.types import Passage, QAExample

HIPPORAG_KEYS = ("id", "question", "answer", "gold_ans", "answer_aliases", "possible_answers", "paragraphs")


def question_id(record: dict[str, Any], question: str) -> str:
    """The record's `id` (PopQA's); NQ's subset may carry none, so then a hash of the question text, stable
    across runs and subsets (as MultiHop-RAG's queries get)."""
    if "id" in record:
        return check.identifier(record["id"], "id")
    return "hr_" + hashlib.sha1(question.encode("utf-8")).hexdigest()[:12]


def parsed_answers(record: dict[str, Any]) -> list[str]:
    """The gold answers, first the answer, then its aliases."""
    if "possible_answers" in record:  # PopQA: '["politician", "political leader", ...]'
        raw = record["possible_answers"]
        try:
            values = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as e:
            raise ValueError(f"'possible_answers' is not a JSON list ({e}): {raw[:60]!r}") from None
        gold = check.answers(values, "possible_answers")
    else:
        field = "answer" if "answer" in record else "gold_ans"  # a record with neither: missing 'gold_ans'
        value = record[field]
        gold = check.answers(value, field) if isinstance(value, list) else [check.answer(value, field)]
    return distinct([*gold, *check.answers(record.get("answer_aliases", []), "answer_aliases", required=False)])


def paragraphs(record: dict[str, Any]) -> list[tuple[Passage, bool]]:
    """Each paragraph as a passage with its `is_supporting` mark, every field checked."""
    out = []
    for i, p in enumerate(check.objects(record["paragraphs"], "paragraphs")):
        where = f"paragraphs[{i}]"
        title = check.text(check.key(p, "title", where), f"{where}.title")
        text = check.text(check.key(p, "text", where), f"{where}.text")
        supporting = check.boolean(check.key(p, "is_supporting", where), f"{where}.is_supporting")
        out.append((make_passage(title, text), supporting))
    return out


def parse_hipporag(record: dict[str, Any]) -> QAExample:
    question = check.question(record["question"])
    marked = paragraphs(record)
    return QAExample(
        id=question_id(record, question),
        question=question,
        answers=parsed_answers(record),
        dataset="hipporag",
        type=record.get("prop"),  # PopQA's relation ("occupation"); NQ has none
        supporting_titles=distinct(p.title for p, supporting in marked if supporting),
        context=unique_passages(p for p, _ in marked),
        metadata=extra_fields(record, HIPPORAG_KEYS),
    )
