"""A corpus file read in Arrow chunks, for a corpus store's build: as `read_corpus` reads it, at Arrow's speed.

An uncompressed JSONL file is read in blocks of whole lines. A block of FlashRAG records (`id` and `contents`, or
`id`, `title` and `text`: every wiki-18 line) is parsed by Arrow's JSON reader and split into title and text by
Arrow compute, with wiki-18's title quoting undone the same way (`unquote_title`); any other block (a layout a
dataset registered, a record without an id, a blank line, a bad line, bytes that are not UTF-8) is read record by
record through `corpus_passage`, so the passages, and the errors naming a file and line, are `read_corpus`'s.
Compressed files and JSON lists are read record by record. Each chunk carries, for every row, where the source
stands after it (byte offset, line, records read), which a part's stamp keeps for a resumed build to start from.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from hoprag.data.corpus import LAYOUTS, corpus_passage
from hoprag.data.records import is_plain_jsonl, iter_records, jsonl_line, parse_located

BLOCK_BYTES = 16 << 20  # bytes of a JSONL file parsed at once
CHUNK_ROWS = 8192  # passages per chunk read record by record


@dataclass
class Position:
    """Where a read stands in the source: the byte offset and line after the last record read (offset None when
    the file cannot be read from an offset), and the records read."""

    offset: int | None = 0
    line: int = 0
    records: int = 0


@dataclass
class Chunk:
    """Passages as Arrow string columns (id, title, text) and, per row, the source's (offset or -1, line,
    records) after it."""

    columns: list[pa.Array]
    ends: np.ndarray

    def __len__(self) -> int:
        return len(self.columns[0])

    def position(self, row: int) -> Position:
        offset, line, records = (int(v) for v in self.ends[row])
        return Position(None if offset < 0 else offset, line, records)


def read_chunks(path: str | os.PathLike, position: Position, unquote: bool) -> Iterator[Chunk]:
    """The passages of `path` after `position`, in chunks (see the module docstring)."""
    if position.offset is not None and is_plain_jsonl(path):
        yield from _blocks(Path(path), position, unquote)
        return
    skipped = islice(iter_records(path), position.records, None)
    numbered = ((where, record, (-1, 0, position.records + i)) for i, (where, record) in enumerate(skipped, 1))
    yield from _parsed(numbered, unquote)


def _blocks(path: Path, position: Position, unquote: bool) -> Iterator[Chunk]:
    assert position.offset is not None
    offset, line, records = position.offset, position.line, position.records
    with open(path, "rb") as f:
        f.seek(offset)
        while data := f.read(BLOCK_BYTES):
            if len(data) == BLOCK_BYTES:  # more may follow: end the block at its last whole line
                cut = data.rfind(b"\n") + 1
                if cut:
                    data = data[:cut]
                    f.seek(offset + cut)
                else:
                    data += f.readline()  # one line longer than a block
            fast = _arrow_block(data, offset, line, records, unquote)
            chunks = [fast] if fast is not None else _parsed(_block_lines(data, path, offset, line, records), unquote)
            for chunk in chunks:
                records = int(chunk.ends[-1, 2])
                yield chunk
            offset += len(data)
            line += data.count(b"\n") + (not data.endswith(b"\n"))


def _block_lines(
    data: bytes, path: Path, offset: int, line: int, records: int
) -> Iterator[tuple[str, dict[str, Any], tuple[int, int, int]]]:
    for raw in io.BytesIO(data):
        offset += len(raw)
        line += 1
        located = jsonl_line(raw, path, line)
        if located is not None:
            records += 1
            yield *located, (offset, line, records)


def _parsed(located: Iterator[tuple[str, dict[str, Any], tuple[int, int, int]]], unquote: bool) -> Iterator[Chunk]:
    """Records read one by one through `corpus_passage` (errors name the record), `CHUNK_ROWS` a chunk."""
    pairs = ((where, (record, end)) for where, record, end in located)
    parsed = parse_located(pairs, lambda pair: (corpus_passage(pair[0], unquote), pair[1]))
    while batch := [item for _, item in islice(parsed, CHUNK_ROWS)]:
        columns = [pa.array([getattr(p, name) for p, _ in batch], pa.string()) for name in ("id", "title", "text")]
        yield Chunk(columns, np.array([end for _, end in batch], dtype=np.int64))


def _arrow_block(data: bytes, offset: int, line: int, records: int, unquote: bool) -> Chunk | None:
    """The block parsed by Arrow when every line of it is a FlashRAG record with an id, in UTF-8; None otherwise.
    Arrow's JSON reader passes bytes that are not UTF-8 into its strings, so the table is validated (about 1% of
    the parse): such a block is read line by line, whose error names the file and line."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10) + 1
    if not data.endswith(b"\n"):
        ends = np.append(ends, len(data))
    try:
        table = pj.read_json(io.BytesIO(data))
        table.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != len(ends):  # a blank line: the record-by-record read keeps the line numbers right
        return None
    columns = _passage_columns(table, unquote)
    if columns is None:
        return None
    rows = np.arange(1, len(ends) + 1)
    return Chunk(columns, np.stack([offset + ends, line + rows, records + rows], axis=1).astype(np.int64))


def _passage_columns(table: pa.Table, unquote: bool) -> list[pa.Array] | None:
    """id, title and text as `corpus_passage` reads FlashRAG records, or None for what it reads otherwise."""
    names = set(table.column_names)
    if any(claims(dict.fromkeys(names, "")) for claims, _ in LAYOUTS.values()):
        return None

    def column(name: str, types: tuple = (pa.string(),)) -> pa.Array | None:
        if name not in names:
            return None
        values = table.column(name).combine_chunks()
        return values if values.type in types and values.null_count == 0 else None

    ids = column("id", (pa.string(), pa.int64()))
    if ids is None:
        return None
    if "contents" in names:
        contents = column("contents")
        if contents is None:
            return None
        parts = pc.split_pattern(contents, "\n", max_splits=1)
        title, text = pc.list_element(parts, 0), pc.binary_join(pc.list_slice(parts, 1, 2), "")
    else:
        title, text = column("title"), column("text")
        if title is None or text is None:
            return None
    if unquote:
        quoted = pc.and_(
            pc.and_(pc.starts_with(title, '"'), pc.ends_with(title, '"')), pc.greater_equal(pc.utf8_length(title), 2)
        )
        title = pc.if_else(quoted, pc.replace_substring(pc.utf8_slice_codeunits(title, 1, -1), '""', '"'), title)
    return [ids.cast(pa.string()), title, text]
