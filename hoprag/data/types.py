"""The one record model every dataset is loaded into.

Loaders map each official format onto `QAExample` (a question) and `Passage` (a retrievable unit), so
methods, metrics and indexes never see dataset-specific fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Passage:
    """A unit of evidence: FlashRAG's corpus record `{id, contents="title\\ntext"}` split in two, or any
    other evidence a method reads (a question's own web page, a knowledge-graph fact, a table row), with
    `origin` naming where it came from ("" for the retrieval corpus)."""

    id: str
    title: str
    text: str
    origin: str = ""

    @property
    def contents(self) -> str:
        return f"{self.title}\n{self.text}"


@dataclass(frozen=True)
class Hop:
    """One step of a gold decomposition: a sub-question (or relation triple) and its answer.

    `support_title` names the passage that supports this hop when the dataset says so (MuSiQue's
    `paragraph_support_idx`, 2Wiki evidences matched to context titles).
    """

    question: str
    answer: str
    support_title: str | None = None


@dataclass
class QAExample:
    """A question with everything a multi-hop method or metric may need.

    `answers` holds the gold answer first, then its aliases. `supporting_titles` are the distinct gold
    passage titles in dataset order. `context` is the question's own passage set (distractor setting),
    empty for open-domain datasets such as Bamboogle.
    """

    id: str
    question: str
    answers: list[str]
    dataset: str = ""
    type: str | None = None
    supporting_titles: list[str] = field(default_factory=list)
    supporting_facts: list[tuple[str, int]] = field(default_factory=list)
    decomposition: list[Hop] = field(default_factory=list)
    evidences: list[tuple[str, str, str]] = field(default_factory=list)
    context: list[Passage] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
