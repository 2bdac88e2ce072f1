"""Domain-specific NER by an LLM (spec/pruningrag.md §6.2 step 2) and the reading of its reply (§16.13).

The model lists the question's entities one per line as `entity (category)`, with the categories of the
question's domain. A reply is read line by line: a line of that shape (a leading bullet or number and a
trailing period allowed) gives an entity; categories outside the domain's are ignored; an entity that is
the word "none" (the model's way of saying there is nothing) is dropped. A reply without a single line of
that shape is a parse failure, counted by the caller.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hoprag.cost import Cost
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, Message

DOMAINS = ("finance", "music", "movie", "sports", "open")
CATEGORIES: dict[str, tuple[str, ...]] = {
    "finance": ("company", "symbol"),
    "movie": ("person", "movie"),
    "music": ("person", "song", "band"),
    "sports": ("nba team", "soccer team", "nba player", "soccer player"),
    "open": ("person", "location", "organization", "product", "event"),
}
# One worked example per domain, so the model sees the line format with that domain's categories.
EXAMPLES: dict[str, tuple[str, str]] = {
    "finance": ("What was the closing price of Tesla and MSFT yesterday?", "Tesla (company)\nMSFT (symbol)"),
    "movie": ("Who directed Inception, and has Christopher Nolan won an Oscar?",
              "Inception (movie)\nChristopher Nolan (person)"),
    "music": ("When did the Beatles release Hey Jude, and when was John Lennon born?",
              "The Beatles (band)\nHey Jude (song)\nJohn Lennon (person)"),
    "sports": ("How many points did LeBron James score for the Lakers last night, and did Arsenal win?",
               "Lakers (nba team)\nLeBron James (nba player)\nArsenal (soccer team)"),
    "open": ("When did Marie Curie move to Paris to work at the Sorbonne?",
             "Marie Curie (person)\nParis (location)\nSorbonne (organization)"),
}
NER_PROMPT = ChatPrompt(
    "You are a helpful assistant.",
    "Extract the named entities of the {domain} domain from the question.\n"
    "List one entity per line as `entity (category)`, where category is one of: {categories}.\n"
    "Write each entity as the question writes it and add no explanation. If the question names no entity, "
    "reply `None ({first})`.\n\n"
    "### Example\nQuestion: {example}\nEntities:\n{example_entities}\n\n"
    "### Question\n{question}\nEntities:\n",
)

_LINE = re.compile(r"^\s*(?:[-*•]|\d+[.)])?\s*(?P<entity>.+?)\s*\((?P<category>[^()]+)\)\s*[.,;]?\s*$")
_NONE = re.compile(r"\bnone\b", re.IGNORECASE)


@dataclass(frozen=True)
class NERResult:
    """Entities by category (only categories with entities, in the domain's order), whether the reply had
    the `entity (category)` shape at all, and the reply itself (for traces)."""

    entities: dict[str, list[str]]
    parsed: bool
    reply: str = ""


def ner_messages(question: str, domain: str) -> list[Message]:
    categories = CATEGORIES[_checked(domain)]
    example, example_entities = EXAMPLES[domain]
    return NER_PROMPT(
        domain=domain, categories=", ".join(categories), first=categories[0],
        example=example, example_entities=example_entities, question=question,
    )


def parse_entities(reply: str, domain: str) -> NERResult:
    allowed = CATEGORIES[_checked(domain)]
    found: dict[str, list[str]] = {}
    parsed = False
    for line in reply.splitlines():
        match = _LINE.match(line)
        if not match:
            continue
        parsed = True
        category = " ".join(match.group("category").lower().split())
        entity = match.group("entity").strip(" \"'`*")
        if category in allowed and entity and not _NONE.search(entity):
            names = found.setdefault(category, [])
            if entity not in names:
                names.append(entity)
    return NERResult({c: found[c] for c in allowed if c in found}, parsed, reply)


def extract_entities(
    llm: LLM,
    questions: Sequence[str],
    domains: Sequence[str],
    costs: Sequence[Cost | None] | None = None,
    max_new_tokens: int = 64,
) -> list[NERResult]:
    """One batched, greedy generation for all questions; each reply parsed with its question's domain."""
    if not questions:
        return []
    prompts = [ner_messages(q, d) for q, d in zip(questions, domains)]
    outputs = llm.generate(prompts, costs=costs, stage="api_ner", max_new_tokens=max_new_tokens, temperature=0.0, n=1)
    return [parse_entities(samples[0].text, d) for samples, d in zip(outputs, domains)]


def _checked(domain: str) -> str:
    if domain not in CATEGORIES:
        raise ValueError(f"unknown CRAG domain {domain!r}; expected one of {DOMAINS}")
    return domain
