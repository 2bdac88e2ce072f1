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


def parse_musique(record: dict[str, Any]) -> QAExample:
    qid = check.identifier(record["id"], "id")
    for i, p in enumerate(record["paragraphs"]):
        check.text(p["title"], f"paragraphs[{i}].title")
        check.text(p["paragraph_text"], f"paragraphs[{i}].paragraph_text")
    paragraphs = sorted(record["paragraphs"], key=lambda p: p["idx"])
    title_of = {p["idx"]: p["title"] for p in paragraphs}
    steps = record.get("question_decomposition", [])
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
