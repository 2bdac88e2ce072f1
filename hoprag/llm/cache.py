"""An on-disk cache of greedy generations, keyed by the full request.

The key is the sha256 of the backend's identity (class, model, dtype, prompt handling ...), the prompt
(text or chat messages) and the sampling parameters, so changing any of them misses. Only greedy requests
are cached: a sampled request must give fresh samples each time it is asked (MCTS asks the same prompt
again on purpose), and a seeded sample depends on the rest of its batch. One SQLite file per location
(`generations.sqlite`), safe for several processes; `llm.generation_cache=null` turns it off.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hoprag.llm.prompts import Prompt
from hoprag.llm.types import Generation, SamplingParams

# Bumped whenever what a cached Generation holds changes meaning (2: completion tokens exclude the end token;
# 3: a reasoning model's thinking is held apart from the text, and stop strings are not looked for in it),
# so entries written under the old rule are never served under the new one.
FORMAT = 3
# SamplingParams fields added since FORMAT 2: keyed only when set
LATER_FIELDS = {"candidates": (), "keep_special_tokens": False}


def request_key(identity: str, prompt: Prompt, params: SamplingParams) -> str:
    prompt_json = prompt if isinstance(prompt, str) else [dict(m) for m in prompt]
    fields = {k: v for k, v in dataclasses.asdict(params).items() if k not in LATER_FIELDS or v != LATER_FIELDS[k]}
    request = {"llm": identity, "prompt": prompt_json, "params": fields, "format": FORMAT}
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


class GenerationCache:
    """`get(keys)` → {key: generations} for the keys present; `put({key: generations})`."""

    FILE = "generations.sqlite"

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / self.FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS generations (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.commit()

    def get(self, keys: Sequence[str]) -> dict[str, list[Generation]]:
        found: dict[str, list[Generation]] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):  # SQLite's bound-parameter limit
            chunk = unique[start : start + 500]
            rows = self._db.execute(
                f"SELECT key, value FROM generations WHERE key IN ({','.join('?' * len(chunk))})", chunk
            )
            found.update((key, _decode(value)) for key, value in rows)
        return found

    def put(self, entries: dict[str, list[Generation]]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO generations (key, value) VALUES (?, ?)",
                [(key, _encode(gens)) for key, gens in entries.items()],
            )

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM generations").fetchone()[0]

    def __repr__(self) -> str:
        return f"GenerationCache({str(self.path)!r})"


def _encode(generations: list[Generation]) -> str:
    return json.dumps([dataclasses.asdict(g) for g in generations])


def _decode(value: str) -> list[Generation]:
    def one(record: dict[str, Any]) -> Generation:
        logprobs, candidates = record["logprobs"], record.get("candidate_logprobs")
        record |= {
            "tokens": tuple(record["tokens"]),
            "logprobs": None if logprobs is None else tuple(logprobs),
            "candidate_logprobs": None if candidates is None else tuple(candidates),
        }
        return Generation(**record)

    return [one(r) for r in json.loads(value)]
