"""A corpus read on demand: passages stored once as memory-mapped Arrow files, fetched by row or id for the hits only.

wiki-18 (21M passages) as Python objects is over 20 GB; as a `CorpusStore` it is Arrow IPC files that the OS pages
in as rows are read, plus two sorted 64-bit key arrays (passage id and title hashes, memory-mapped too) that map
an id or a title to its rows by binary search. Every retriever reads its corpus through the same few calls
(`take`, `rows_of`, `rows_with_titles`, `fingerprint`), which `MemoryCorpus` gives a list of passages too, so a
dataset's small pooled corpus and wiki-18 are searched by the same code. `hoprag.data.store_build` writes stores.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hoprag.data.corpus_identity import PassageDigest, key_hashes
from hoprag.data.types import Passage

MANIFEST = "manifest.json"
KIND = "corpus_store"
COLUMNS = ("id", "title", "text")
SCHEMA = pa.schema([(name, pa.string()) for name in COLUMNS])
KEYED = ("id", "title")  # the columns with a sorted key index


def part_path(directory: Path, part: int) -> Path:
    return directory / f"part-{part:05d}.arrow"


FENCE = 64  # a new store's fence holds every FENCE-th sorted key: a lookup reads 512 bytes of keys, a page or two


def key_paths(directory: Path, column: str) -> tuple[Path, Path, Path]:
    """The sorted 64-bit hashes of a column, the row of each, and every `fence_stride`-th hash (the fence)."""
    return directory / f"{column}_keys.npy", directory / f"{column}_rows.npy", directory / f"{column}_fence.npy"


def read_batches(path: Path, first: int = 0) -> Iterator[pa.RecordBatch]:
    """An Arrow file's record batches from `first` on, each read from disk when reached: a pass over the corpus
    (an index build, a resumed store build) leaves no page of it resident, as a mapped read would."""
    with pa.OSFile(str(path)) as f:
        reader = pa.ipc.open_file(f)
        for batch in range(first, reader.num_record_batches):
            yield reader.get_batch(batch)


class ArrowPart:
    """One Arrow file, memory-mapped for reads by row (the OS pages in what the hits touch): its record
    batches' columns and the row each batch starts at."""

    def __init__(self, path: Path) -> None:
        self.path = path
        table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()  # zero-copy: pages load as rows are read
        self.columns = [table.column(name).chunks for name in COLUMNS]
        self.starts = np.cumsum([0, *(len(chunk) for chunk in self.columns[0])])

    def values(self, local: np.ndarray, field: int) -> list[str]:
        """The `field` column's values at these rows of the part, in their order: an Arrow `take` for the rows
        that share a record batch with many others, a scalar read for the scattered ones (a few hits in each of
        wiki-18's thousands of batches, where one `take` per batch would cost more than the reads)."""
        column = self.columns[field]
        batches = (np.searchsorted(self.starts, local, side="right") - 1).tolist()
        offsets = (local - self.starts[batches]).tolist()
        found: list[str] = [""] * len(offsets)
        for group in _groups(np.asarray(batches)) if len(offsets) > 64 else [np.arange(len(offsets))]:
            if len(group) > 16:
                batch = batches[group[0]]
                picked = column[batch].take(pa.array([offsets[i] for i in group.tolist()])).to_pylist()
                for i, value in zip(group.tolist(), picked):
                    found[i] = value
            else:
                for i in group.tolist():
                    found[i] = column[batches[i]][offsets[i]].as_py()
        return found

    def passages(self, start: int, stop: int) -> Iterator[Passage]:
        """Rows start..stop-1 of the part, read batch by batch (`read_batches`), not through the map."""
        first_batch = int(np.searchsorted(self.starts, start, side="right")) - 1
        for batch, record_batch in enumerate(read_batches(self.path, first_batch), start=first_batch):
            first, end = int(self.starts[batch]), int(self.starts[batch + 1])
            if first >= stop:
                return
            lo, hi = max(start, first) - first, min(stop, end) - first
            values = [record_batch.column(name).slice(lo, hi - lo).to_pylist() for name in COLUMNS]
            yield from (Passage(*fields) for fields in zip(*values))


