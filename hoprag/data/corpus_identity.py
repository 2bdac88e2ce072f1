"""What identifies a corpus without reading it again: the passage digest (a content hash of every passage, computed
once while the corpus is streamed) and a file's quick identity (size, mtime, ctime, inode and a digest of sampled
blocks), which tells a rerun that the file is the one a stored digest was computed from.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoprag.data.types import Passage
from hoprag.utils.contract import sha256

log = logging.getLogger(__name__)

SAMPLED_BLOCKS = 64
BLOCK_BYTES = 1 << 16
_LENGTH = struct.Struct("<Q").pack  # a field's byte length, prefixed as 8 little-endian bytes


class PassageDigest:
    """sha256 over every passage's id, title and text, in order, fed as the corpus streams by.

    Fields are length-prefixed so that moving text between id, title and body changes the hash. This is the
    corpus fingerprint every index is keyed by, whether the passages sit in a list or in a corpus store."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, passage_id: str, title: str, text: str) -> None:
        a, b, c = passage_id.encode("utf-8"), title.encode("utf-8"), text.encode("utf-8")
        self._hash.update(b"".join((_LENGTH(len(a)), a, _LENGTH(len(b)), b, _LENGTH(len(c)), c)))

    def add_arrays(self, ids: pa.Array, titles: pa.Array, texts: pa.Array) -> None:
        """`add` for every row of three Arrow string arrays at once (a corpus store's build and resume): the
        same bytes, joined by Arrow and hashed in one call."""
        fields = []
        for column in (ids, titles, texts):
            lengths = pc.binary_length(column).to_numpy(zero_copy_only=False).astype("<u8")
            prefix = pa.FixedSizeBinaryArray.from_buffers(pa.binary(8), len(column), [None, pa.py_buffer(lengths)])
            fields += [prefix.cast(pa.binary()), column.cast(pa.binary())]
        joined = pc.binary_join_element_wise(*fields, pa.scalar(b"", pa.binary()))
        offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32)[joined.offset : joined.offset + len(joined) + 1]
        if len(joined):
            self._hash.update(memoryview(joined.buffers()[2])[offsets[0] : offsets[-1]])

    def add_all(self, passages: Iterable[Passage]) -> PassageDigest:
        for p in passages:
            self.add(p.id, p.title, p.text)
        return self

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def file_identity(path: str | os.PathLike) -> dict[str, Any]:
    """Size, mtime, ctime, inode and a sha256 over the size and `SAMPLED_BLOCKS` blocks spread evenly over the
    file (the first and last included): reads 4 MiB whatever the file's size, so a rerun recognises a 14 GB corpus
    in milliseconds. The ctime and inode are what an edit cannot put back: writing the file (or `os.utime`
    restoring its mtime afterwards) sets its ctime to now, and a replacement is another inode, so an edit between
    the sampled blocks is noticed too. They also change when the content does not (a copy, a move, a chmod): a
    caller that must not redo work for those checks the content (`cached_sha256`) when size and samples agree."""
    stat = Path(path).stat()
    size = stat.st_size
    digest = hashlib.sha256(size.to_bytes(8, "little"))
    with open(path, "rb") as f:
        last = max(size - BLOCK_BYTES, 0)
        for offset in sorted({last * i // (SAMPLED_BLOCKS - 1) for i in range(SAMPLED_BLOCKS)}):
            f.seek(offset)
            digest.update(f.read(BLOCK_BYTES))
    return {"size": size, "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns, "inode": stat.st_ino,
            "sample_sha256": digest.hexdigest()}  # fmt: skip


def cached_sha256(path: str | os.PathLike, cache_dir: str | os.PathLike) -> str:
    """A file's sha256, read whole once and kept in `<cache_dir>/file-sha256/` with the file's `file_identity`;
    read again only when that changed (a run's fingerprint of a 14 GB corpus file costs a stat and 4 MiB)."""
    path = Path(path).resolve()
    record_path = Path(cache_dir).expanduser() / "file-sha256" / f"{hashlib.sha256(bytes(path)).hexdigest()[:16]}.json"
    identity = file_identity(path)
    if record_path.is_file():
        record = json.loads(record_path.read_text(encoding="utf-8"))
        if record.get("identity") == identity:
            return record["sha256"]
    log.info("sha256 of %s: reading it whole, once for this version of the file", path)
    record = {"path": str(path), "identity": identity, "sha256": sha256(path)}
    record_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = record_path.with_name(f"{record_path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
    os.replace(tmp, record_path)
    return record["sha256"]


FNV_OFFSET, FNV_PRIME = np.uint64(0xCBF29CE484222325), np.uint64(0x100000001B3)


def key_hashes(keys: pa.Array | Iterable[str]) -> np.ndarray:
    """A 64-bit hash of each string (FNV-1a over its UTF-8 bytes and length, then splitmix64's finaliser),
    computed for a whole Arrow array at once: the sorted key of a store's id and title indexes, 8 bytes per
    passage instead of a Python dict of every id. Equal hashes of different strings are told apart by reading
    the strings back, so a collision costs a comparison, never a wrong passage."""
    if isinstance(keys, pa.Array):
        _, offsets_buffer, data_buffer = keys.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32)[keys.offset : keys.offset + len(keys) + 1]
        data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    else:  # a few strings to look up: joined by hand (a first Arrow conversion costs a lazy import)
        encoded = [key.encode("utf-8") for key in keys]
        offsets = np.cumsum([0, *map(len, encoded)])
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    offsets = offsets.astype(np.int64)
    starts, lengths = offsets[:-1], np.diff(offsets)
    hashes = np.full(len(starts), FNV_OFFSET, dtype=np.uint64)
    live = np.arange(len(starts))
    for j in range(int(lengths.max(initial=0))):
        live = live[lengths[live] > j]
        hashes[live] = (hashes[live] ^ data[starts[live] + j]) * FNV_PRIME
    hashes ^= lengths.astype(np.uint64)
    hashes ^= hashes >> np.uint64(30)
    hashes *= np.uint64(0xBF58476D1CE4E5B9)
    hashes ^= hashes >> np.uint64(27)
    hashes *= np.uint64(0x94D049BB133111EB)
    return hashes ^ (hashes >> np.uint64(31))
