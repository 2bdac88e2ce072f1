"""Building a `CorpusStore` from a corpus file: streamed once, written in parts that survive a kill, and found again
by the file's quick identity, so a rerun or a worker never reads 21M lines to fingerprint the corpus.

A store lives in `<index_dir>/corpus/<fingerprint[:16]>/`, beside the indexes built over it. While it is built it
is `<index_dir>/corpus/building-<digest of its plan>/` (the plan: the file's path and sha256, the title setting
and the part sizes): each part of `part_rows` passages becomes visible by an atomic rename once complete, with its
stamp (rows, byte offset and line reached in the source, seconds) written last. A build that fails (a bad record,
Ctrl-C, a full disk) removes its folder; a process killed outright (SIGKILL, SIGTERM, the OOM killer, a lost
machine) leaves it, and the next build of the same content resumes after the last stamped part (seeking to its byte
offset in an uncompressed JSONL file; a compressed file or a JSON list is read past that many records), while a
leftover for the file as it was before (another plan) is removed, with a log line either way. The full passage
digest (the corpus fingerprint) is computed during the one pass, re-read from the finished parts on a resume; the
id and title key indexes are sorted at the end, where repeated passage ids are refused as `read_corpus` refuses
them. `<index_dir>/corpus/sources/<digest of the path>.json` then records, for the file, its quick identity
(`hoprag.data.corpus_identity.file_identity`: size, mtime, ctime, inode, sampled blocks), its sha256 (kept in
`<index_dir>/file-sha256/`, which a run's resume check reads too) and the store. A rerun opens the store when the
quick identity is the recorded one. When it is not but size and sampled blocks agree (the file copied, moved,
touched or chmod-ed, or edited between the samples), the file is read whole once for its sha256: a store recorded
with that sha256, for this path or any other, is opened and this path's record takes the new identity; anything
else builds a new store. Processes that open the same file together (a sweep's jobs) take a lock beside its
record: one builds (or reads the sha256), the others wait and open its store.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import asdict
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from hoprag.data.corpus import corpus_passage
from hoprag.data.corpus_identity import PassageDigest, cached_sha256, file_identity, key_hashes
from hoprag.data.corpus_store import (
    COLUMNS,
    FENCE,
    KEYED,
    KIND,
    MANIFEST,
    SCHEMA,
    ArrowPart,
    CorpusStore,
    key_paths,
    part_path,
    read_batches,
)
from hoprag.data.records import DataFormatError, is_plain_jsonl, iter_records, parse_located
from hoprag.data.store_source import Chunk, Position, read_chunks
from hoprag.utils import progress as bars

log = logging.getLogger(__name__)

STORES = "corpus"  # under the index directory
SOURCES = "sources"
PLAN = "plan.json"
PART_ROWS = 1_000_000  # passages per part: the unit of resume
BATCH_ROWS = 8192  # passages per Arrow record batch
SAME_CONTENT = ("size", "sample_sha256", "unquote_titles")  # identity keys a copy, move or touch keeps


def store_root(index_dir: str | os.PathLike) -> Path:
    return Path(index_dir).expanduser() / STORES


def open_corpus_store(
    path: str | os.PathLike,
    index_dir: str | os.PathLike,
    *,
    unquote_titles: bool = True,
    part_rows: int = PART_ROWS,
    batch_rows: int = BATCH_ROWS,
    progress: bool | None = None,
) -> CorpusStore:
    """The store of the corpus file `path` (read as `read_corpus` reads it): opened when the file is recognised
    (module docstring), else built (or its killed build resumed) under `<index_dir>/corpus`."""
    path = Path(path).resolve()
    root = store_root(index_dir)
    identity = {**file_identity(path), "unquote_titles": unquote_titles}
    record_path = _record_path(root, path)
    found = _recognised(root, path, identity)
    if found is not None:
        return found
    record_path.parent.mkdir(parents=True, exist_ok=True)
    with open(record_path.with_suffix(".lock"), "w") as lock:  # jobs started together: one builds, the rest wait
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = stored_corpus(path, index_dir, identity)
        if found is not None:
            return found
        if record_path.is_file():
            log.info("%s changed since its corpus store was built: building a new one", path)
        digest = cached_sha256(path, index_dir)
        store = build_corpus_store(path, root, identity, digest, part_rows=part_rows, batch_rows=batch_rows,
                                   progress=progress)  # fmt: skip
        _write_record(root, path, identity, digest, store)
    return store


def stored_corpus(
    path: str | os.PathLike, index_dir: str | os.PathLike, identity: dict[str, Any] | None = None
) -> CorpusStore | None:
    """The store built from `path` as it is now, or None: no build. Recognised by the quick identity, else, when
    size and sampled blocks agree with a record's, by the file's sha256 (module docstring)."""
    path = Path(path).resolve()
    root = store_root(index_dir)
    if identity is None:
        own = _read_record(_record_path(root, path))  # the title setting it was built with; else the default
        identity = {**file_identity(path), "unquote_titles": own["identity"]["unquote_titles"] if own else True}
    return _recognised(root, path, identity) or _same_content(root, path, identity, index_dir)


def _recognised(root: Path, path: Path, identity: dict[str, Any]) -> CorpusStore | None:
    """The store recorded for `path` when its quick identity is unchanged: a stat and 4 MiB read."""
    record = _read_record(_record_path(root, path))
    if record is None or record["identity"] != identity or not _has_store(root, record):
        return None
    return CorpusStore(root / record["store"])


def _same_content(
    root: Path, path: Path, identity: dict[str, Any], index_dir: str | os.PathLike
) -> CorpusStore | None:
    """A store recorded, for any path, from a file with `path`'s sha256, read only when some record has its size
    and sampled blocks; this path's record then takes the new identity (the next open is quick again)."""
    records = [_read_record(p) for p in sorted((root / SOURCES).glob("*.json"))]
    candidates = [r for r in records if r is not None and r.get("sha256") and _has_store(root, r)
                  and all(r["identity"].get(key) == identity[key] for key in SAME_CONTENT)]  # fmt: skip
    if not candidates:
        return None
    digest = cached_sha256(path, index_dir)
    match = next((r for r in candidates if r["sha256"] == digest), None)
    if match is None:
        return None
    store = CorpusStore(root / match["store"])
    log.info("%s: another inode, ctime or mtime (copied, moved or touched) but the sha256 recorded for %s: opening "
             "its corpus store", path, match["path"])  # fmt: skip
    _write_record(root, path, identity, digest, store)
    return store


