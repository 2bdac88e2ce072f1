"""2WikiMultihopQA (official train/dev JSON): evidence triples become the gold decomposition.

Each evidence `(subject, relation, object)` is one hop, asked MuSiQue-style as "subject >> relation".
Its support passage is the context paragraph about the subject; 2Wiki names subjects by entity label
("Get Low") while paragraphs carry Wikipedia titles ("Get Low (Dillon Francis and DJ Snake song)"),
so `match_title` tries exact, then normalised, then word-subset matches (gold titles first).

The official evaluator (Alab-NII/2wikimultihop, 2wikimultihop_evaluate_v1.1.py) scores an answer against the
gold answer and every alias of its Wikidata entity: `id_aliases.json` (JSON Lines `{Q_id, aliases, demonyms}`,
shipped with the release that added `answer_id`) beside the questions file does the same here (`add_aliases`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hoprag.data import validation as check
from hoprag.data.hotpotqa import sentence_context, supporting_facts
from hoprag.data.records import DataFormatError, distinct, extra_fields
from hoprag.data.types import Hop, QAExample

log = logging.getLogger(__name__)

ALIASES_FILE = "id_aliases.json"
TWOWIKI_KEYS = (
    "_id", "type", "question", "context", "supporting_facts", "evidences", "answer",
)


def normalize_title(text: str) -> str:
    """Case-, accent- and punctuation-insensitive form ("Bohème" == "Boheme")."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    return " ".join(re.sub(r"\W+", " ", text).split())


def base_title(title: str) -> str:
    """Title without its Wikipedia disambiguation suffix: "Get Low (… song)" → "Get Low"."""
    return re.sub(r"\s*\([^()]*\)$", "", title)


def match_title(subject: str, titles: list[str], gold: list[str]) -> str | None:
    """The context title an evidence subject refers to, or None when no match is safe.

    Word-subset matches ("Mills Edwin Godwin" ↔ "Mills Godwin") are only tried against the gold
    titles and only accepted when exactly one gold title fits; distractors are too similar otherwise.
    """
    for pool in (gold, titles):
        if subject in pool:
            return subject
    key = normalize_title(subject)
    for pool in (gold, titles):
        for title in pool:
            if key in (normalize_title(title), normalize_title(base_title(title))):
                return title
    words = set(key.split())
    fits = [t for t in gold if (w := set(normalize_title(base_title(t)).split())) and (w <= words or words <= w)]
    return fits[0] if len(fits) == 1 else None


def parse_2wiki(record: dict[str, Any]) -> QAExample:
    # 2Wiki sentences have no leading spaces, so they are joined with one.
    context, sentences = sentence_context(record["context"], " ")
    facts, invalid = supporting_facts(record, sentences)
    gold = distinct(t for t, _ in facts)
    titles = [p.title for p in context]
    evidences = check.each(record.get("evidences", []), "evidences", check.triple)
    return QAExample(
        id=check.identifier(record["_id"], "_id"),
        question=check.question(record["question"]),
        answers=[check.answer(record["answer"], "answer")],
        dataset="2wikimultihopqa",
        type=record.get("type"),
        supporting_titles=gold,
        supporting_facts=facts,
        decomposition=[Hop(f"{s} >> {r}", o, match_title(s, titles, gold)) for s, r, o in evidences],
        evidences=evidences,
        context=context,
        metadata={
            **extra_fields(record, TWOWIKI_KEYS),
            "sentences": sentences,
            "invalid_supporting_facts": invalid,
        },
    )


def read_aliases(path: str | os.PathLike) -> dict[str, list[str]]:
    """Wikidata id → its names, as the official evaluator reads `id_aliases.json`: one JSON object a line,
    `aliases` and `demonyms` united (sorted here, so the gold list is the same in every run)."""
    aliases = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                aliases[entry["Q_id"]] = sorted(set(entry["aliases"]) | set(entry["demonyms"]))
            except (ValueError, KeyError, TypeError) as e:
                raise DataFormatError(f"{path}, line {n}: not an id_aliases.json entry ({e})") from None
    return aliases


def add_aliases(examples: Sequence[QAExample], questions: str | os.PathLike) -> int:
    """Extend each question's gold answers with the aliases of its `answer_id` when `id_aliases.json` lies beside
    the questions file, as the official evaluator does (gold = {answer} ∪ aliases; EM and F1 take the best of
    them, as hoprag.metrics.answer does for every dataset); the number of questions with aliases. Without the file,
    or for questions without an `answer_id` (the release without ids), nothing changes."""
    path = Path(questions).with_name(ALIASES_FILE)
    if not path.is_file():
        return 0
    aliases = read_aliases(path)
    extended = 0
    for ex in examples:
        names = aliases.get(ex.metadata.get("answer_id"), [])
        if names:  # idempotent: a second call adds nothing and counts the same questions
            ex.answers.extend(a for a in names if a not in ex.answers)
            ex.metadata["answer_aliases"] = ALIASES_FILE
            extended += 1
    log.info("2Wiki answer aliases from %s (the official evaluator's): %d of %d questions gained aliases",
             path, extended, len(examples))  # fmt: skip
    return extended
