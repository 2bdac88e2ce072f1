"""A BM25 index (bm25s) over passage titles and texts, with English stop words and Snowball stemming.

At wiki-18 scale the corpus is streamed into the tokenizer (its texts are never held, only token ids),
the index is saved once, and loading memory-maps its score matrix instead of reading it into memory.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import Stemmer

from hoprag.retrieval.bm25s_cpu import bm25s
from hoprag.data.types import Passage
from hoprag.retrieval.bm25_build import build_chunked
from hoprag.retrieval.fingerprint import corpus_fingerprint as fingerprint_of
from hoprag.retrieval.manifest import IDS_FILE, check_manifest, new_manifest, read_ids, read_manifest, write_manifest
from hoprag.utils import progress as bars

KIND = "bm25"
BM25S_ARRAYS = {"data": "data.csc.index.npy", "indices": "indices.csc.index.npy"}  # bm25s's file names
STOPWORDS = "en"


def lexical_hits(scores: np.ndarray, rows: np.ndarray) -> list[list[tuple[int, float]]]:
    """Per query, the (row, score) slots of a lexical ranking (BM25, TF-IDF) that are hits, in their order.

    A lexical hit has a positive score. A score of 0 means no query term is in the passage (a question of
    stop words, or in another language): ranking such passages would rank arbitrary ones, so a query gets
    fewer than k hits, or none. Row -1 (no result) is never a hit. The one place this rule lives: every
    retriever and pool that ranks by a lexical score keeps what it returns.
    """
    return [
        [(row, score) for row, score in zip(query_rows, query_scores) if row >= 0 and score > 0]
        for query_rows, query_scores in zip(np.asarray(rows).tolist(), np.asarray(scores).tolist())
    ]


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


class BM25Index:
    """Passage ids in index order and the bm25s model scoring them; queries are tokenized like passages."""

    def __init__(self, model: bm25s.BM25, ids: list[str] | Callable[[], list[str]], manifest: dict[str, Any]) -> None:
        self.model = model
        self._ids = ids
        self.ids_file: Path | None = None  # a fresh build's ids, streamed to a file (read when asked for)
        self.manifest = manifest
        self._stemmer = Stemmer.Stemmer(manifest["stemmer"]) if manifest["stemmer"] else None

    @property
    def build_seconds(self) -> float:
        return self.manifest["build_seconds"]

    @property
    def ids(self) -> list[str]:
        """Passage ids in index order; a loaded index reads them on first use only (a search needs rows)."""
        if callable(self._ids):
            self._ids = self._ids()
        return self._ids

    @classmethod
    def build(
        cls,
        passages: Iterable[Passage],
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        stemmer: str | None = "english",
        corpus_fingerprint: str | None = None,
        progress: bool | None = None,
        chunk_size: int = 100_000,
        workdir: str | Path | None = None,
    ) -> BM25Index:
        """Index `title + "\\n" + text` of every passage (`stemmer=None` turns stemming off); bm25s's own
        bars show when `progress` (None: `hoprag.utils.progress` decides: a terminal, not CI).

        `passages` may be a one-pass stream (a corpus file) when `corpus_fingerprint` is given: it is read
        once, its ids streamed to a file beside the index arrays. The index is built `chunk_size` passages at a time (`bm25_build`:
        memory bounded by a chunk and the vocabulary), its arrays in a scratch folder under `workdir`."""
        if corpus_fingerprint is None:
            passages = list(passages)
            corpus_fingerprint = fingerprint_of(passages)
        progress = bars.enabled() if progress is None else progress
        started = time.perf_counter()
        if workdir is not None:
            Path(workdir).mkdir(parents=True, exist_ok=True)
        count = 0
        with tempfile.NamedTemporaryFile("w", suffix=".json", dir=workdir, delete=False, encoding="utf-8") as out:
            ids_file = Path(out.name)  # the ids stream to disk as the passages go by: none is held

            def texts() -> Iterator[str]:
                nonlocal count
                out.write("[")
                for passage in passages:
                    out.write(("," if count else "") + json.dumps(passage.id, ensure_ascii=False))
                    count += 1
                    yield passage.contents
                out.write("]")

            try:
                model = build_chunked(
                    texts(), k1=k1, b=b, method=method, stemmer=stemmer, stopwords=STOPWORDS, chunk_size=chunk_size,
                    workdir=workdir, progress=progress,
                )  # fmt: skip
            except BaseException:
                ids_file.unlink(missing_ok=True)
                raise
        weakref.finalize(model, ids_file.unlink, missing_ok=True)  # goes with the model's scratch arrays
        if not count:
            raise ValueError("cannot build a BM25 index over an empty corpus")
        manifest = new_manifest(
            KIND,
            k1=k1,
            b=b,
            method=method,
            stemmer=stemmer,
            stopwords=STOPWORDS,
            corpus_fingerprint=corpus_fingerprint,
            num_passages=count,
            build_seconds=round(time.perf_counter() - started, 3),
        )
        index = cls(model, partial(_read_json, ids_file), manifest)
        index.ids_file = ids_file
        return index

    def save(self, directory: str | Path) -> None:
        """Write the bm25s arrays, the id map and (last, marking the save complete) the manifest. Arrays that are
        files already (a chunked build's) are copied as files, never read through memory."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        scores = self.model.scores
        files = {key: Path(scores[key].filename) for key in BM25S_ARRAYS if isinstance(scores[key], np.memmap)}
        self.model.scores = {**scores, **{key: scores[key][:0] for key in files}}  # bm25s writes the rest
        try:
            self.model.save(str(directory), show_progress=False)
        finally:
            self.model.scores = scores
        for key, source in files.items():
            shutil.copyfile(source, directory / BM25S_ARRAYS[key])
        if self.ids_file is not None and callable(self._ids):
            shutil.copyfile(self.ids_file, directory / IDS_FILE)
        else:
            (directory / IDS_FILE).write_text(json.dumps(self.ids, ensure_ascii=False), encoding="utf-8")
        write_manifest(directory, self.manifest)

    @classmethod
    def load(
        cls, directory: str | Path, corpus_fingerprint: str | None = None, mmap: bool = True, **settings: Any
    ) -> BM25Index:
        """Load a saved index; IndexMismatchError if it was built over another corpus or with other
        `settings` (any of k1, b, method, stemmer) than those given. `mmap` maps the score matrix from
        disk (wiki-18's is gigabytes; the OS pages in what queries touch) instead of reading it."""
        directory = Path(directory)
        manifest = read_manifest(directory, KIND)
        unknown = set(settings) - {"k1", "b", "method", "stemmer"}
        if unknown:
            raise TypeError(f"unknown BM25 settings {sorted(unknown)}")
        if corpus_fingerprint is not None:
            settings["corpus_fingerprint"] = corpus_fingerprint
        check_manifest(directory, manifest, settings)
        model = bm25s.BM25.load(str(directory), mmap=mmap, show_progress=False)
        return cls(model, partial(read_ids, directory), manifest)

    def search(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-k BM25 scores for a batch of queries: (scores, row indices), both (n_queries, min(k, n)).

        bm25s fills the k slots even when fewer passages match, so slots may hold score 0: not hits.
        `lexical_hits(scores, rows)` keeps the hits (what `BM25Retriever` returns)."""
        k = min(k, self.manifest["num_passages"])
        if k <= 0 or len(queries) == 0:
            return np.zeros((len(queries), 0), np.float32), np.zeros((len(queries), 0), np.int64)
        tokens = bm25s.tokenize(
            list(queries), stopwords=STOPWORDS, stemmer=self._stemmer, return_ids=False, show_progress=False
        )
        indices, scores = self.model.retrieve(tokens, k=k, show_progress=False)
        return scores, indices
