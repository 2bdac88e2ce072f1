"""Index builds for corpora of millions of passages (wiki-18: 21M): sharded, resumable dense encoding,
and a streamed BM25 build, each writing where the retrievers' caches look.

The corpus is cut into fixed shards of `shard_size` passages. Each shard is encoded into its own
memory-mapped `.npy` array (float32, or float16 to halve the disk) with its ids beside it, and becomes
visible only by an atomic rename once complete, so a killed build loses at most the shard it was writing
and the next run resumes at the first missing one. Shards do not depend on who encodes them: worker `i`
of `n` (`shard=i/n`, one per GPU or machine) encodes the `i`-th contiguous range of shards, and any
process can then merge them (`merge=true`) into the same FAISS index one process would have built.
Merging trains on a uniform random sample of the vectors and adds them a chunk at a time, so its memory
is the index plus one chunk, never the corpus; an IVF index is not even held: its inverted lists are written to
disk shard by shard (`hoprag.retrieval.ivf_build`), so its memory is the training sample and one shard.

Each shard is stamped last (`shard-NNNNN.stamp.json`, atomically): the embedder (a digest of its
`describe()`), its passage template, the corpus fingerprint, the shard's row range, the dtype, and each
file's byte length and sha256. A shard counts as done only when its stamp matches the plan and its files
have the stamped lengths, so a resumed build rebuilds a short or foreign shard (logged); a merge also
checks every checksum and refuses a missing, foreign, truncated or misplaced shard, naming its file.

Shards are kept after the merge: encoding is the expensive part, and another index type over the same
embedder (Flat vs IVF-PQ) reuses them.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hoprag.data.corpus import iter_corpus
from hoprag.data.types import Passage
from hoprag.retrieval.dense import DenseIndex
from hoprag.retrieval.faiss_placement import placement
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.fingerprint import corpus_fingerprint
from hoprag.retrieval.index_dirs import DEFAULT_INDEX, bm25_index_dir, build_settings, dense_index_dir
from hoprag.retrieval.ivf_build import build_ivf, streamable
from hoprag.retrieval.manifest import MANIFEST, IndexMismatchError, settings_digest, slug
from hoprag.retrieval.sparse import BM25Index
from hoprag.utils import progress as bars
from hoprag.utils.contract import mismatches, sha256

log = logging.getLogger(__name__)

PLAN_FILE = "shards.json"
DTYPES = ("float32", "float16")
LAYOUT_KEYS = ("corpus_fingerprint", "num_passages", "shard_size", "dtype", "dim")  # the plan beside describe()


class Corpus(Protocol):
    """A corpus read in order: its size and content hash in one pass, and any range of it streamed."""

    def describe(self) -> tuple[int, str]: ...

    def passages(self, start: int, stop: int) -> Iterator[Passage]: ...


class PassageList:
    """A corpus already in memory (a dataset's pooled or loaded corpus)."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        self._passages = passages

    def describe(self) -> tuple[int, str]:
        return len(self._passages), corpus_fingerprint(self._passages)

    def passages(self, start: int, stop: int) -> Iterator[Passage]:
        return islice(iter(self._passages), start, stop)


class CorpusFile:
    """A FlashRAG corpus JSONL streamed from disk (never held as a list), read as `read_corpus` reads it,
    so its fingerprint is the one a retriever computes over the loaded corpus."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)

    def describe(self) -> tuple[int, str]:
        count = 0

        def counted() -> Iterator[Passage]:
            nonlocal count
            for passage in iter_corpus(self.path):
                count += 1
                yield passage

        fingerprint = corpus_fingerprint(counted())
        return count, fingerprint

    def passages(self, start: int, stop: int) -> Iterator[Passage]:
        return islice(iter_corpus(self.path), start, stop)


def parse_worker(spec: str | None) -> tuple[int, int] | None:
    """`"i/n"` (worker i of n, 0-based) -> (i, n); None stays None."""
    if spec is None:
        return None
    try:
        index, count = (int(part) for part in str(spec).split("/"))
    except ValueError:
        raise ValueError(f"shard={spec!r}: expected i/n, e.g. shard=0/4") from None
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"shard={spec!r}: need 0 <= i < n")
    return index, count


class ShardStore:
    """The shards of one (corpus, embedder, shard size, dtype) in `directory`, described by `shards.json`."""

    def __init__(self, directory: Path, plan: Mapping[str, Any]) -> None:
        self.directory = directory
        self.plan = dict(plan)
        self.num_passages: int = plan["num_passages"]
        self.shard_size: int = plan["shard_size"]
        self.dim: int = plan["dim"]
        self.num_shards = math.ceil(self.num_passages / self.shard_size)

    @classmethod
    def open(cls, directory: str | Path, plan: Mapping[str, Any]) -> ShardStore:
        """Create the store, or reopen it when its saved plan is `plan`; IndexMismatchError otherwise.
        Workers starting together may all write the plan: the write is atomic and the content the same."""
        directory = Path(directory)
        path = directory / PLAN_FILE
        if path.is_file():
            saved = json.loads(path.read_text(encoding="utf-8"))
            diffs = mismatches(saved, plan)
            if diffs:
                raise IndexMismatchError(f"the shards in {directory} were planned otherwise ({'; '.join(diffs)})")
        else:
            directory.mkdir(parents=True, exist_ok=True)
            _write_atomic(path, json.dumps(dict(plan), indent=2, ensure_ascii=False))
        return cls(directory, plan)

    def bounds(self, shard: int) -> tuple[int, int]:
        start = shard * self.shard_size
        return start, min(start + self.shard_size, self.num_passages)

    def vectors_path(self, shard: int) -> Path:
        return self.directory / f"shard-{shard:05d}.npy"

    def ids_path(self, shard: int) -> Path:
        return self.directory / f"shard-{shard:05d}.json"

    def stamp_path(self, shard: int) -> Path:
        return self.directory / f"shard-{shard:05d}.stamp.json"

    def identity(self, shard: int) -> dict[str, Any]:
        """What the stamp of `shard` must say to belong to this plan: the embedder (a digest of its
        `describe()`), its passage template, the corpus, the shard's rows and the dtype."""
        embedder = {k: v for k, v in self.plan.items() if k not in LAYOUT_KEYS}
        return {
            "embedder": settings_digest(embedder),
            "passage_template": self.plan.get("passage_template"),
            "corpus_fingerprint": self.plan.get("corpus_fingerprint"),
            "rows": list(self.bounds(shard)),
            "dtype": self.plan["dtype"],
        }

    def stamp(self, shard: int) -> None:
        """Write the stamp of a published shard: its identity and each file's byte length and sha256."""
        files = {p.name: {"bytes": p.stat().st_size, "sha256": sha256(p)}
                 for p in (self.vectors_path(shard), self.ids_path(shard))}  # fmt: skip
        _write_atomic(self.stamp_path(shard), json.dumps({**self.identity(shard), "files": files}, indent=1))

    def problems(self, shard: int, checksums: bool = False) -> list[str]:
        """Why `shard` is not usable ([] when it is): no stamp, a stamp of another plan (a foreign shard, or
        other rows), a file missing or of another byte length than stamped (truncated), and with
        `checksums` (read every byte) another sha256."""
        path = self.stamp_path(shard)
        if not path.is_file():
            return [f"{path.name} is missing (an unfinished shard, or one from before shards were stamped)"]
        stamp = json.loads(path.read_text(encoding="utf-8"))
        found = [f"{path.name} {diff}" for diff in mismatches(stamp, self.identity(shard), ("stamped", "planned"))]
        for file in (self.vectors_path(shard), self.ids_path(shard)):
            record = stamp.get("files", {}).get(file.name, {})
            if not file.is_file():
                found.append(f"{file.name} is missing")
            elif file.stat().st_size != record.get("bytes"):
                found.append(f"{file.name} bytes: stamped {record.get('bytes')}, on disk {file.stat().st_size}")
            elif checksums and (digest := sha256(file)) != record.get("sha256"):
                found.append(f"{file.name} sha256: stamped {record.get('sha256')}, on disk {digest}")
        return found

    def done(self, shard: int) -> bool:
        return not self.problems(shard)

    def missing(self) -> list[int]:
        return [k for k in range(self.num_shards) if not self.done(k)]

    def check_complete(self) -> None:
        """Before a merge: FileNotFoundError when shards were never published, IndexMismatchError naming each
        published shard that is unstamped, foreign, truncated, misplaced or corrupt (checksums read)."""
        absent = [k for k in range(self.num_shards) if not self.vectors_path(k).is_file()]
        if absent:
            raise FileNotFoundError(
                f"{len(absent)} of {self.num_shards} shards are missing in {self.directory} (first: {absent[:5]}): "
                "run the shard=i/n workers (or the build without merge=true) first"
            )
        bad = {k: found for k in range(self.num_shards) if (found := self.problems(k, checksums=True))}
        if bad:
            named = "; ".join(f"shard {k}: {', '.join(found)}" for k, found in bad.items())
            raise IndexMismatchError(
                f"{len(bad)} of {self.num_shards} shards in {self.directory} cannot be merged ({named}): rerun the "
                "build without merge=true (or the worker that owns them), which rebuilds them"
            )

    def worker_shards(self, worker: tuple[int, int] | None) -> range:
        """Worker i of n gets the i-th of n contiguous shard ranges (all shards when `worker` is None)."""
        if worker is None:
            return range(self.num_shards)
        i, n = worker
        return range(i * self.num_shards // n, (i + 1) * self.num_shards // n)

    def vectors(self, shard: int) -> np.ndarray:
        return np.load(self.vectors_path(shard), mmap_mode="r")

    def ids(self, shard: int) -> list[str]:
        return json.loads(self.ids_path(shard).read_text(encoding="utf-8"))["ids"]

    def encode_seconds(self) -> float:
        """Encoding time summed over the shards (across workers and resumed runs)."""
        return sum(json.loads(self.ids_path(k).read_text(encoding="utf-8"))["seconds"] for k in range(self.num_shards))

    def encode_shard(
        self,
        shard: int,
        passages: Iterator[Passage],
        embedder: Embedder,
        *,
        chunk_size: int,
        batch_size: int | None,
        bar: Any,
    ) -> None:
        """Encode `shard` (`passages` positioned at its start) into a temporary memmap, then publish it:
        ids first, then the vectors by an atomic rename. A shard has one encoder at a time, so temporary
        files a killed run left for it are removed first."""
        start, stop = self.bounds(shard)
        self.stamp_path(shard).unlink(missing_ok=True)  # the shard is not done until stamped again
        for stale in self.directory.glob(f"shard-{shard:05d}.npy.*.tmp"):
            stale.unlink()
        tmp = self.directory / f"shard-{shard:05d}.npy.{os.getpid()}.tmp"
        stored = np.lib.format.open_memmap(tmp, mode="w+", dtype=self.plan["dtype"], shape=(stop - start, self.dim))
        started, ids = time.perf_counter(), []
        while chunk := list(islice(passages, min(chunk_size, stop - start - len(ids)))):
            stored[len(ids) : len(ids) + len(chunk)] = embedder.encode_passages(chunk, batch_size)
            ids.extend(p.id for p in chunk)
            bar.update(len(chunk))
        if len(ids) != stop - start:
            raise IndexMismatchError(f"the corpus ended at passage {start + len(ids)}, planned {self.num_passages}")
        stored.flush()
        del stored
        record = {"ids": ids, "seconds": round(time.perf_counter() - started, 3)}
        _write_atomic(self.ids_path(shard), json.dumps(record, ensure_ascii=False))
        os.replace(tmp, self.vectors_path(shard))
        self.stamp(shard)

    def sample(self, n: int, seed: int = 0) -> np.ndarray:
        """`n` vectors drawn uniformly without replacement over the whole corpus (all when n >= corpus), as
        float32 in corpus order: an IVF/PQ training set that is not just the first articles of wiki-18."""
        rows = np.arange(self.num_passages)
        if n < self.num_passages:
            rows = np.sort(np.random.default_rng(seed).choice(self.num_passages, n, replace=False))
        parts = []
        for shard in np.unique(rows // self.shard_size):
            start, _ = self.bounds(int(shard))
            local = rows[(rows >= start) & (rows < start + self.shard_size)] - start
            parts.append(np.asarray(self.vectors(int(shard))[local], dtype=np.float32))
        return np.concatenate(parts)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass(frozen=True)
class BuildResult:
    """What one `build_dense` call did: `state` is "cached" (the index was already there: nothing done),
    "encoded" (a worker's shards; merge later) or "built" (merged into the index). `build_seconds` is the
    index's (all shards' encoding plus the merge), or for "encoded" this call's."""

    state: str
    index_dir: Path
    build_seconds: float
    missing_shards: int = 0


def build_dense(
    corpus: Corpus,
    embedder: Embedder,
    cache_dir: str | Path,
    index: Mapping[str, Any] | None = None,
    *,
    shard_size: int = 100_000,
    dtype: str = "float32",
    worker: tuple[int, int] | None = None,
    merge: bool = False,
    force: bool = False,
    batch_size: int | None = None,
    progress: bool | None = None,
) -> BuildResult:
    """Build the dense index `DenseRetriever(corpus, embedder, index, cache_dir)` loads, through shards.

    Without `worker` or `merge`: encode every missing shard, then merge. `worker=(i, n)`: encode only that
    worker's shards. `merge=True`: merge only (every shard must exist). A finished index is left alone
    (state "cached") unless `force`, which redoes what the call does: re-encode its shards, re-merge. An IVF
    factory (without `save_embeddings`) is merged list by list to disk (`ivf_build`), resuming a killed merge.
    """
    if dtype not in DTYPES:
        raise ValueError(f"shard dtype {dtype!r}: choose one of {DTYPES}")
    if worker is not None and merge:
        raise ValueError("shard=i/n encodes one worker's shards and merge=true merges them all: pick one")
    settings = {**DEFAULT_INDEX, **(index or {})}
    if worker is None:
        placement(settings["use_gpu"])  # refused now, not after hours of encoding
    factory = settings["factory"]
    num_passages, fingerprint = corpus.describe()
    if num_passages == 0:
        raise ValueError("cannot build a dense index over an empty corpus")
    index_dir = dense_index_dir(str(cache_dir), embedder, fingerprint, build_settings(settings))
    if not force and (index_dir / MANIFEST).is_file():
        manifest = json.loads((index_dir / MANIFEST).read_text(encoding="utf-8"))
        return BuildResult("cached", index_dir, manifest["build_seconds"])

    plan = {
        **embedder.describe(),
        "corpus_fingerprint": fingerprint,
        "num_passages": num_passages,
        "shard_size": shard_size,
        "dtype": dtype,
        "dim": embedder.dim,
    }
    shards_name = "-".join([fingerprint[:16], slug(embedder.name), settings_digest(plan)])
    store = ShardStore.open(Path(cache_dir).expanduser() / "dense-shards" / shards_name, plan)
    started = time.perf_counter()
    if not merge:
        _encode_missing(store, corpus, embedder, store.worker_shards(worker), force, batch_size, settings, progress)
    if worker is not None:
        missing = len(store.missing())
        log.info("worker %d/%d done; %d of %d shards still missing overall", *worker, missing, store.num_shards)
        return BuildResult("encoded", index_dir, round(time.perf_counter() - started, 3), missing)
    store.check_complete()
    if streamable(factory, store.dim) and not settings["save_embeddings"]:
        manifest = build_ivf(store, index_dir, factory, settings, fresh=force)
        return BuildResult("built", index_dir, manifest["build_seconds"])
    if index_dir.exists():
        shutil.rmtree(index_dir)
    index_dir.mkdir(parents=True)
    built = DenseIndex.from_shards(
        store,
        factory,
        train_size=settings["train_size"],
        chunk_size=settings["chunk_size"],
        ef_construction=settings["ef_construction"],
        embeddings_path=index_dir / "embeddings.npy" if settings["save_embeddings"] else None,
        use_gpu=settings["use_gpu"],
    )
    built.save(index_dir)
    return BuildResult("built", index_dir, built.build_seconds)


def _encode_missing(
    store: ShardStore,
    corpus: Corpus,
    embedder: Embedder,
    shards: range,
    force: bool,
    batch_size: int | None,
    settings: Mapping[str, Any],
    progress: bool | None,
) -> None:
    """Encode the shards of `shards` not yet done (all of them when `force`), streaming the corpus once
    from the first one to do; shards already done in between are read past, not encoded. A published shard
    that is not done (short, foreign, unstamped) is rebuilt, saying why."""
    todo = [k for k in shards if force or not store.done(k)]
    for k in todo:
        if not force and store.vectors_path(k).is_file():
            log.warning("rebuilding shard %d: %s", k, "; ".join(store.problems(k)))
    to_encode = set(todo)
    if not todo:
        return
    if len(todo) < len(shards):
        log.info("resuming at shard %d: %d of %d shards already encoded", todo[0], len(shards) - len(todo), len(shards))
    total = sum(store.bounds(k)[1] - store.bounds(k)[0] for k in todo)
    passages = corpus.passages(store.bounds(todo[0])[0], store.bounds(todo[-1])[1])
    desc = f"encoding shards {todo[0]}-{todo[-1]} with {embedder.name}"
    with bars.bar(total=total, desc=desc, unit="passage", show=progress) as bar:
        for shard in range(todo[0], todo[-1] + 1):
            if shard in to_encode:
                store.encode_shard(
                    shard, passages, embedder, chunk_size=settings["chunk_size"], batch_size=batch_size, bar=bar
                )
            else:
                start, stop = store.bounds(shard)
                for _ in islice(passages, stop - start):
                    pass


def build_bm25(
    corpus: Corpus,
    cache_dir: str | Path,
    *,
    k1: float = 1.5,
    b: float = 0.75,
    method: str = "lucene",
    stemmer: str | None = "english",
    force: bool = False,
) -> BuildResult:
    """Build, once, the BM25 index `BM25Retriever(corpus, cache_dir, ...)` loads, streaming the corpus
    (a wiki-18 file is read, not held); a finished index is left alone unless `force`."""
    num_passages, fingerprint = corpus.describe()
    settings = {"k1": k1, "b": b, "method": method, "stemmer": stemmer}
    index_dir = bm25_index_dir(str(cache_dir), fingerprint, settings)
    if not force and (index_dir / MANIFEST).is_file():
        manifest = json.loads((index_dir / MANIFEST).read_text(encoding="utf-8"))
        return BuildResult("cached", index_dir, manifest["build_seconds"])
    if index_dir.exists():
        shutil.rmtree(index_dir)
    built = BM25Index.build(
        corpus.passages(0, num_passages), corpus_fingerprint=fingerprint, workdir=cache_dir, **settings
    )
    built.save(index_dir)
    return BuildResult("built", index_dir, built.build_seconds)
