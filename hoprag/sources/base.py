"""What a knowledge source is to PruningRAG: evidence for a batch of questions, as `Passage`s.

Each source returns, per question, the evidence it keeps after its own fine-grained pruning, with `origin`
naming the source (web, api, table, text) so the records say where every piece came from. The `llm` source
(parametric knowledge) returns nothing: the answerer then gets no references section.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample


class Source(Protocol):
    def fetch(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[list[Passage]]: ...


class ContextSource:
    """A question's own evidence of one origin (TAT-QA: its table, or its paragraphs), kept whole."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fetch(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[list[Passage]]:
        return [[p for p in ex.context if p.origin == self.origin] for ex in examples]


class ParametricSource:
    """The LLM's own knowledge: no evidence."""

    def fetch(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[list[Passage]]:
        return [[] for _ in examples]
