"""Reading PruneRAG's LLM outputs: the decision JSON, the answer's confidence, the final `\\boxed{}` answer.

Decision outputs are parsed tolerantly (spec §2.4): `<think>` blocks are dropped, then the **last** flat
JSON object that names a "type" is the decision; it must decode and carry the keys of its type, else the
node is a parse error (the caller counts it and keeps the node's passages). "query" is accepted as a
synonym of "decomposition" (the paper's eq. 3 word).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hoprag.llm.base import Generation

ANSWER, DECOMPOSITION, ENTITY = "answer", "decomposition", "entity"
ACTIONS = (ANSWER, DECOMPOSITION, ENTITY)
SYNONYMS = {"query": DECOMPOSITION}

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_OBJECT = re.compile(r"\{[^{}]*\}")
_TYPE_KEY = re.compile(r'"type"\s*:')
_ANSWER_VALUE = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)"', re.DOTALL)
_BOXED = "\\boxed{"
_TEXT = re.compile(r"^\\text(?:bf|rm)?\{(.*)\}$", re.DOTALL)


@dataclass(frozen=True)
class Decision:
    """A parsed decision. `items` are the sub-queries or entities; `span` is the answer value's character
    span in the raw output (for the confidence); `error` says why parsing failed (then `action` is None)."""

    action: str | None
    answer: str = ""
    items: tuple[str, ...] = ()
    span: tuple[int, int] | None = None
    error: str = ""


def _masked(text: str) -> str:
    """`text` with `<think>` blocks blanked out (same length, so character offsets stay valid)."""
    return _THINK.sub(lambda m: " " * len(m.group()), text)


def _value(obj: dict, key: str) -> str:
    value = obj.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return value.strip() if isinstance(value, str) else ""


def parse_decision(text: str, actions: Sequence[str] = ACTIONS, branching: int = 2) -> Decision:
    """The last JSON decision in `text`; only `actions` are accepted, with `branching` sub-queries/entities
    under keys `subquery1..` / `entity1..` (extra keys are ignored, so never more than `branching` children)."""
    masked = _masked(text)
    candidates = [m for m in _OBJECT.finditer(masked) if _TYPE_KEY.search(m.group())]
    if not candidates:
        return Decision(None, error="no JSON object with a type")
    match = candidates[-1]
    try:
        obj = json.loads(match.group())
    except json.JSONDecodeError as err:
        return Decision(None, error=f"invalid JSON: {err.msg}")
    if not isinstance(obj, dict):
        return Decision(None, error="not a JSON object")
    kind = str(obj.get("type", "")).strip().lower()
    kind = SYNONYMS.get(kind, kind)
    if kind not in actions:
        return Decision(None, error=f"action {kind!r} not offered")
    if kind == ANSWER:
        answer = _value(obj, "answer")
        if not answer:
            return Decision(None, error="empty answer")
        return Decision(ANSWER, answer=answer, span=_answer_span(text, match.start(), match.end(), answer))
    prefix = "subquery" if kind == DECOMPOSITION else "entity"
    items = tuple(_value(obj, f"{prefix}{i}") for i in range(1, branching + 1))
    if not all(items):
        return Decision(None, error=f"{kind} needs non-empty {prefix}1..{prefix}{branching}")
    return Decision(kind, items=items)


def _answer_span(text: str, start: int, end: int, answer: str) -> tuple[int, int] | None:
    """Where the answer value sits inside the chosen JSON object (without its quotes and outer spaces)."""
    found = _ANSWER_VALUE.search(text, start, end)
    if found is None:  # a number given without quotes
        at = text.find(answer, start, end)
        return (at, at + len(answer)) if at >= 0 else None
    s, e = found.span(1)
    raw = text[s:e]
    return s + len(raw) - len(raw.lstrip()), e - len(raw) + len(raw.rstrip())


def token_offsets(text: str, tokens: Sequence[str]) -> list[tuple[int, int]]:
    """Character span of each generated token in `text`, found left to right.

    Works whether tokens concatenate to the text (subword backends) or are separated by whitespace (the
    scripted LLM). A token that cannot be found (e.g. a partial UTF-8 byte) gets an empty span at the cursor.
    """
    spans, cursor = [], 0
    for token in tokens:
        piece = token.strip() or token
        at = text.find(piece, cursor) if piece else -1
        if at < 0:
            spans.append((cursor, cursor))
            continue
        spans.append((at, at + len(piece)))
        cursor = at + len(piece)
    return spans


def span_confidence(generation: Generation, span: tuple[int, int] | None, mean: bool = True) -> float:
    """exp(mean log-prob) of the tokens overlapping `span` (paper eq. 4); exp(sum) when `mean` is False
    (the w/o Ent. script's joint probability). 0 when the span is missing or covers no token (as the code).
    """
    if generation.logprobs is None:
        raise ValueError(
            "PruneRAG's answer confidence needs token log-probs, and this LLM backend returned none "
            "(use a backend with log-probs, or method.use_confidence=false)"
        )
    if span is None:
        return 0.0
    s, e = span
    picked = [
        lp
        for (a, b), lp in zip(token_offsets(generation.text, generation.tokens), generation.logprobs)
        if (a < e and b > s) or (a == b and s <= a < e)
    ]
    if not picked:
        return 0.0
    total = sum(picked)
    return math.exp(total / len(picked) if mean else total)


def first_occurrence_span(text: str, answer: str) -> tuple[int, int] | None:
    """The code's span: the answer's first occurrence anywhere in the output (`<think>` text included)."""
    at = text.find(answer)
    return (at, at + len(answer)) if at >= 0 else None


def extract_boxed(text: str) -> str | None:
    """The content of the last `\\boxed{...}` (braces balanced), `\\text{}` unwrapped and surrounding
    parentheses stripped; None when there is no complete box."""
    at = text.rfind(_BOXED)
    while at >= 0:
        depth, i = 1, at + len(_BOXED)
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            content = text[at + len(_BOXED) : i - 1].strip()
            while (inner := _TEXT.match(content)) is not None:
                content = inner.group(1).strip()
            if content.startswith("(") and content.endswith(")"):
                content = content[1:-1].strip()
            return content
        at = text.rfind(_BOXED, 0, at)
    return None
