"""Reading PruneRAG's LLM outputs: the decision JSON, the answer's confidence, the final `\\boxed{}` answer.

Decision outputs are parsed tolerantly (spec §2.4): `<think>` blocks are dropped (the one a reasoning model's
reply opens with never arrives: the LLM layer holds it apart, `hoprag.llm.reasoning`; one later in the reply
is blanked here), then the **last** flat JSON object that names a "type" is the decision; it must decode and
carry the keys of its type, else the node is a parse error (the caller counts it and keeps the node's
passages). "query" is accepted as a synonym of "decomposition" (the paper's eq. 3 word).

With an assistant prefill (`prefix`, e.g. `{"type": "`) the backend returns only the continuation, so the
prefix is re-attached before parsing and the answer span is given back in the continuation's coordinates
(the only text with token log-probs). Small models often ignore the format and reply with a bare answer;
`free_text_answer` (a documented fallback, counted apart from parse errors) reads such a reply as an
answer attempt whose confidence comes from its own tokens, so the confidence gate still decides.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from hoprag.llm.types import Generation

ANSWER, DECOMPOSITION, ENTITY = "answer", "decomposition", "entity"
ACTIONS = (ANSWER, DECOMPOSITION, ENTITY)
SYNONYMS = {"query": DECOMPOSITION}

_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL)
_OBJECT = re.compile(r"\{[^{}]*\}")
_TYPE_KEY = re.compile(r'"type"\s*:')
_OPEN_TYPE = re.compile(r'\{\s*"type"\s*:')
_PAIR = re.compile(r'"(\w+)"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ANSWER_VALUE = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)"', re.DOTALL)
_FREE_ANSWER = re.compile(r"""\s*["'`*]*(?:answer\s*:\s*)?["'`*]*(.*?)["'`*.]*\s*""", re.IGNORECASE | re.DOTALL)
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
    fallback: bool = False  # a free-text reply read as an answer (`free_text_answer`), not a JSON decision
    repaired: bool = False  # salvaged from broken or cut-off JSON (`lenient` parsing)


def _masked(text: str) -> str:
    """`text` with `<think>` blocks blanked out (same length, so character offsets stay valid)."""
    return _THINK.sub(lambda m: " " * len(m.group()), text)


def _value(obj: dict, key: str) -> str:
    value = obj.get(key)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    return value.strip() if isinstance(value, str) else ""


def parse_decision(
    text: str,
    actions: Sequence[str] = ACTIONS,
    branching: int = 2,
    prefix: str = "",
    min_items: int | None = None,
    lenient: bool = False,
) -> Decision:
    """The last JSON decision in `prefix + text`; only `actions` are accepted, with `branching`
    sub-queries/entities under keys `subquery1..` / `entity1..` (extra keys are ignored, so never more than
    `branching` children; the first `min_items`, default all `branching`, must be non-empty, the rest may
    be missing: a small model's one-item split then still expands). `lenient` salvages the string pairs
    of a broken or cut-off last object (`repaired` is then set, for the caller to count). `text` is what
    the LLM generated after the prefilled `prefix`; the answer span is relative to `text`, and None if it
    would reach into the prefix (no generated token covers it)."""
    decision = _parse(prefix + text, actions, branching, branching if min_items is None else min_items, lenient)
    if decision.span is None or not prefix:
        return decision
    s, e = decision.span[0] - len(prefix), decision.span[1] - len(prefix)
    return replace(decision, span=(s, e) if s >= 0 else None)


def free_text_answer(text: str, max_words: int = 12) -> Decision:
    """The fallback for a reply that is not JSON: a short one-line text (no braces, at most `max_words`
    words) is an answer attempt, its span the stripped text (quotes, "Answer:", a final period removed);
    anything else stays a parse error."""
    body = _masked(text)
    stripped = body.strip()
    if not stripped or "{" in stripped or "}" in stripped or "\n" in stripped or len(stripped.split()) > max_words:
        return Decision(None, error="no JSON object with a type")
    match = _FREE_ANSWER.fullmatch(body)
    if match is None or not match.group(1).strip():
        return Decision(None, error="no JSON object with a type")
    s, e = match.span(1)
    return Decision(ANSWER, answer=text[s:e], span=(s, e), fallback=True)


def _parse(text: str, actions: Sequence[str], branching: int, min_items: int, lenient: bool) -> Decision:
    masked = _masked(text)
    candidates = [m for m in _OBJECT.finditer(masked) if _TYPE_KEY.search(m.group())]
    repaired = False
    try:
        if not candidates:
            raise ValueError("no JSON object with a type")
        start, end = candidates[-1].span()
        try:
            obj = json.loads(masked[start:end])
        except json.JSONDecodeError as err:
            raise ValueError(f"invalid JSON: {err.msg}") from None
    except ValueError as err:
        found = _salvage(masked) if lenient else None
        if found is None:
            return Decision(None, error=str(err))
        obj, start, end = found
        repaired = True
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
        span = _answer_span(text, start, end, answer)
        return Decision(ANSWER, answer=answer, span=span, repaired=repaired)
    prefix = "subquery" if kind == DECOMPOSITION else "entity"
    items = tuple(_value(obj, f"{prefix}{i}") for i in range(1, branching + 1))
    if not all(items[:min_items]):
        return Decision(None, error=f"{kind} needs non-empty {prefix}1..{prefix}{max(min_items, 1)}")
    return Decision(kind, items=tuple(dict.fromkeys(i for i in items if i)), repaired=repaired)


def _salvage(masked: str) -> tuple[dict[str, str], int, int] | None:
    """The complete `"key": "value"` string pairs of the last object that opens with a "type" key, even if
    it is cut off (a length limit or a `}` stop string) or broken further on (first value of a key wins)."""
    opened = [m.start() for m in _OPEN_TYPE.finditer(masked)]
    if not opened:
        return None
    start = opened[-1]
    close = masked.find("}", start)
    end = len(masked) if close < 0 else close + 1
    obj: dict[str, str] = {}
    for key, raw in _PAIR.findall(masked, start, end):
        try:
            obj.setdefault(key, json.loads(f'"{raw}"'))
        except json.JSONDecodeError:
            continue
    return (obj, start, end) if "type" in obj else None


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


def span_confidence(generation: Generation, span: tuple[int, int] | None, mean: bool = True) -> float | None:
    """exp(mean log-prob) of the tokens overlapping `span` (paper eq. 4); exp(sum) when `mean` is False
    (the w/o Ent. script's joint probability). 0 when the span is missing or covers no token (as the code).
    None when the backend gave no log-probs for this generation: the confidence is unknown, and the caller
    decides what unknown means (PruneRAG: unconfident, see `PruneTreeBuilder`)."""
    if generation.logprobs is None:
        return None
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
    """The code's span: the answer's first occurrence anywhere in the output. The official code searched the
    raw output, a reasoning model's `<think>` text included; here the output is the content after the
    reasoning block (`hoprag.llm.reasoning`), so an answer first named while thinking is scored at its
    occurrence in the reply, whose tokens are the only ones with log-probs (a deviation only for thinking
    models)."""
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