def _record_path(root: Path, path: Path) -> Path:
    return root / SOURCES / f"{_digest(str(path))}.json"


def _read_record(record_path: Path) -> dict[str, Any] | None:
    return json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else None


def _has_store(root: Path, record: dict[str, Any]) -> bool:
    return (root / record["store"] / MANIFEST).is_file()


def _write_record(root: Path, path: Path, identity: dict[str, Any], digest: str, store: CorpusStore) -> None:
    record = {"path": str(path), "identity": identity, "sha256": digest, "store": store.directory.name,
              "corpus_fingerprint": store.fingerprint}  # fmt: skip
    _write_atomic(_record_path(root, path), json.dumps(record, indent=1))


def build_corpus_store(
    path: Path,
    root: Path,
    identity: dict[str, Any],
    sha256: str,
    *,
    part_rows: int = PART_ROWS,
    batch_rows: int = BATCH_ROWS,
    progress: bool | None = None,
) -> CorpusStore:
    """Stream `path` (whose content hashes to `sha256`) into a store under `root` (module docstring). Called under
    the lock on `path`, so any other build folder of `path` is a dead process's; a failure removes the folder."""
    plan = {"source": str(path), "sha256": sha256, "unquote_titles": identity["unquote_titles"],
            "part_rows": part_rows, "batch_rows": batch_rows}  # fmt: skip
    work = _work_dir(root, plan)
    try:
        return _build(path, root, work, identity, plan, progress)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _work_dir(root: Path, plan: dict[str, Any]) -> Path:
    """The build folder of `plan`, a killed build's resumed as it is; another folder building the same file (as
    it was before, or with other settings) is a dead build's and is removed."""
    work = root / f"building-{_digest(json.dumps(plan, sort_keys=True))}"
    for leftover in root.glob("building-*"):
        if leftover != work and _read_plan(leftover).get("source") == plan["source"]:
            log.info("removing %s: a killed build of the corpus store of %s as it was before or with other settings",
                     leftover, plan["source"])  # fmt: skip
            shutil.rmtree(leftover)
    if work.is_dir():
        log.info("reusing %s: a killed build of the corpus store of %s", work, plan["source"])
    work.mkdir(parents=True, exist_ok=True)
    _write_atomic(work / PLAN, json.dumps(plan, indent=1))
    return work


