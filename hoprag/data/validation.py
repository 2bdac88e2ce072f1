"""Value checks every loader applies to the fields it reads, so a bad record fails at load time.

Without them `str(None)` turns a null answer into the gold answer "None" and a null passage text into a
passage about "None", and an empty answer list only fails when the metrics run, after the LLM answered.
Each check raises `ValueError` naming the field; `parse_records` adds the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


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


def objects(values: Any, field: str, required: bool = True) -> list[dict[str, Any]]:
    """A list of JSON objects, non-empty unless `required=False` (ASQA `qa_pairs`, AmbigDocs `documents`: the
    gold structure the ambiguous-question metrics average over, so an empty one would leave them undefined)."""
    if not isinstance(values, list) or (required and not values):
        kind = "a non-empty list" if required else "a list"
        raise ValueError(f"{field!r} must be {kind} of objects, got {_shown(values)}")
    for i, value in enumerate(values):
        mapping(value, f"{field}[{i}]")
    return values


def mapping(value: Any, field: str) -> dict[str, Any]:
    """A JSON object (a list or a string in its place fails later with a message naming no field)."""
    if not isinstance(value, dict):
        raise ValueError(f"{field!r} must be an object, got {_shown(value)}")
    return value


def listed(values: Any, field: str) -> list[Any]:
    """A JSON list: a string or an object in its place would be iterated as characters or keys."""
    if not isinstance(values, list):
        raise ValueError(f"{field!r} must be a list, got {type(values).__name__}: {_shown(values)}")
    return values


def each(values: Any, field: str, item: Callable[[Any, str], T]) -> list[T]:
    """A JSON list with the check `item` applied to every element, each named `field[i]`."""
    return [item(value, f"{field}[{i}]") for i, value in enumerate(listed(values, field))]


def key(obj: Any, name: str, where: str) -> Any:
    """`obj[name]` of the object at `where`; a missing key is reported with its path (`search_results[2].page_url`,
    not just `page_url`): `parse_records` turns the KeyError into "missing required key ..."."""
    if name not in mapping(obj, where):
        raise KeyError(f"{where}.{name}")
    return obj[name]


def integer(value: Any, field: str) -> int:
    """An integer (a sentence index, an order), not a boolean or a number written as a string."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{field!r} must be an integer, got {_shown(value)}")
    return value


def boolean(value: Any, field: str) -> bool:
    """`true` or `false` (a label such as MuSiQue's `is_supporting`), not a string or a number."""
    if not isinstance(value, bool):
        raise ValueError(f"{field!r} must be true or false, got {_shown(value)}")
    return value


def shaped(value: Any, field: str, parts: tuple[str, ...]) -> list[Any]:
    """A JSON list of exactly these parts (`[title, sentences]`): anything else would be unpacked wrongly, a
    string character by character."""
    if not isinstance(value, list) or len(value) != len(parts):
        raise ValueError(f"{field!r} must be a [{', '.join(parts)}] list, got {_shown(value)}")
    return value


def fact(value: Any, field: str) -> tuple[str, int]:
    """A supporting fact `[title, sentence index]` (HotpotQA / 2Wiki `supporting_facts` items)."""
    title, index = shaped(value, field, ("title", "sentence index"))
    return text(title, f"{field}[0]"), integer(index, f"{field}[1]")


def triple(value: Any, field: str) -> tuple[str, str, str]:
    """An evidence triple `[subject, relation, object]` of strings (2Wiki `evidences` items)."""
    parts = shaped(value, field, ("subject", "relation", "object"))
    return text(parts[0], f"{field}[0]"), text(parts[1], f"{field}[1]"), text(parts[2], f"{field}[2]")
