"""Passages: content-hash ids, FlashRAG corpus JSONL I/O, and the pooled closed corpus.

Context paragraphs get an id derived from their content, so the same paragraph appearing in two
questions (or in two subsets of a dataset) always has the same id; the pooled corpus is then simply the
id-deduplicated union of all contexts, as TreeHop and HippoRAG build their closed-corpus evaluations.
A dataset whose corpus records have a layout of their own registers a reader for them (`register_layout`),
so this module reads them without knowing any dataset.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from hoprag.data import validation as check
from hoprag.data.records import iter_records, parse_located, parse_records, unique_ids, write_jsonl
from hoprag.data.types import Passage, QAExample

Record = dict[str, Any]
# name -> (does a record have this layout, its passage); filled by the dataset modules (see register_layout)
LAYOUTS: dict[str, tuple[Callable[[Record], bool], Callable[[Record], Passage]]] = {}


def passage_id(title: str, text: str) -> str:
    """First 16 hex chars of sha1("title\\ntext"): stable across runs, subsets and machines."""
    return hashlib.sha1(f"{title}\n{text}".encode("utf-8")).hexdigest()[:16]


def make_passage(title: str, text: str) -> Passage:
    return Passage(id=passage_id(title, text), title=title, text=text)


def unique_passages(passages: Iterable[Passage]) -> list[Passage]:
    """Drop repeated ids, keeping first-seen order (2Wiki repeats some distractors within a question)."""
    seen: dict[str, Passage] = {}
    for p in passages:
        seen.setdefault(p.id, p)
    return list(seen.values())


def pool_corpus(examples: Iterable[QAExample]) -> list[Passage]:
    """The closed corpus: every example's `context`, deduplicated by id, in first-seen order."""
    return unique_passages(p for ex in examples for p in ex.context)


def unquote_title(title: str) -> str:
    """Undo wiki-18's CSV quoting (`"\\"Gary Groth\\""` → `Gary Groth`, inner `""` → `"`).

    FlashRAG's wiki-18 corpus keeps the title field as quoted in DPR's TSV, so without this titles
    never equal the gold titles of HotpotQA / 2Wiki.
    """
    if len(title) >= 2 and title[0] == '"' and title[-1] == '"':
        return title[1:-1].replace('""', '"')
    return title


def register_layout(name: str, claims: Callable[[Record], bool], passage: Callable[[Record], Passage]) -> None:
    """Read a dataset's own corpus records in `iter_corpus`/`read_corpus`: a record that `claims` (told by its
    keys, as a question format is) becomes `passage(record)`. Dataset modules call this when imported, and
    importing any `hoprag.data` module imports them all (the package imports `loading`)."""
    LAYOUTS[name] = (claims, passage)


def corpus_passage(record: Record, unquote: bool) -> Passage:
    """One corpus record as a passage: a registered layout's reader, else FlashRAG's fields."""
    for claims, passage in LAYOUTS.values():
        if claims(record):
            return passage(record)
    # FlashRAG's own fallbacks: `contents` = "title\ntext", else `title` + `text`, else `text` alone
    if "contents" in record:
        title, _, text = check.text(record["contents"], "contents").partition("\n")
    elif "title" in record:
        title, text = check.text(record["title"], "title"), check.text(record["text"], "text")
    else:
        title, text = "", check.text(record["text"], "text")
    if unquote:
        title = unquote_title(title)
    pid = check.identifier(record["id"], "id") if "id" in record else passage_id(title, text)
    return Passage(id=pid, title=title, text=text)


def iter_corpus(path: str | os.PathLike, unquote_titles: bool = True) -> Iterator[Passage]:
    """Stream a FlashRAG corpus JSONL (wiki-18 is ~21M lines: never needs to fit in a list).

    Records without `id` get the content-hash id. `unquote_titles=False` keeps titles verbatim. Repeated ids
    are not looked for here (that needs every id in memory, which the stream avoids); `read_corpus` refuses them.
    """
    return parse_records(iter_records(path), lambda r: corpus_passage(r, unquote_titles))


def read_corpus(path: str | os.PathLike, unquote_titles: bool = True) -> list[Passage]:
    """The whole corpus, as `iter_corpus` reads it; a passage id given twice is an error naming the id and both
    lines, so a retriever never sees two passages under one id."""
    located = parse_located(iter_records(path), lambda r: corpus_passage(r, unquote_titles))
    return [p for _, p in unique_ids(located, lambda p: p.id, "passage id")]


def write_corpus(passages: Iterable[Passage], path: str | os.PathLike) -> Path:
    """Write FlashRAG corpus JSONL `{id, contents}` (readable by FlashRAG's indexer and `read_corpus`)."""
    return write_jsonl(({"id": p.id, "contents": p.contents} for p in passages), path)