def _read_plan(work: Path) -> dict[str, Any]:
    return json.loads((work / PLAN).read_text(encoding="utf-8")) if (work / PLAN).is_file() else {}


def _build(
    path: Path, root: Path, work: Path, identity: dict[str, Any], plan: dict[str, Any], progress: bool | None
) -> CorpusStore:
    """The build in `work`: the parts after those already stamped, the key indexes, then the rename to the store."""
    part_rows, batch_rows = plan["part_rows"], plan["batch_rows"]
    stamps = _finished_parts(work)
    digest, position = PassageDigest(), Position()
    if stamps:
        log.info("resuming the corpus store of %s after part %d (%d passages)", path, len(stamps) - 1,
                 stamps[-1]["rows"][1])  # fmt: skip
        for k in range(len(stamps)):
            for batch in read_batches(part_path(work, k)):
                digest.add_arrays(*(batch.column(name) for name in COLUMNS))
        position = Position(**stamps[-1]["position"])
    writer = PartWriter(work, len(stamps), stamps[-1]["rows"][1] if stamps else 0, part_rows, batch_rows)
    plain = position.offset is not None and is_plain_jsonl(path)
    with bars.bar(total=identity["size"] if plain else None, desc=f"corpus store of {path.name}",
                  unit="B" if plain else "passage", unit_scale=True, initial=position.offset or 0,
                  show=progress) as bar:  # fmt: skip
        for chunk in read_chunks(path, position, identity["unquote_titles"]):
            digest.add_arrays(*chunk.columns)
            writer.add(chunk)
            bar.update((chunk.position(len(chunk) - 1).offset or 0) - bar.n if plain else len(chunk))
        writer.close()
    fingerprint = digest.hexdigest()
    started = time.perf_counter()
    _write_key_indexes(work, writer.part, part_rows, path, identity["unquote_titles"])
    target = root / fingerprint[:16]
    if (target / MANIFEST).is_file():  # the same passages, stored from another file before
        shutil.rmtree(work)
        return CorpusStore(target)
    parts_seconds = sum(json.loads(p.read_text(encoding="utf-8"))["seconds"] for p in work.glob("part-?????.json"))
    seconds = parts_seconds + time.perf_counter() - started
    manifest = {
        "kind": KIND, "corpus_fingerprint": fingerprint, "num_passages": writer.rows, "part_rows": part_rows,
        "batch_rows": batch_rows, "parts": writer.part, "unquote_titles": identity["unquote_titles"],
        "source": {"path": str(path), **identity, "sha256": plan["sha256"]}, "build_seconds": round(seconds, 3),
        "resumed_parts": len(stamps), "fence_stride": FENCE,
    }  # fmt: skip
    _write_atomic(work / MANIFEST, json.dumps(manifest, indent=1))
    if target.exists():
        shutil.rmtree(target)
    os.replace(work, target)
    log.info("corpus store of %s: %d passages in %.1f s, %s", path, writer.rows, seconds, target)
    return CorpusStore(target)


