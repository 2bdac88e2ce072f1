"""TAT-QA (official `tatqa_dataset_{train,dev}.json`): hybrid table + text questions over financial reports.

One record is a *context* (a table, its paragraphs and several questions), so the parser returns one
`QAExample` per question. Each question's `context` holds its two kinds of source, named by
`Passage.origin`: the table rendered as text (origin "table", one `cell | cell | ...` line per row) and
each paragraph (origin "text"). `answer_from` (table | text | table-text) is the gold source label a
knowledge-source router is scored against (spec/pruningrag.md §5); it stays in `metadata`, with the
answer's `scale` (thousand, million, percent, ...), which the bare answer strings do not carry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hoprag.data import validation as check
from hoprag.data.records import extra_fields
from hoprag.data.types import Passage, QAExample

ANSWER_FROM = ("table", "text", "table-text")
QUESTION_KEYS = ("uid", "question", "answer", "answer_type", "answer_from", "scale", "rel_paragraphs")


def render_table(rows: Sequence[Sequence[str]]) -> str:
    """One line per row, its cells joined by " | " (empty cells kept, so `line.split(" | ")` gives the row back
    and columns stay in place); whitespace inside a cell is collapsed, so a cell never breaks its row, and rows
    whose cells are all empty are dropped."""
    lines = []
    for row in rows:
        cells = [" ".join(cell.split()) for cell in row]
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(lines)


def _table(record: dict[str, Any]) -> Passage:
    table = record["table"]
    rows = check.key(table, "table", "table")
    if not isinstance(rows, list):
        raise ValueError(f"'table.table' must be a list of rows, got {type(rows).__name__}")
    for i, row in enumerate(rows):
        if not isinstance(row, list):
            raise ValueError(f"'table.table[{i}]' must be a list of cells, got {type(row).__name__}")
        for j, cell in enumerate(row):
            check.text(cell, f"table.table[{i}][{j}]")
    uid = check.identifier(check.key(table, "uid", "table"), "table.uid")
    return Passage(id=uid, title="", text=render_table(rows), origin="table")


def _paragraphs(record: dict[str, Any]) -> list[Passage]:
    paragraphs = record["paragraphs"]
    if not isinstance(paragraphs, list):
        raise ValueError(f"'paragraphs' must be a list of objects, got {type(paragraphs).__name__}")
    read = []
    for i, p in enumerate(paragraphs):
        where = f"paragraphs[{i}]"
        order = check.integer(check.key(p, "order", where), f"{where}.order")
        uid = check.identifier(check.key(p, "uid", where), f"{where}.uid")
        text = check.text(check.key(p, "text", where), f"{where}.text")
        read.append((order, Passage(id=uid, title="", text=text, origin="text")))
    return [p for _, p in sorted(read, key=lambda item: item[0])]


def _answers(value: Any, field: str) -> list[str]:
    """A list answer (spans) gives each item; a string or a number (arithmetic, count) gives one."""
    return check.answers(value, field) if isinstance(value, list) else [check.answer(value, field)]


def _question(q: Any, i: int, context_uid: str, context: list[Passage]) -> QAExample:
    where = f"questions[{i}]"
    answer_from = check.choice(check.key(q, "answer_from", where), f"{where}.answer_from", ANSWER_FROM)
    answer_type = check.text(check.key(q, "answer_type", where), f"{where}.answer_type")
    rel = check.key(q, "rel_paragraphs", where)
    if not isinstance(rel, list):
        raise ValueError(f"'{where}.rel_paragraphs' must be a list, got {type(rel).__name__}")
    return QAExample(
        id=check.identifier(check.key(q, "uid", where), f"{where}.uid"),
        question=check.question(check.key(q, "question", where), f"{where}.question"),
        answers=_answers(check.key(q, "answer", where), f"{where}.answer"),
        dataset="tatqa",
        type=answer_type,
        context=list(context),
        metadata={
            "context_uid": context_uid,
            "answer_from": answer_from,
            "answer_type": answer_type,
            "scale": check.text(check.key(q, "scale", where), f"{where}.scale"),
            "rel_paragraphs": [check.identifier(r, f"{where}.rel_paragraphs[{j}]") for j, r in enumerate(rel)],
            **extra_fields(q, QUESTION_KEYS),
        },
    )


def parse_tatqa(record: dict[str, Any]) -> list[QAExample]:
    """The context's questions, in file order, each with the context's table and paragraphs."""
    table = _table(record)
    context = [table, *_paragraphs(record)]
    questions = check.objects(record["questions"], "questions")
    return [_question(q, i, table.id, context) for i, q in enumerate(questions)]
