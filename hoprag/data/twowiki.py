"""2WikiMultihopQA (official train/dev JSON): evidence triples become the gold decomposition.

Each evidence `(subject, relation, object)` is one hop, asked MuSiQue-style as "subject >> relation".
Its support passage is the context paragraph about the subject; 2Wiki names subjects by entity label
("Get Low") while paragraphs carry Wikipedia titles ("Get Low (Dillon Francis and DJ Snake song)"),
so `match_title` tries exact, then normalised, then word-subset matches (gold titles first).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from hoprag.data import validation as check
from hoprag.data.hotpotqa import sentence_context, supporting_facts
from hoprag.data.records import distinct, extra_fields
from hoprag.data.types import Hop, QAExample

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
