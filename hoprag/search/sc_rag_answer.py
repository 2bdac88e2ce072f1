"""Self-Correcting RAG's generator input and output: snippets rendered for the prompt, JSON answers parsed.

The generator is asked for strict JSON with `answer`, `evidence_doc_ids` and `reasoning` (spec §6.1).
Snippets are shown as `[doc_id=i] title=...` with the text on the next line, separated by `---` lines, and
`i` is the snippet's 1-based position, so cited ids map back to passages without long corpus ids.

Parsing (spec §5.3, A23), in order of preference:

1. `json`: the text from the first `{` to the last `}` loads as a JSON object with an `answer` key;
2. `fields`: the object is broken (often cut off by the token limit), but `"answer": "..."` (and
   `"reasoning"`, `"evidence_doc_ids"` when present) can still be read with a regex;
3. `text`: the raw text, cleaned by a fallback (the methods use the shared `AnswerExtractor`: first line,
   prefixes and markup removed).

Only `json` counts as parsed; the other two are counted as parse failures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hoprag.data.types import Passage
from hoprag.llm.prompts import PassageFormat

SNIPPET_TEMPLATE = "[doc_id={rank}] title={title}\n{text}"
SNIPPET_SEPARATOR = "\n---\n"

_STRING = r'"((?:[^"\\]|\\.)*)"'
_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*' + _STRING)
_REASONING_FIELD = re.compile(r'"reasoning"\s*:\s*' + _STRING)
_IDS_FIELD = re.compile(r'"evidence_doc_ids"\s*:\s*\[([^\]]*)\]')


def render_snippets(passages: Sequence[Passage], template: str = SNIPPET_TEMPLATE) -> str:
    return PassageFormat(template, SNIPPET_SEPARATOR).render(passages)


@dataclass(frozen=True)
class ParsedAnswer:
    answer: str
    reasoning: str
    cited: tuple[str, ...]  # doc ids as written by the model
    format: str  # "json", "fields" or "text"
    raw: str

    @property
    def failed(self) -> bool:
        return self.format != "json"

    def cited_passages(self, passages: Sequence[Passage]) -> list[Passage]:
        """The cited snippets among `passages` (by 1-based position, or by corpus id), without repeats."""
        by_key = {str(i): p for i, p in enumerate(passages, 1)} | {p.id: p for p in passages}
        found = [by_key[c] for c in self.cited if c in by_key]
        return list({p.id: p for p in found}.values())


def parse_answer(raw: str, fallback: Callable[[str], str]) -> ParsedAnswer:
    """`fallback` turns raw text into an answer (e.g. `lambda t: AnswerExtractor()(t).answer`)."""
    obj = _json_object(raw)
    if obj is not None:
        return ParsedAnswer(
            _text(obj.get("answer")), _text(obj.get("reasoning")), _ids(obj.get("evidence_doc_ids")), "json", raw
        )
    answer = _ANSWER_FIELD.search(raw)
    if answer:
        reasoning = _REASONING_FIELD.search(raw)
        ids = _IDS_FIELD.search(raw)
        return ParsedAnswer(
            _unescape(answer.group(1)).strip(),
            _unescape(reasoning.group(1)).strip() if reasoning else "",
            tuple(re.findall(r"[\w.-]+", ids.group(1))) if ids else (),
            "fields",
            raw,
        )
    return ParsedAnswer(fallback(raw), "", (), "text", raw)


def _json_object(raw: str) -> dict | None:
    start, end = raw.find("{"), raw.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        obj = json.loads(raw[start : end + 1])
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and "answer" in obj else None


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)
    return str(value).strip()


def _ids(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    return tuple(str(v).strip() for v in values if str(v).strip())


def _unescape(s: str) -> str:
    try:
        return json.loads(f'"{s}"')
    except json.JSONDecodeError:
        return s
