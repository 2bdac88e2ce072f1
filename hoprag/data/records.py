"""Reading and writing JSON / JSONL record files, with errors that point at the bad record.

Every loader goes through `parse_records`, so a broken line, a missing key or a bad value (the checks of
`hoprag.data.validation`) anywhere is reported the same way (file, 1-based line or record index, what
is wrong) instead of being skipped or surfacing as a bare KeyError deep inside a loader.
"""

from __future__ import annotations

import bz2
import gzip
import json
import os
import tarfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

from hoprag.utils.refusals import Refusal

T = TypeVar("T")
TAR_SUFFIXES = (".tar", ".tar.bz2", ".tar.gz", ".tgz")


class DataFormatError(Refusal, ValueError):
    """A data file does not match the format it is read as."""


def open_text(path: str | os.PathLike, mode: str = "r") -> IO[str]:
    """Open a UTF-8 text file, transparently (de)compressing `.bz2` / `.gz` (CRAG ships bz2 JSONL)."""
    path = Path(path)
    if path.suffix == ".bz2":
        return bz2.open(path, mode + "t", encoding="utf-8")
    if path.suffix == ".gz":
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def open_binary(path: str | os.PathLike) -> IO[bytes]:
    """Open a file for reading bytes, transparently decompressing `.bz2` / `.gz`."""
    path = Path(path)
    if path.suffix == ".bz2":
        return bz2.open(path, "rb")
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return open(path, "rb")


def is_tar(path: str | os.PathLike) -> bool:
    return Path(path).name.endswith(TAR_SUFFIXES)


def iter_records(path: str | os.PathLike) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield `(location, record)` for a JSON-list file, a JSONL file or a tar archive of JSONL files.

    The container is told by the first non-blank character (`[` = one JSON list, as HotpotQA and 2Wiki
    ship; anything else = JSONL), so a `.json` file holding JSONL still reads. `location` is
    "<file>, line N" (1-based) for JSONL and "<file>, record index N" (0-based) for JSON lists. Bytes are
    decoded per line, so text that is not UTF-8 is reported with its line too; a file without a single
    record (empty, blank, `[]`) is an error, not an empty dataset. A tar archive (`.tar`, optionally bz2 /
    gzip compressed: CRAG's 50-page Task 3 release `crag_task_3_dev_v4.tar.bz2` holds its questions in several
    JSONL parts) is read as a stream, without unpacking: its `.jsonl` members (`.jsonl.bz2` / `.jsonl.gz` too)
    in archive order, located as "<file>:<member>, line N"; other members are skipped.
    """
    found = False
    for item in _tar_records(path) if is_tar(path) else _file_records(path):
        found = True
        yield item
    if not found:
        raise DataFormatError(f"{path} holds no records")


def _file_records(path: str | os.PathLike) -> Iterator[tuple[str, dict[str, Any]]]:
    with open_binary(path) as f:
        first = _first_byte(f)
        if first is not None:
            f.seek(0)
            yield from _json_list(f.read(), path) if first == b"[" else _jsonl(f, path)


def _first_byte(f: IO[bytes]) -> bytes | None:
    """The first non-whitespace byte, or None when the file is empty or blank."""
    while chunk := f.read(4096):
        if stripped := chunk.lstrip():
            return stripped[:1]
    return None


def _json_list(data: bytes, path: str | os.PathLike) -> Iterator[tuple[str, dict[str, Any]]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataFormatError(f"{path}, line {line} (byte offset {e.start}): not UTF-8 text") from None
    del data
    try:
        records = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{path}, line {e.lineno}: invalid JSON ({e.msg})") from None
    for i, record in enumerate(records):
        yield _checked(record, f"{path}, record index {i}")


def _jsonl(f: IO[bytes], path: str | os.PathLike) -> Iterator[tuple[str, dict[str, Any]]]:
    for lineno, raw in enumerate(f, 1):
        if (located := jsonl_line(raw, path, lineno)) is not None:
            yield located


def jsonl_line(raw: bytes, path: str | os.PathLike, lineno: int) -> tuple[str, dict[str, Any]] | None:
    """One JSONL line as `(location, record)`, None when blank; errors name the file and line. For readers
    that keep their own place in a file (a corpus store's resumable build seeks to a byte offset)."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataFormatError(f"{path}, line {lineno}: not UTF-8 text (byte {e.start} of the line)") from None
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise DataFormatError(f"{path}, line {lineno}: invalid JSON ({e.msg})") from None
    return _checked(record, f"{path}, line {lineno}")


def is_plain_jsonl(path: str | os.PathLike) -> bool:
    """An uncompressed JSONL file (not a JSON list, not an archive): one whose lines can be read from any offset."""
    if is_tar(path) or Path(path).suffix in (".bz2", ".gz"):
        return False
    with open(path, "rb") as f:
        return _first_byte(f) not in (b"[", None)


def _tar_records(path: str | os.PathLike) -> Iterator[tuple[str, dict[str, Any]]]:
    with tarfile.open(path, "r|*") as archive:
        for member in archive:
            name = member.name.removesuffix(".bz2").removesuffix(".gz")
            if not member.isfile() or not name.endswith(".jsonl"):
                continue
            with _decompressed(archive.extractfile(member), member.name) as f:
                yield from _jsonl(f, f"{path}:{member.name}")


def _decompressed(f: IO[bytes], name: str) -> IO[bytes]:
    """A member's bytes, decompressed when its name ends in `.bz2` / `.gz`."""
    if name.endswith(".bz2"):
        return bz2.BZ2File(f)
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=f)
    return f


