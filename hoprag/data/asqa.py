"""ASQA (Stelmakh et al., 2022; official `ASQA.json`): ambiguous questions with disambiguated `qa_pairs`.

The release is one JSON object `{"train": {sample_id: record}, "dev": {sample_id: record}}`, not a list,
so it is read here (`iter_release`, one split at a time, dev by default) rather than by `iter_records`;
a list or JSONL of the same records (as TreeRare's `asqa.json`) goes through `iter_records` as usual.

`answers` are every pair's short answers, flattened, for the generic metrics. What the ASQA metrics read
(STR-EM, Disambig-F1) is `metadata["ambiguity"] = {"qa_pairs": [{"question", "short_answers"}]}`, which
the runner keeps in each prediction record. The official `qa_pairs` (with their `context` and `wikipage`),
`wikipages` and `annotations` (long answers, knowledge) stay in `metadata` as they are.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from typing import Any

from hoprag.data import validation as check
from hoprag.data.records import DataFormatError, distinct, extra_fields, open_binary
from hoprag.data.types import QAExample

ASQA_KEYS = ("sample_id", "ambiguous_question")
# The release opens with its first split's name: `{"train": {` (or `{"dev": {`), whatever the indentation.
_RELEASE_START = re.compile(rb'\{\s*"(?:train|dev)"\s*:\s*\{')


def _pair(i: int, pair: dict[str, Any]) -> dict[str, Any]:
    """A disambiguated pair as the metrics read it: its question and short answers."""
    return {
        "question": check.question(pair["question"], f"qa_pairs[{i}].question"),
        "short_answers": check.answers(pair["short_answers"], f"qa_pairs[{i}].short_answers"),
    }


def parse_asqa(record: dict[str, Any]) -> QAExample:
    pairs = [_pair(i, pair) for i, pair in enumerate(check.objects(record["qa_pairs"], "qa_pairs"))]
    titles = [check.text(w["title"], f"wikipages[{i}].title") for i, w in enumerate(record.get("wikipages", []))]
    return QAExample(
        id=check.identifier(record["sample_id"], "sample_id"),
        question=check.question(record["ambiguous_question"], "ambiguous_question"),
        answers=distinct(a for pair in pairs for a in pair["short_answers"]),
        dataset="asqa",
        supporting_titles=distinct(titles),
        metadata={**extra_fields(record, ASQA_KEYS), "ambiguity": {"qa_pairs": pairs}},
    )


def is_release(path: str | os.PathLike) -> bool:
    """Whether the file is the official split-keyed `ASQA.json` (read from its first bytes only)."""
    with open_binary(path) as f:
        return _RELEASE_START.match(f.read(256).lstrip()) is not None


def iter_release(path: str | os.PathLike, split: str = "dev") -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield `(location, record)` for one split of the official file, in file order; `location` names the
    file, the split and the sample id (the release is a single JSON line, so a line number says nothing)."""
    with open_binary(path) as f:
        try:
            release = json.loads(f.read().decode("utf-8"))
        except UnicodeDecodeError as e:
            raise DataFormatError(f"{path} (byte offset {e.start}): not UTF-8 text") from None
        except json.JSONDecodeError as e:
            raise DataFormatError(f"{path}, line {e.lineno}: invalid JSON ({e.msg})") from None
    if split not in release:
        raise DataFormatError(f"{path} has no split {split!r}; it has {sorted(release)}")
    samples = release[split]
    if not isinstance(samples, dict) or not samples:
        raise DataFormatError(f"{path}, split {split!r}: expected an object of samples keyed by sample_id")
    for sample_id, record in samples.items():
        where = f"{path}, {split} sample {sample_id!r}"
        if not isinstance(record, dict):
            raise DataFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
        yield where, record
