"""`load_questions`: one entry point for every supported question format, detected from the file.

The container (one JSON list or JSONL, optionally .bz2/.gz, or a tar archive of JSONL files) is read by
`iter_records`; a tar archive whose name does not say so is told by its content (`_records`). The format is
told by the first record's keys, which differ between all official releases, and can be forced with `format=`.
A format's parser returns one example, or a list of them when one record holds several questions (TAT-QA: a
context with its questions). ASQA's official `ASQA.json` is the one container of another shape (an object of
splits): it is told by its first bytes and read one split at a time (`split=`, dev by default).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from hoprag.data import asqa
from hoprag.data.ambigdocs import parse_ambigdocs
from hoprag.data.crag import parse_crag
from hoprag.data.flashrag import parse_flashrag
from hoprag.data.hipporag import parse_hipporag
from hoprag.data.hotpotqa import parse_hotpotqa
from hoprag.data.multihop_rag import parse_multihop_rag
from hoprag.data.musique import parse_musique
from hoprag.data.records import (
    DataFormatError,
    _tar_records,
    is_tar,
    iter_records,
    open_binary,
    parse_located,
    unique_ids,
)
from hoprag.data.tatqa import parse_tatqa
from hoprag.data.twowiki import add_aliases, parse_2wiki
from hoprag.data.types import QAExample

FORMATS: dict[str, Callable[[dict[str, Any]], QAExample | list[QAExample]]] = {
    "hotpotqa": parse_hotpotqa,
    "2wikimultihopqa": parse_2wiki,
    "musique": parse_musique,
    "flashrag": parse_flashrag,
    "crag": parse_crag,
    "multihop_rag": parse_multihop_rag,
    "asqa": asqa.parse_asqa,
    "ambigdocs": parse_ambigdocs,
    "tatqa": parse_tatqa,
    "hipporag": parse_hipporag,
}


def detect_format(record: dict[str, Any]) -> str | None:
    """The format whose official record has these keys, or None."""
    if "table" in record and "paragraphs" in record and "questions" in record:
        return "tatqa"
    if "interaction_id" in record or "search_results" in record:
        return "crag"
    if "golden_answers" in record:
        return "flashrag"
    if "ambiguous_question" in record and "qa_pairs" in record:
        return "asqa"
    if "ambiguous_entity" in record and "documents" in record:
        return "ambigdocs"
    if "evidence_list" in record and "query" in record:
        return "multihop_rag"
    if "paragraphs" in record and "question_decomposition" in record:
        return "musique"
    if "paragraphs" in record and "question" in record:  # HippoRAG 2's subsets (NQ, PopQA)
        return "hipporag"
    if "evidences" in record or "entity_ids" in record:
        return "2wikimultihopqa"
    if "supporting_facts" in record and "context" in record:
        return "hotpotqa"
    return None


def _records(path: str | os.PathLike) -> Iterator[tuple[str, dict[str, Any]]]:
    """`iter_records`, or the JSONL members of a tar archive whose name does not say it is one (RM3QA ships its
    50-page release as `RM3QA_50web.bz2`, a container it does not document): a tar is told by the `ustar`
    magic of its first header, at byte 257 of the (decompressed) content, where JSON text, which starts with
    `{` or `[`, cannot have it."""
    if not is_tar(path):
        with open_binary(path) as f:
            head = f.read(262)
        if head[257:262] == b"ustar" and head.lstrip()[:1] not in (b"{", b"["):
            return _tar_records(path)
    return iter_records(path)


def _detected(path: str | os.PathLike, format: str | None) -> tuple[str, Iterator[tuple[str, dict[str, Any]]]]:
    """The format (the given one, else told by the first record's keys) and the file's records."""
    records = _records(path)
    first = next(records, None)  # iter_records raises DataFormatError for an empty file itself
    if first is None:
        raise DataFormatError(f"{path} holds no records")
    if format is None:
        format = detect_format(first[1])
        if format is None:
            raise DataFormatError(
                f"{first[0]}: cannot tell the dataset format from keys {sorted(first[1])}; "
                f"pass format= one of {sorted(FORMATS)}"
            )
    return format, itertools.chain([first], records)


def _examples(parsed: Iterable[tuple[str, QAExample | list[QAExample]]]) -> Iterator[tuple[str, QAExample]]:
    """Each record's examples in order, with the record's location: one, or the several a context record holds."""
    for where, item in parsed:
        yield from ((where, ex) for ex in (item if isinstance(item, list) else (item,)))


def load_questions(
    path: str | os.PathLike,
    format: str | None = None,
    dataset: str | None = None,
    limit: int | None = None,
    split: str | None = None,
    keep: Callable[[QAExample], bool] | None = None,
) -> list[QAExample]:
    """Load a question file into `QAExample`s.

    `dataset` names the examples (default: the format name; for FlashRAG files, whose layout is
    `<dataset>/<split>.jsonl`, the parent folder's name). `limit` keeps the first N examples (questions) and
    stops reading there, so a JSONL train split can be sampled cheaply; `keep`, a test of each example, drops
    the others as they are read, before `limit` counts. `split` picks the split of a file that
    holds several (ASQA's `ASQA.json`: "dev", the default, or "train"); other files hold one. Every
    record read is checked (`hoprag.data.validation`), so a bad one fails here, before any question is
    answered; so is every question id read, which must not repeat (the error names both lines).
    """
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown format {format!r}; expected one of {sorted(FORMATS)}")
    if format in (None, "asqa") and asqa.is_release(path):
        format, records = "asqa", asqa.iter_release(path, split or "dev")
    elif split is not None:
        raise ValueError(f"split={split!r}: {path} holds one split (only ASQA's ASQA.json holds several)")
    else:
        format, records = _detected(path, format)
    located = unique_ids(_examples(parse_located(records, FORMATS[format])), lambda ex: ex.id, "question id")
    parsed = (ex for _, ex in located)
    examples = list(itertools.islice(parsed if keep is None else filter(keep, parsed), limit))
    name = dataset or (Path(path).parent.name if format == "flashrag" else format)
    for ex in examples:
        ex.dataset = name
    if format == "2wikimultihopqa":  # the official evaluator's answer aliases, when id_aliases.json is beside
        add_aliases(examples, path)
    return examples
