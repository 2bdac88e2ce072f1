"""HotpotQA (official distractor / train JSON) and the sentence-split context it shares with 2Wiki.

Both datasets give `context` as `[[title, [sentences]]]` and `supporting_facts` as `[[title, sent_id]]`.
The sentence lists are kept in `metadata["sentences"]` (title → sentences) because sentence-level
supporting-fact metrics need the dataset's own segmentation, which a joined passage loses.
"""

from __future__ import annotations

from typing import Any

from hoprag.data import validation as check
from hoprag.data.corpus import make_passage, unique_passages
from hoprag.data.records import distinct, extra_fields
from hoprag.data.types import Passage, QAExample

HOTPOT_KEYS = ("_id", "question", "answer", "type", "supporting_facts", "context")


def sentence_context(context: list, joiner: str) -> tuple[list[Passage], dict[str, list[str]]]:
    """Passages (deduplicated) and title → sentences from `[[title, [sentences]]]`."""
    passages, sentences = [], {}
    for i, item in enumerate(check.listed(context, "context")):
        title, sents = check.shaped(item, f"context[{i}]", ("title", "sentences"))
        title = check.text(title, f"context[{i}] title")
        sents = check.sentences(sents, f"context[{i}] sentences")
        sentences.setdefault(title, sents)
        passages.append(make_passage(title, joiner.join(sents)))
    return unique_passages(passages), sentences


def supporting_facts(
    record: dict[str, Any], sentences: dict[str, list[str]]
) -> tuple[list[tuple[str, int]], int]:
    """`(title, sent_id)` facts, all kept, and how many point outside the context.

    2Wiki's original release has facts one sentence past the end of their paragraph; they are kept so
    evaluation matches the official scorer, and counted so users can see them.
    """
    facts = check.each(record.get("supporting_facts", []), "supporting_facts", check.fact)
    invalid = sum(1 for t, i in facts if not 0 <= i < len(sentences.get(t, ())))
    return facts, invalid


def parse_hotpotqa(record: dict[str, Any]) -> QAExample:
    # HotpotQA sentences keep their leading spaces, so "".join restores the paragraph.
    context, sentences = sentence_context(record["context"], "")
    facts, invalid = supporting_facts(record, sentences)
    return QAExample(
        id=check.identifier(record["_id"], "_id"),
        question=check.question(record["question"]),
        answers=[check.answer(record["answer"], "answer")],
        dataset="hotpotqa",
        type=record.get("type"),
        supporting_titles=distinct(t for t, _ in facts),
        supporting_facts=facts,
        context=context,
        metadata={
            **extra_fields(record, HOTPOT_KEYS),
            "sentences": sentences,
            "invalid_supporting_facts": invalid,
        },
    )
