"""Positives and hard negatives for a question, as a reranker is trained on them.

A question's positives are its own context paragraphs whose title is a gold title (the same rule the gold-passage
recall metric scores by, so a paragraph the metric would credit is never a negative). Hard negatives are a
retriever's top hits for the question over the pooled training corpora (BM25 and the dense index each give a
list), with every hit whose title is a gold title removed: in pooled corpora the same Wikipedia page recurs as
another question's paragraph under another id, and training it as irrelevant would teach the reranker to demote
the very passages recall counts. How many hits the filter removed is returned, so it is reported, not silent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hoprag.data.types import Passage, QAExample
from hoprag.retrieval.retrievers import Hit, Retriever


@dataclass(frozen=True)
class Mined:
    """One retriever's hard negatives per question (best first), and the false negatives it dropped."""

    negatives: list[list[Passage]]
    dropped: int


def gold_passages(example: QAExample) -> list[Passage]:
    """The question's own paragraphs that carry a gold title, in context order."""
    gold = set(example.supporting_titles)
    return [p for p in example.context if p.title in gold]


def drop_false_negatives(hits: Sequence[Hit], gold_titles: Sequence[str]) -> tuple[list[Passage], int]:
    """The hits' passages without those titled like a gold passage (whatever their id), and how many were dropped."""
    gold = set(gold_titles)
    kept = [h.passage for h in hits if h.passage.title not in gold]
    return kept, len(hits) - len(kept)


def mine(examples: Sequence[QAExample], retriever: Retriever, depth: int, batch_size: int = 256) -> Mined:
    """Per question, `retriever`'s top `depth` hits for the question minus its false negatives (fewer than `depth`
    remain when some were gold-titled or the retriever found fewer)."""
    negatives: list[list[Passage]] = []
    dropped = 0
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        for example, hits in zip(batch, retriever.search([ex.question for ex in batch], depth)):
            kept, removed = drop_false_negatives(hits, example.supporting_titles)
            negatives.append(kept)
            dropped += removed
    return Mined(negatives, dropped)