class CorpusStore:
    """A built store (see module docstring), opened read-only. Behaves as a sequence of passages (`len`,
    `store[i]`, iteration in corpus order) without holding them; `take` reads many rows at once."""

    def __init__(self, directory: str | Path) -> None:
        self.directory = Path(directory)
        path = self.directory / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"no corpus store in {self.directory} ({MANIFEST} missing)")
        self.manifest: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        if self.manifest.get("kind") != KIND:
            raise ValueError(f"{self.directory} holds a {self.manifest.get('kind')!r}, not a corpus store")
        self.fingerprint: str = self.manifest["corpus_fingerprint"]
        self.part_rows: int = self.manifest["part_rows"]
        self._length: int = self.manifest["num_passages"]
        self._parts: dict[int, ArrowPart] = {}
        self._keys: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def __len__(self) -> int:
        return self._length

    def __repr__(self) -> str:
        return f"CorpusStore({str(self.directory)!r}, {self._length} passages)"

    def __getitem__(self, item: int | slice) -> Passage | list[Passage]:
        if isinstance(item, slice):
            return self.take(range(*item.indices(self._length)))
        return self.take([item + self._length if item < 0 else item])[0]

    def __iter__(self) -> Iterator[Passage]:
        return self.passages(0, self._length)

    def describe(self) -> tuple[int, str]:
        """(size, fingerprint), read from the manifest: what an index build needs, without a pass."""
        return self._length, self.fingerprint

    def _part(self, part: int) -> ArrowPart:
        if part not in self._parts:
            self._parts[part] = ArrowPart(part_path(self.directory, part))
        return self._parts[part]

    def take(self, rows: Iterable[int]) -> list[Passage]:
        """The passages at these rows, in the order given (repeats allowed)."""
        return [Passage(*fields) for fields in zip(*(self._values(rows, column) for column in COLUMNS))]

    def _values(self, rows: Iterable[int], column: str) -> list[str]:
        """One column's values at these rows, read part by part and batch by batch."""
        rows = np.asarray(rows if isinstance(rows, (np.ndarray, list)) else list(rows), dtype=np.int64)
        outside = (rows < 0) | (rows >= self._length)
        if outside.any():
            raise IndexError(f"row {int(rows[outside][0])} is outside the corpus of {self._length} passages")
        parts, local = np.divmod(rows, self.part_rows)
        found: list[str] = [""] * len(rows)
        for group in _groups(parts):
            values = self._part(int(parts[group[0]])).values(local[group], COLUMNS.index(column))
            for i, value in zip(group.tolist(), values):
                found[i] = value
        return found

    def passages(self, start: int, stop: int) -> Iterator[Passage]:
        """Rows start..stop-1 streamed in order, one record batch at a time (an index build's read)."""
        stop = min(stop, self._length)
        while start < stop:
            part, local = divmod(start, self.part_rows)
            end = min(stop - part * self.part_rows, self.part_rows)
            yield from self._part(part).passages(local, end)
            start = part * self.part_rows + end

    def _index(self, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if column not in self._keys:
            keys, rows, fence = key_paths(self.directory, column)
            self._keys[column] = np.load(keys, mmap_mode="r"), np.load(rows, mmap_mode="r"), np.load(fence)
        return self._keys[column]

    def _matches(self, column: str, values: Sequence[str]) -> list[list[int]]:
        """Per value, the rows whose `column` equals it, in corpus order: the rows of equal key hash (a binary
        search in the memory-mapped keys, whose equal keys keep corpus order), their strings read back to drop a
        collision."""
        keys, rows, fence = self._index(column)
        hashes, stride = key_hashes(values), self.manifest["fence_stride"]
        lo, hi = _bound(keys, fence, stride, hashes, "left"), _bound(keys, fence, stride, hashes, "right")
        counts = hi - lo
        ends = np.cumsum(counts)
        at = np.repeat(lo - (ends - counts), counts) + np.arange(int(ends[-1]) if len(ends) else 0)
        candidates = rows[at].tolist()
        owners = np.repeat(np.arange(len(values)), counts).tolist()
        found: list[list[int]] = [[] for _ in values]
        for owner, row, value in zip(owners, candidates, self._values(candidates, column)):
            if value == values[owner]:
                found[owner].append(row)
        return found

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """The row of each passage id, -1 for an id not in the corpus."""
        return np.array([found[0] if found else -1 for found in self._matches("id", ids)], dtype=np.int64)

    def rows_with_titles(self, titles: Sequence[str]) -> list[list[int]]:
        """Per title, every row whose passage has exactly that title, in corpus order."""
        return self._matches("title", titles)

    def get(self, passage_id: str) -> Passage:
        row = int(self.rows_of([passage_id])[0])
        if row < 0:
            raise KeyError(passage_id)
        return self.take([row])[0]

    def __contains__(self, passage_id: object) -> bool:
        return isinstance(passage_id, str) and int(self.rows_of([passage_id])[0]) >= 0


def _bound(keys: np.ndarray, fence: np.ndarray, stride: int, hashes: np.ndarray, side: str) -> np.ndarray:
    """`np.searchsorted(keys, hashes, side)` reading, per hash, the window of `stride` + 1 memory-mapped keys that
    the fence (every `stride`-th key, in memory) delimits: a page or two instead of a binary search's ~20
    scattered pages, which is what makes a cold lookup fast."""
    start = np.maximum(np.searchsorted(fence, hashes, side) - 1, 0) * stride
    at = start[:, None] + np.arange(stride + 1)
    window = keys[np.minimum(at, len(keys) - 1)] if len(keys) else np.zeros(at.shape, np.uint64)
    before = window < hashes[:, None] if side == "left" else window <= hashes[:, None]
    return start + (before & (at < len(keys))).sum(axis=1)


def _groups(keys: np.ndarray) -> list[np.ndarray]:
    """The positions of each distinct key, grouped (for reading rows batch by batch)."""
    order = np.argsort(keys, kind="stable")
    return np.split(order, np.flatnonzero(np.diff(keys[order])) + 1) if len(keys) else []


class MemoryCorpus:
    """A list of passages behind the calls a `CorpusStore` answers, for corpora small enough to hold (a dataset's
    pooled context paragraphs, a test's few passages). The fingerprint is computed once, when first asked."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self.list = list(passages)
        self._row = {p.id: i for i, p in enumerate(self.list)}
        if len(self._row) != len(self.list):
            raise ValueError(f"the corpus has duplicate passage ids ({len(self.list) - len(self._row)} repeats)")

    def __len__(self) -> int:
        return len(self.list)

    def __getitem__(self, item: int | slice) -> Passage | list[Passage]:
        return self.list[item]

    def __iter__(self) -> Iterator[Passage]:
        return iter(self.list)

    @cached_property
    def fingerprint(self) -> str:
        return PassageDigest().add_all(self.list).hexdigest()

    def describe(self) -> tuple[int, str]:
        return len(self.list), self.fingerprint

    def take(self, rows: Iterable[int]) -> list[Passage]:
        return [self.list[int(r)] for r in rows]

    def passages(self, start: int, stop: int) -> Iterator[Passage]:
        return iter(self.list[start:stop])

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        return np.array([self._row.get(pid, -1) for pid in ids], dtype=np.int64)

    @cached_property
    def _title_rows(self) -> dict[str, list[int]]:
        by_title: dict[str, list[int]] = {}
        for i, p in enumerate(self.list):
            by_title.setdefault(p.title, []).append(i)
        return by_title

    def rows_with_titles(self, titles: Sequence[str]) -> list[list[int]]:
        return [list(self._title_rows.get(title, [])) for title in titles]

    def get(self, passage_id: str) -> Passage:
        return self.list[self._row[passage_id]]

    def __contains__(self, passage_id: object) -> bool:
        return passage_id in self._row


Corpus = CorpusStore | MemoryCorpus


def as_corpus(corpus: Corpus | Sequence[Passage]) -> Corpus:
    """A store or memory corpus as it is; any other sequence of passages held as a `MemoryCorpus`."""
    return corpus if isinstance(corpus, (CorpusStore, MemoryCorpus)) else MemoryCorpus(corpus)
