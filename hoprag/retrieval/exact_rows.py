"""Exact passage vectors read back by row from files on disk: the float16/float32 shards of a sharded build, or a
FAISS Flat file (FlashRAG's `e5_Flat.index`).

Rows are read with `pread`, so the pages pass through the OS's page cache instead of being mapped into the process:
re-ranking a hundred candidates per query, or converting a 60 GB Flat file, costs the process the rows it holds,
not the file (a memory map would count every page it touched as the process's own resident memory).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np


class RowFile:
    """A file holding `num_rows` rows of `dim` values of `dtype` back to back from byte `offset`."""

    def __init__(self, path: str | Path, offset: int, num_rows: int, dim: int, dtype: str | np.dtype) -> None:
        self.path = Path(path)
        self.offset = offset
        self.num_rows = num_rows
        self.dim = dim
        self.dtype = np.dtype(dtype)
        self.width = dim * self.dtype.itemsize
        self._file = None

    @classmethod
    def npy(cls, path: str | Path) -> RowFile:
        """The rows of a 2-d `.npy` array (a shard), after its header."""
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = header(f)
            if fortran or len(shape) != 2:
                raise ValueError(f"{path}: expected a C-ordered 2-d array, found shape {shape}")
            return cls(path, f.tell(), shape[0], shape[1], dtype)

    def _fd(self) -> int:
        if self._file is None:
            self._file = open(self.path, "rb", buffering=0)  # noqa: SIM115 (kept open while the rows are read)
        return self._file.fileno()

    def read(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """The rows `rows` (in that order) as float32; a run of consecutive rows is one read."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= self.num_rows):
            raise IndexError(f"rows {rows.min()}..{rows.max()} outside the {self.num_rows} rows of {self.path}")
        if len(rows) > 1 and np.all(np.diff(rows) == 1):
            data = os.pread(self._fd(), self.width * len(rows), self.offset + self.width * int(rows[0]))
        else:
            data = b"".join(os.pread(self._fd(), self.width, self.offset + self.width * int(r)) for r in rows)
        return np.frombuffer(data, self.dtype).reshape(len(rows), self.dim).astype(np.float32)


class ShardRows:
    """The rows of a sharded build's vectors (`shard-NNNNN.npy`, `shard_size` rows each) by corpus row."""

    def __init__(self, directory: str | Path, shard_size: int, num_rows: int) -> None:
        self.directory = Path(directory)
        self.shard_size = shard_size
        self.num_rows = num_rows
        missing = [k for k in range(math.ceil(num_rows / shard_size)) if not self._path(k).is_file()]
        if missing:
            raise FileNotFoundError(
                f"the exact vectors of this index ({len(missing)} shards, first {self._path(missing[0]).name}) are not "
                f"in {self.directory}: re-ranking reads them there; rebuild with python build_index.py (which keeps "
                "the shards), or set index.refine=null"
            )
        self._files: dict[int, RowFile] = {}

    def _path(self, shard: int) -> Path:
        return self.directory / f"shard-{shard:05d}.npy"

    def _file(self, shard: int) -> RowFile:
        if shard not in self._files:
            self._files[shard] = RowFile.npy(self._path(shard))
        return self._files[shard]

    def read(self, rows: Sequence[int] | np.ndarray) -> np.ndarray:
        """The vectors of corpus rows `rows`, in that order, as float32."""
        rows = np.asarray(rows, dtype=np.int64)
        shards = rows // self.shard_size
        out = np.empty((len(rows), self._file(0).dim), np.float32)
        for shard in np.unique(shards):
            at = np.flatnonzero(shards == shard)
            out[at] = self._file(int(shard)).read(rows[at] - shard * self.shard_size)
        return out


def rerank(
    queries: np.ndarray, candidates: np.ndarray, rows: ShardRows, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """The top `k` of each query's `candidates` (row ids, -1 for none) by exact inner product with their stored
    vectors: (scores, rows), both (n_queries, k), missing slots -1 with FAISS's lowest score."""
    scores = np.full((len(queries), k), np.finfo(np.float32).min, np.float32)
    found = np.full((len(queries), k), -1, np.int64)
    for i, (query, row_ids) in enumerate(zip(queries, candidates)):
        row_ids = row_ids[row_ids >= 0]
        exact = rows.read(row_ids) @ query
        top = np.argsort(-exact, kind="stable")[:k]
        scores[i, : len(top)], found[i, : len(top)] = exact[top], row_ids[top]
    return scores, found