class PartWriter:
    """Writes passages into numbered Arrow parts of `part_rows`, each published whole (rename, then stamp)."""

    def __init__(self, directory: Path, part: int, rows: int, part_rows: int, batch_rows: int) -> None:
        self.directory, self.part, self.rows = directory, part, rows
        self.part_rows, self.batch_rows = part_rows, batch_rows
        self.keys: dict[str, list[np.ndarray]] = {column: [] for column in KEYED}
        self.in_part = 0
        self.last = Position()
        self.writer: pa.RecordBatchFileWriter | None = None
        self.started = time.perf_counter()

    def add(self, chunk: Chunk) -> None:
        """Append a chunk, finishing each part it fills at the source position after the part's last row."""
        start = 0
        while start < len(chunk):
            taken = min(len(chunk) - start, self.part_rows - self.in_part)
            for begin in range(start, start + taken, self.batch_rows):
                self._write(
                    [column.slice(begin, min(self.batch_rows, start + taken - begin)) for column in chunk.columns]
                )
            self.in_part += taken
            self.rows += taken
            start += taken
            if self.in_part == self.part_rows:
                self._finish(chunk.position(start - 1))
        if len(chunk):
            self.last = chunk.position(len(chunk) - 1)

    def close(self) -> None:
        if self.in_part:
            self._finish(self.last)

    def _tmp(self) -> Path:
        return self.directory / f"part-{self.part:05d}.arrow.{os.getpid()}.tmp"

    def _write(self, columns: list[pa.Array]) -> None:
        if self.writer is None:
            self.writer = pa.ipc.new_file(str(self._tmp()), SCHEMA)
        self.writer.write_batch(pa.record_batch(columns, schema=SCHEMA))
        for column in KEYED:
            self.keys[column].append(key_hashes(columns[COLUMNS.index(column)]))

    def _finish(self, position: Position) -> None:
        assert self.writer is not None
        self.writer.close()
        self.writer = None
        final = part_path(self.directory, self.part)
        os.replace(self._tmp(), final)
        for column in KEYED:
            _save_atomic(_part_keys(self.directory, self.part, column), np.concatenate(self.keys[column]))
            self.keys[column] = []
        stamp = {"rows": [self.rows - self.in_part, self.rows], "position": asdict(position),
                 "bytes": final.stat().st_size, "seconds": round(time.perf_counter() - self.started, 3)}  # fmt: skip
        _write_atomic(_stamp_path(self.directory, self.part), json.dumps(stamp))
        self.part += 1
        self.in_part = 0
        self.started = time.perf_counter()


def _stamp_path(directory: Path, part: int) -> Path:
    return directory / f"part-{part:05d}.json"


def _part_keys(directory: Path, part: int, column: str) -> Path:
    return directory / f"part-{part:05d}.{column}_keys.npy"


def _finished_parts(directory: Path) -> list[dict[str, Any]]:
    """The stamps of the leading parts that are complete (stamped, file of the stamped size, keys saved);
    whatever follows the first incomplete one is removed, to be written again."""
    stamps: list[dict[str, Any]] = []
    while (stamp_path := _stamp_path(directory, len(stamps))).is_file():
        stamp = json.loads(stamp_path.read_text(encoding="utf-8"))
        data = part_path(directory, len(stamps))
        keys = [_part_keys(directory, len(stamps), column) for column in KEYED]
        if not data.is_file() or data.stat().st_size != stamp["bytes"] or not all(p.is_file() for p in keys):
            break
        stamps.append(stamp)
    for leftover in directory.glob("part-*"):
        if int(leftover.name[5:10]) >= len(stamps):
            leftover.unlink()
    return stamps


def _write_key_indexes(directory: Path, parts: int, part_rows: int, source: Path, unquote: bool) -> None:
    """Sort each keyed column's hashes into `<column>_keys.npy` with their rows; a passage id given twice
    is refused (the build is discarded) naming the id and both lines of the source."""
    for column in KEYED:
        hashes = np.concatenate([np.load(_part_keys(directory, k, column)) for k in range(parts)])
        order = np.argsort(hashes, kind="stable")
        hashes = hashes[order]
        if column == "id":
            _refuse_repeated_ids(directory, hashes, order, part_rows, source, unquote)
        keys_path, rows_path, fence_path = key_paths(directory, column)
        _save_atomic(keys_path, hashes)
        _save_atomic(rows_path, order.astype(np.int64))
        _save_atomic(fence_path, hashes[::FENCE].copy())
    for k in range(parts):
        for column in KEYED:
            _part_keys(directory, k, column).unlink()


def _refuse_repeated_ids(
    directory: Path, hashes: np.ndarray, order: np.ndarray, part_rows: int, source: Path, unquote: bool
) -> None:
    parts: dict[int, ArrowPart] = {}

    def id_at(row: int) -> str:
        part, local = divmod(row, part_rows)
        if part not in parts:
            parts[part] = ArrowPart(part_path(directory, part))
        return parts[part].values(np.array([local]), 0)[0]

    for i in np.flatnonzero(hashes[1:] == hashes[:-1]).tolist():
        repeated = id_at(int(order[i]))
        if repeated == id_at(int(order[i + 1])):
            located = parse_located(iter_records(source), lambda record: corpus_passage(record, unquote))
            first, second = islice((where for where, p in located if p.id == repeated), 2)
            raise DataFormatError(f"{second}: passage id {repeated!r} was already given at {first}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _save_atomic(path: Path, array: np.ndarray) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.save(f, array)
    os.replace(tmp, path)
