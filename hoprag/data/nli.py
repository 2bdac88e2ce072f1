"""NLI pairs in the Hugging Face `multi_nli` / `snli` schema, for training and validating an NLI verifier."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass
from typing import Any

from hoprag.data import validation as check
from hoprag.data.records import iter_records, parse_records

LABELS = ("entailment", "neutral", "contradiction")  # label ids 0, 1, 2 as in multi_nli / snli


@dataclass(frozen=True)
class NLIPair:
    premise: str
    hypothesis: str
    label: int
    source: str = ""

    @property
    def label_name(self) -> str:
        return LABELS[self.label]


def _parse(record: dict[str, Any]) -> NLIPair:
    label = record["label"]
    if type(label) is not int or label not in (0, 1, 2):
        raise ValueError(f"label must be 0, 1 or 2 ({'/'.join(LABELS)}), got {label!r}")
    return NLIPair(
        premise=check.text(record["premise"], "premise"),
        hypothesis=check.text(record["hypothesis"], "hypothesis"),
        label=label,
        source=str(record.get("source", "")),
    )


def load_nli(path: str | os.PathLike, limit: int | None = None) -> list[NLIPair]:
    """`{premise, hypothesis, label, source}` JSONL; unlabeled pairs (`-1`) are rejected, not skipped."""
    return list(itertools.islice(parse_records(iter_records(path), _parse), limit))
