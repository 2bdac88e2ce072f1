"""Tolerant answer extraction: small models wrap short answers in prefixes, markdown and extra sentences.

Extraction looks at the output line by line and returns the first non-empty line left after removing
markup (bold, code ticks, headings, bullets, surrounding quotes) and answer prefixes ("Answer:", "The
answer is", "A:", ...), optionally cut to its first sentence. When nothing is left (empty output, or only
prefixes and markup) it is a parse failure: the fallback answer is the whole stripped first non-empty line,
or "" for an empty output, and the caller counts the failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

PREFIXES = ("final answer:", "short answer:", "answer:", "the answer is", "the answer:", "a:")
QUOTES = "\"'`“”‘’«»"
# a sentence ends after [.!?] that follows three lower-case letters or digits and precedes a capital,
# so "St. Louis", "U.S. Army" and "Mrs. Dalloway" stay whole
SENTENCE_END = re.compile(r"(?<=[a-z0-9]{3}[.!?])\s+(?=[A-Z])")
MARKUP = re.compile(r"\*\*|__|`|^\s*(?:#+|[-*•>]|\d+[.)])\s+")


class Extraction(NamedTuple):
    answer: str
    failed: bool


@dataclass(frozen=True)
class AnswerExtractor:
    """`prefixes` are matched case-insensitively (repeatedly, so "A: The answer is X" gives "X");
    `first_sentence` cuts a line to its first sentence."""

    prefixes: Sequence[str] = PREFIXES
    first_sentence: bool = True

    def __post_init__(self) -> None:
        # longest first, so "the answer is" wins over a shorter prefix of it
        object.__setattr__(self, "prefixes", tuple(sorted((p.lower() for p in self.prefixes), key=len, reverse=True)))

    def __call__(self, output: str) -> Extraction:
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        for line in lines:
            answer = self._clean(line)
            if answer:
                return Extraction(answer, False)
        return Extraction(lines[0] if lines else "", True)

    def _clean(self, line: str) -> str:
        text = MARKUP.sub("", line).strip()
        changed = True
        while changed:
            before = text
            lowered = text.lower()
            for prefix in self.prefixes:
                if lowered.startswith(prefix) and (prefix[-1] == ":" or not lowered[len(prefix):][:1].isalnum()):
                    text = text[len(prefix):].lstrip(" :-–—\t")
                    break
            text = text.strip().strip(QUOTES).strip()
            changed = text != before
        if self.first_sentence:
            text = SENTENCE_END.split(text, maxsplit=1)[0]
        return text.strip()
