"""MuSiQue (official `musique_{ans,full}_v1.0_*.jsonl`): paragraphs, decomposition, aliases.

The hop type ("2hop", "3hop1", ...) is only encoded in the id prefix (`2hop__574419_270105`), so it is
read from there.
"""

from __future__ import annotations

from typing import Any

from hoprag.data import validation as check
from hoprag.data.corpus import make_passage, unique_passages
from hoprag.data.records import distinct, extra_fields
from hoprag.data.types import Hop, QAExample

MUSIQUE_KEYS = (
    "id", "paragraphs", "question", "question_decomposition", "answer", "answer_aliases",
)


def _paragraphs(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The paragraphs in `idx` order, each checked; `is_supporting` is on all of them or on none (older
    dumps): a paragraph without it where others have it would silently count as a distractor."""
    paragraphs = check.objects(record["paragraphs"], "paragraphs", required=False)
    marked = any("is_supporting" in p for p in paragraphs)
    for i, p in enumerate(paragraphs):
        where = f"paragraphs[{i}]"
        check.integer(check.key(p, "idx", where), f"{where}.idx")
        check.text(check.key(p, "title", where), f"{where}.title")
        check.text(check.key(p, "paragraph_text", where), f"{where}.paragraph_text")
        if marked:
            check.boolean(check.key(p, "is_supporting", where), f"{where}.is_supporting")
    return sorted(paragraphs, key=lambda p: p["idx"])


def _steps(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The decomposition's steps, each with a question and an answer."""
    steps = check.objects(record.get("question_decomposition", []), "question_decomposition", required=False)
    for i, step in enumerate(steps):
        where = f"question_decomposition[{i}]"
        check.text(check.key(step, "question", where), f"{where}.question")
        check.answer(check.key(step, "answer", where), f"{where}.answer")
    return steps


def parse_musique(record: dict[str, Any]) -> QAExample:
    qid = check.identifier(record["id"], "id")
    paragraphs = _paragraphs(record)
    title_of = {p["idx"]: p["title"] for p in paragraphs}
    steps = _steps(record)
    if any("is_supporting" in p for p in paragraphs):
        gold = [p["title"] for p in paragraphs if p.get("is_supporting")]
    else:  # older dumps: derive the gold paragraphs from the decomposition
        support = {s.get("paragraph_support_idx") for s in steps}
        gold = [p["title"] for p in paragraphs if p["idx"] in support]
    return QAExample(
        id=qid,
        question=check.question(record["question"]),
        answers=distinct([
            check.answer(record["answer"], "answer"),
            *check.answers(record.get("answer_aliases", []), "answer_aliases", required=False),
        ]),
        dataset="musique",
        type=qid.split("__")[0] if "__" in qid else None,
        supporting_titles=distinct(gold),
        decomposition=[
            Hop(s["question"], str(s["answer"]), title_of.get(s.get("paragraph_support_idx")))
            for s in steps
        ],
        context=unique_passages(make_passage(p["title"], p["paragraph_text"]) for p in paragraphs),
        metadata=extra_fields(record, MUSIQUE_KEYS),
    )
