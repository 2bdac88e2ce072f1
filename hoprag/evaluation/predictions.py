"""`predictions.jsonl`: the run's durable record, one JSON line per answered question.

Lines are appended and fsynced batch by batch, so a killed run loses at most the batch in flight. On
reopening, a truncated last line (the only damage a kill can do to an append-only file) is dropped, and the
file is rewritten cleanly before the next append (opening it writes nothing, so a refused rerun leaves it
byte for byte as it was); any other broken line, or an id answered twice, is an error rather than a guess.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hoprag.data.records import DataFormatError

log = logging.getLogger(__name__)


class PredictionFile:
    """The records of `path` (`.records`, `.ids`), loaded on opening."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self._damaged = False  # a truncated last line to cut before appending
        self.records: list[dict[str, Any]] = self._load() if self.path.exists() else []
        self.ids: set[str] = {r["id"] for r in self.records}

    def clear(self) -> None:
        """Start an empty file (`overwrite=true`)."""
        self.path.unlink(missing_ok=True)
        self._damaged = False
        self.records, self.ids = [], set()

    def _load(self) -> list[dict[str, Any]]:
        raw = self.path.read_bytes()
        numbered, truncated = _parse(self.path, raw)
        if truncated is not None:
            log.warning("%s: dropping a truncated last line (a killed run was writing it)", self.path)
        self._damaged = truncated is not None or bool(raw and not raw.endswith(b"\n"))
        return [record for _, record in numbered]

    def _rewrite(self, records: list[dict[str, Any]]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(_line(r) for r in records)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def append(self, records: Iterable[dict[str, Any]]) -> None:
        records = list(records)
        repeated = [r["id"] for r in records if r["id"] in self.ids]
        if repeated or len({r["id"] for r in records}) != len(records):
            raise ValueError(f"{self.path}: refusing to write questions twice: {repeated or 'within one batch'}")
        if self._damaged:
            self._rewrite(self.records)
            self._damaged = False
        with open(self.path, "a", encoding="utf-8") as f:
            f.writelines(_line(r) for r in records)
            f.flush()
            os.fsync(f.fileno())
        self.records.extend(records)
        self.ids.update(r["id"] for r in records)


def _line(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def _parse(path: Path, raw: bytes) -> tuple[list[tuple[int, dict[str, Any]]], int | None]:
    """The records of `raw` with their line numbers, and the number of a truncated last line (None when there
    is none). Any other broken line, a line that is not a record, or an id answered twice raises."""
    lines = [(n, line) for n, line in enumerate(raw.split(b"\n"), 1) if line.strip()]
    records, seen = [], set()
    for i, (n, line) in enumerate(lines):
        try:
            record = json.loads(line)
        except ValueError:  # JSONDecodeError, or UnicodeDecodeError for a line cut inside a character
            if i < len(lines) - 1:
                raise DataFormatError(f"{path}, line {n}: not JSON (only a truncated last line may be)") from None
            return records, n
        if not isinstance(record, dict) or "id" not in record:
            raise DataFormatError(f"{path}, line {n}: not a prediction record (a JSON object with an 'id')")
        if record["id"] in seen:
            raise DataFormatError(f"{path}, line {n}: question {record['id']!r} is answered twice")
        seen.add(record["id"])
        records.append((n, record))
    return records, None


def finished_records(run_dir: str | os.PathLike) -> list[tuple[int, dict[str, Any]]]:
    """A finished `eval.py` run's records with their line numbers, for reports that pin a problem to a line.
    Unlike resuming, a truncated last line is an error: a finished run wrote every line whole."""
    path = _predictions_path(run_dir)
    numbered, truncated = _parse(path, path.read_bytes())
    if truncated is not None:
        raise DataFormatError(f"{path}, line {truncated}: truncated (a killed rerun was writing it?)")
    return numbered


def _predictions_path(run_dir: str | os.PathLike) -> Path:
    path = Path(run_dir) / "predictions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: give the run directory of an eval.py run")
    return path


def run_records(run_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The prediction records of an `eval.py` run directory (for scripts that show a run)."""
    return PredictionFile(_predictions_path(run_dir)).records


def metrics_summary(run_dir: str | os.PathLike, keys: Iterable[str]) -> str:
    """`keys` of the run's metrics.json, one per line ("" before the run has finished once)."""
    path = Path(run_dir) / "metrics.json"
    if not path.is_file():
        return ""
    metrics = json.loads(path.read_text())["metrics"]
    return "\n".join(f"  {k:<34} {metrics[k]}" for k in keys if k in metrics)
