"""Precomputed retrieval runs `{id, doc_ids}` (e.g. Bamboogle's bge top-10 over wiki-18).

They let retrieval-free pipelines and tests replay a published ranking without building an index.
"""

from __future__ import annotations

import os

from hoprag.data.records import DataFormatError, iter_records


def load_ranking(path: str | os.PathLike) -> dict[str, list[str]]:
    """Question id → passage ids in rank order. A repeated question id is an error."""
    ranking: dict[str, list[str]] = {}
    for where, record in iter_records(path):
        if "id" not in record or "doc_ids" not in record:
            raise DataFormatError(f"{where}: expected keys 'id' and 'doc_ids', got {sorted(record)}")
        if not isinstance(record["doc_ids"], list):
            raise DataFormatError(f"{where}: 'doc_ids' must be a list")
        qid = str(record["id"])
        if qid in ranking:
            raise DataFormatError(f"{where}: question id {qid!r} appears twice")
        ranking[qid] = [str(d) for d in record["doc_ids"]]
    return ranking
