"""Token cost of a passage: counted by the generator on the passage as its prompt renders it, or the
official 1.3 × words heuristic when asked for by name.

A method builds the counter with its LLM and its `PassageFormat` and gives it to its selector at
construction, so a cost is the tokens the passage adds to the prompt: the passage written with the prompt's
template (its rank taken as its position in the candidate pool, within a token of the rank it gets in the
context) plus the separator. There is no silent fallback: a backend that cannot count tokens raises, naming the setting
that fixes it (e.g. `llm.tokenizer` for an OpenAI-compatible server).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hoprag.data.types import Passage
from hoprag.llm.prompts import PassageFormat

MODES = ("tokenizer", "words")


def words_x13(text: str) -> int:
    """The official code's length: max(1, int(1.3 · whitespace words))."""
    return max(1, int(1.3 * len(text.split())))


class TokenCounter:
    """`mode="tokenizer"` counts with `tokenizer` (a transformers tokenizer) when given, else with `llm` (the
    generator), on passages as `passages` renders them; `mode="words"` is the official option (text only,
    titles not counted, as the code does)."""

    def __init__(
        self, mode: str = "tokenizer", tokenizer: Any = None, llm: Any = None, passages: PassageFormat | None = None
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"token length mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.tokenizer = tokenizer
        self.llm = llm
        self.passages = passages or PassageFormat()
        self._cache: dict[tuple[str, int], int] = {}

    def describe(self) -> str:
        """How costs are counted, for the run's record."""
        if self.mode == "words":
            return "words x 1.3 (official)"
        source = "given tokenizer" if self.tokenizer is not None else self._llm().token_counting
        return f"{source} on {self.passages.template!r} + {self.passages.separator!r}"

    def _llm(self) -> Any:
        if self.llm is None:
            raise RuntimeError("TokenCounter(mode='tokenizer') needs a tokenizer or an llm to count with")
        return self.llm

    def __call__(self, passages: Sequence[Passage]) -> np.ndarray:
        if self.mode == "words":
            return np.array([words_x13(p.text) for p in passages], dtype=np.int64)
        keys = [(p.id, rank) for rank, p in enumerate(passages, 1)]
        todo = [(key, p) for key, p in zip(keys, passages) if key not in self._cache]
        if todo:
            texts = [self.passages.unit(rank, p) + self.passages.separator for (_, rank), p in todo]
            if self.tokenizer is not None:
                counts = [len(self.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
            else:
                counts = self._llm().count_tokens(texts)
            self._cache.update((key, max(1, n)) for (key, _), n in zip(todo, counts))
        return np.array([self._cache[key] for key in keys], dtype=np.int64)
