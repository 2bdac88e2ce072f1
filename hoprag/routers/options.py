"""The source router's prompt and the reading of its reply (spec/pruningrag.md §5.2–5.3, P1, P4).

A router sees only the question and picks knowledge sources by option letter. An `OptionSet` names the
letters, the sources each stands for and the prompt that describes them: CRAG's single choice (the official
code: a) web pages, b) mock APIs, c) the LLM's own knowledge, d) none), the paper-literal subset choice
(`mode=subset`: web, api, web+api, llm) and TAT-QA's (table, text, both), the one labelled routing set that
ships offline. A reply is read as the code reads it: one character, or a letter followed by a space or ")";
anything else (including "d") follows `none_policy`, and an empty reply abstains.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hoprag.llm.prompts import ChatPrompt, Message

SYSTEM = "You are a helpful assistant."
ABSTAIN = "abstain"  # no source: the method answers "I don't know"
NONE_POLICIES = ("api", ABSTAIN)


@dataclass(frozen=True)
class OptionSet:
    """Letters → source tuples, the prompt describing them, and the sources a "none" reply falls back to."""

    name: str
    options: Mapping[str, tuple[str, ...]]
    descriptions: Mapping[str, str]
    prompt: str  # str.format fields: {sources} (the described sources), {options}, {question}
    sources_text: str

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(self.options)

    def letter_of(self, sources: Sequence[str]) -> str:
        """The option that stands for exactly these sources."""
        wanted = tuple(sorted(sources))
        for letter, option in self.options.items():
            if tuple(sorted(option)) == wanted:
                return letter
        raise ValueError(f"{self.name}: no option for sources {sorted(sources)} (options: {dict(self.options)})")

    def messages(self, question: str) -> list[Message]:
        options = "\n".join(f"{letter}) {self.descriptions[letter]}" for letter in self.options)
        user = self.prompt.format(sources=self.sources_text, options=options, question=question)
        return ChatPrompt(SYSTEM, "{user}")(user=user)


CRAG_SOURCES = (
    "- Web Pages: rich information, but possibly outdated for time-sensitive questions.\n"
    "- Mock APIs: real-time and reliable structured data, but less comprehensive.\n"
    "- LLM: your own internal knowledge."
)
ROUTER_PROMPT = (
    "Choose the knowledge sources that can answer the question.\n"
    "Sources:\n{sources}\n"
    "Consider whether the question is static or time-sensitive, whether it needs comprehensive information, "
    "how much freshness matters, whether internal knowledge alone is enough, and whether nothing can answer it.\n"
    "Options:\n{options}\n"
    "Reply with exactly one option letter and no explanation.\n"
    "### Query\n{question}\n### Option\n"
)
CRAG_SINGLE = OptionSet(
    "crag_single",
    {"a": ("web",), "b": ("api",), "c": ("llm",), "d": ()},
    {"a": "Web pages only", "b": "Mock APIs only", "c": "LLM knowledge only", "d": "None of them can answer"},
    ROUTER_PROMPT,
    CRAG_SOURCES,
)
CRAG_SUBSET = OptionSet(
    "crag_subset",
    {"a": ("web",), "b": ("api",), "c": ("api", "web"), "d": ("llm",)},
    {"a": "Web pages only", "b": "Mock APIs only", "c": "Web pages and mock APIs", "d": "LLM knowledge only"},
    ROUTER_PROMPT,
    CRAG_SOURCES,
)
TATQA = OptionSet(
    "tatqa",
    {"a": ("table",), "b": ("text",), "c": ("table", "text")},
    {"a": "The table only", "b": "The text paragraphs only", "c": "Both the table and the text"},
    ROUTER_PROMPT,
    "- Table: a financial report's table (numbers by row and column).\n"
    "- Text: the report's paragraphs around the table.",
)
OPTION_SETS = {s.name: s for s in (CRAG_SINGLE, CRAG_SUBSET, TATQA)}


def prompt_version(options: OptionSet) -> str:
    """A short hash of the router prompt as the model reads it (system message, instructions, options), so
    a router is never served with a prompt other than the one it was trained on without it showing."""
    messages = options.messages("{question}")
    return hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:12]


_LETTER = re.compile(r"^\s*([a-z])(?:$|[\s)])", re.IGNORECASE)


def parse_option(reply: str, options: OptionSet, none_policy: str = "api") -> tuple[tuple[str, ...], bool]:
    """(sources, parsed): the sources of the reply's option letter. A reply that names no option of the set,
    or an option with no sources ("d" = none), follows `none_policy` ("api": the official code's fallback,
    or "abstain"), and an empty reply abstains; `parsed` is False for replies that named no option."""
    if none_policy not in NONE_POLICIES:
        raise ValueError(f"none_policy must be one of {NONE_POLICIES}, got {none_policy!r}")
    if not reply.strip():
        return (ABSTAIN,), False
    match = _LETTER.match(reply)
    letter = match.group(1).lower() if match else None
    sources = options.options.get(letter) if letter else None
    if sources:
        return sources, True
    fallback = ("api",) if none_policy == "api" and "api" in _all_sources(options) else (ABSTAIN,)
    return fallback, letter in options.options


def _all_sources(options: OptionSet) -> set[str]:
    return {s for sources in options.options.values() for s in sources}
