"""Value checks every loader applies to the fields it reads, so a bad record fails at load time.

Without them `str(None)` turns a null answer into the gold answer "None" and a null passage text into a
passage about "None", and an empty answer list only fails when the metrics run, after the LLM answered.
Each check raises `ValueError` naming the field; `parse_records` adds the file and line.
"""

from __future__ import annotations

import json
from typing import Any


def _shown(value: Any) -> str:
    """The value as it reads in the file (`null`, `true`, `[]`), cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def text(value: Any, field: str) -> str:
    """A passage title or text, a sentence, a premise: any string (empty allowed), never null."""
    if not isinstance(value, str):
        raise ValueError(f"{field!r} must be a string, got {_shown(value)}")
    return value


def question(value: Any, field: str = "question") -> str:
    """The question: a string with some non-blank text."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{field!r} must be a non-empty string, got {_shown(value)}")
    return value


def answer(value: Any, field: str) -> str:
    """One gold answer: a string, or a number read as its decimal text (MuSiQue / CRAG years, counts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{field!r} must be a string or a number, got {_shown(value)}")


def answers(values: Any, field: str, required: bool = True) -> list[str]:
    """A list of gold answers (`answer` each); non-empty unless `required=False` (alias lists)."""
    if not isinstance(values, list):
        raise ValueError(
            f"{field!r} must be a list of strings, got {type(values).__name__}: {_shown(values)}"
        )
    if required and not values:
        raise ValueError(f"{field!r} is empty: a question needs at least one gold answer")
    return [answer(v, f"{field}[{i}]") for i, v in enumerate(values)]


def sentences(values: Any, field: str) -> list[str]:
    """A paragraph as a list of sentence strings (a bare string would be split into characters)."""
    if not isinstance(values, list):
        raise ValueError(f"{field!r} must be a list of sentences, got {_shown(values)}")
    return [text(s, f"{field}[{i}]") for i, s in enumerate(values)]


def choice(value: Any, field: str, allowed: tuple[str, ...]) -> str:
    """A label from a closed set (TAT-QA `answer_from`): a typo would otherwise become a class of its own."""
    if value not in allowed:
        raise ValueError(f"{field!r} must be one of {list(allowed)}, got {_shown(value)}")
    return value


def identifier(value: Any, field: str) -> str:
    """A record or passage id: a string or an integer, never null."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    raise ValueError(f"{field!r} must be a string or an integer, got {_shown(value)}")


def objects(values: Any, field: str) -> list[dict[str, Any]]:
    """A non-empty list of JSON objects (ASQA `qa_pairs`, AmbigDocs `documents`): the gold structure the
    ambiguous-question metrics average over, so an empty one would leave them undefined."""
    if not isinstance(values, list) or not values:
        raise ValueError(f"{field!r} must be a non-empty list of objects, got {_shown(values)}")
    for i, value in enumerate(values):
        if not isinstance(value, dict):
            raise ValueError(f"{f'{field}[{i}]'!r} must be an object, got {_shown(value)}")
    return values