def _checked(record: Any, where: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(record, dict):
        raise DataFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
    return where, record


def parse_records(
    records: Iterable[tuple[str, dict[str, Any]]], parse: Callable[[dict[str, Any]], T]
) -> Iterator[T]:
    """Apply `parse` to each record; any structural error becomes a `DataFormatError` naming the record."""
    return (item for _, item in parse_located(records, parse))


def parse_located(
    records: Iterable[tuple[str, dict[str, Any]]], parse: Callable[[dict[str, Any]], T]
) -> Iterator[tuple[str, T]]:
    """`parse_records` keeping each result's location, for the checks across records (`unique_ids`)."""
    for where, record in records:
        try:
            yield where, parse(record)
        except KeyError as e:
            raise DataFormatError(f"{where}: missing required key {e.args[0]!r}") from None
        except (IndexError, TypeError, ValueError, AttributeError) as e:
            raise DataFormatError(f"{where}: {e}") from None


def unique_ids(
    located: Iterable[tuple[str, T]], id_of: Callable[[T], str], what: str
) -> Iterator[tuple[str, T]]:
    """The items as they come, stopped at the first whose id an earlier one had, naming the id and both
    locations: everything downstream (retrievers, prediction files, metrics) keys by id, so one of the two
    would silently shadow the other."""
    first: dict[str, str] = {}
    for where, item in located:
        key = id_of(item)
        if key in first:
            raise DataFormatError(f"{where}: {what} {key!r} was already given at {first[key]}")
        first[key] = where
        yield where, item


def write_jsonl(records: Iterable[dict[str, Any]], path: str | os.PathLike) -> Path:
    """Write one JSON object per line (UTF-8, non-ASCII kept), creating parent folders."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open_text(path, "w") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def distinct(items: Iterable[T]) -> list[T]:
    """Items without repeats, first-seen order (gold titles keep dataset order)."""
    return list(dict.fromkeys(items))


def extra_fields(record: dict[str, Any], consumed: tuple[str, ...]) -> dict[str, Any]:
    """Fields the record model has no slot for (HotpotQA `level`, 2Wiki `entity_ids`, CRAG `domain`),
    kept in `QAExample.metadata` so nothing in the official record is lost."""
    return {k: v for k, v in record.items() if k not in consumed}
