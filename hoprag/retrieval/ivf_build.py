"""An IVF index written from a shard store to disk list by list, in memory bounded by the training sample and one
shard, never by the corpus (wiki-18: 21M passages).

The index is trained on `train_size` vectors drawn uniformly from the shards (its k-means on a GPU when the
placement names one, through the IVF's `clustering_index`). Each shard is then assigned and encoded (`sa_encode`)
and its codes, sorted by inverted list, are written to a run file beside the index (`runs/`, published
atomically; the trained index is saved there too, so a killed build resumes at the first missing run). The runs
are merged into one FAISS file a range of lists at a time: the very bytes `faiss.write_index` writes for the
same index filled in one piece, so FAISS opens it as it is, read whole or memory-mapped (`IO_FLAG_MMAP`: the
lists are paged in as they are searched, and load takes seconds).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import struct
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np

from hoprag.retrieval.dense import INDEX_FILE, adapt_factory, release_freed_memory, shard_manifest
from hoprag.retrieval.faiss_placement import Placement, placement, to_gpu
from hoprag.retrieval.manifest import IDS_FILE, write_manifest

if TYPE_CHECKING:
    from hoprag.retrieval.shards import ShardStore

log = logging.getLogger(__name__)

RUNS = "runs"
TRAINED = "trained.faiss"
RANGE_BYTES = 64 * 2**20  # lists merged at a time: the merge's memory, whatever the corpus
SEED = 0  # of the training sample, as DenseIndex.from_shards draws it


def _lists_header(ivf: faiss.IndexIVF, kind: bytes, sizes: np.ndarray) -> bytes:
    """FAISS's serialised ArrayInvertedLists up to the list data: "full" with every list's size, or "sprs"."""
    return (b"ilar" + struct.pack("<QQ", ivf.nlist, ivf.code_size) + kind
            + struct.pack("<Q", len(sizes)) + sizes.astype("<u8").tobytes())  # fmt: skip


def _serialised_without_lists(index: faiss.Index) -> bytes | None:
    """`index` (an IVF with empty lists) serialised without its empty lists, or None when the lists are not the
    last thing FAISS writes (an IVF inside a refinement index, a type that is no IVF): those cannot be streamed."""
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None:
        return None
    data = faiss.serialize_index(index).tobytes()
    empty = _lists_header(ivf, b"sprs", np.zeros(0, np.uint64))
    return data[: -len(empty)] if data.endswith(empty) else None


def streamable(factory: str, dim: int) -> bool:
    """Whether the FAISS `factory` is an IVF index this module can write list by list."""
    return _serialised_without_lists(faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)) is not None


def header(trained: faiss.Index, sizes: np.ndarray) -> bytes:
    """The bytes of the `trained` index's file before its list data, for lists of `sizes` vectors."""
    ivf = faiss.extract_index_ivf(trained)
    trained.ntotal = ivf.ntotal = int(sizes.sum())
    try:
        head = _serialised_without_lists(trained)
    finally:
        trained.ntotal = ivf.ntotal = 0
    return head + _lists_header(ivf, b"full", sizes)


def build_ivf(store: ShardStore, directory: Path, factory: str, settings: Mapping[str, Any], fresh: bool) -> dict:
    """Write the complete index directory of `factory` over `store` (index file, ids, manifest last), resuming
    the runs a killed build left unless `fresh`; returns the manifest."""
    started = time.perf_counter()
    n_train = min(store.num_passages, settings["train_size"])
    faiss_factory = adapt_factory(factory, n_train)
    runs = directory / RUNS
    for stale in directory.iterdir() if directory.exists() else ():  # an older index: only the runs may be resumed
        if stale.is_dir() and (stale != runs or fresh):
            shutil.rmtree(stale)
        elif not stale.is_dir():
            stale.unlink()
    trained = _trained(store, faiss_factory, runs, n_train, settings)
    for shard in range(store.num_shards):
        if not _run_done(runs, shard):
            _write_run(trained, store, shard, runs, settings["chunk_size"])
    counts = np.stack([np.load(_run(runs, k, "counts.npy")) for k in range(store.num_shards)])
    _merge(trained, counts, runs, directory / INDEX_FILE)
    _write_ids(store, directory / IDS_FILE)
    manifest = shard_manifest(store, factory, faiss_factory, store.dim, started, embeddings_file=None,
                              train_sample=n_train, streamed=True)  # fmt: skip
    write_manifest(directory, manifest)
    shutil.rmtree(runs)
    return manifest


def _run(runs: Path, shard: int, suffix: str) -> Path:
    return runs / f"run-{shard:05d}.{suffix}"


def _run_done(runs: Path, shard: int) -> bool:
    """A run counts once its list counts (written last) are there and its files hold that many codes."""
    counts, rows = _run(runs, shard, "counts.npy"), _run(runs, shard, "rows")
    return counts.is_file() and rows.is_file() and rows.stat().st_size == 8 * int(np.load(counts).sum())


def _trained(
    store: ShardStore, faiss_factory: str, runs: Path, n_train: int, settings: Mapping[str, Any]
) -> faiss.Index:
    """The index trained on `n_train` vectors sampled uniformly, saved in `runs` with what it was
    trained on; a saved one trained the same way is reused (with its runs), any other is cleared."""
    recipe = {"faiss_factory": faiss_factory, "train_size": n_train, "seed": SEED, "plan": store.plan}
    if (runs / TRAINED).is_file() and json.loads((runs / "trained.json").read_text(encoding="utf-8")) == recipe:
        log.info("resuming the %s build: %d of %d shards already assigned", faiss_factory,
                 sum(_run_done(runs, k) for k in range(store.num_shards)), store.num_shards)  # fmt: skip
        return faiss.read_index(str(runs / TRAINED))
    shutil.rmtree(runs, ignore_errors=True)
    runs.mkdir(parents=True)
    index = faiss.index_factory(store.dim, faiss_factory, faiss.METRIC_INNER_PRODUCT)
    _cluster_on_gpu(index, placement(settings["use_gpu"]))
    index.train(store.sample(n_train, SEED))
    faiss.extract_index_ivf(index).clustering_index = None
    release_freed_memory()
    faiss.write_index(index, str(runs / f"{TRAINED}.tmp"))
    os.replace(runs / f"{TRAINED}.tmp", runs / TRAINED)
    (runs / "trained.json").write_text(json.dumps(recipe), encoding="utf-8")
    return index


def _cluster_on_gpu(index: faiss.Index, where: Placement) -> None:
    """Run the IVF's k-means (the costly part of training) on the placement's GPU (GPU 0 for "shard"), with the
    metric FAISS's CPU k-means would use (L2 for an HNSW coarse quantizer, which is trained apart); the rest of the
    index, its coarse quantizer included, stays the CPU index the factory made."""
    if not where.on_gpu:
        return
    ivf = faiss.extract_index_ivf(index)
    metric = faiss.METRIC_L2 if ivf.quantizer_trains_alone == 2 else ivf.metric_type
    ivf.clustering_index = to_gpu(faiss.IndexFlat(ivf.d, metric), Placement("gpu", where.gpu), "Flat")


def _write_run(trained: faiss.Index, store: ShardStore, shard: int, runs: Path, chunk_size: int) -> None:
    """Assign and encode `shard` chunk by chunk; write its codes and rows sorted by list, then its list counts."""
    ivf = faiss.extract_index_ivf(trained)
    coarse = ivf.coarse_code_size()
    vectors = store.vectors(shard)
    parts = [trained.sa_encode(np.asarray(vectors[i : i + chunk_size], np.float32))
             for i in range(0, len(vectors), chunk_size)]  # fmt: skip
    encoded = np.concatenate(parts)
    lists = np.zeros(len(encoded), np.int64)
    for byte in range(coarse):  # FAISS writes the list number little-endian in the first `coarse` bytes
        lists |= encoded[:, byte].astype(np.int64) << (8 * byte)
    order = np.argsort(lists, kind="stable")
    start, _ = store.bounds(shard)
    encoded[order, coarse:].tofile(_run(runs, shard, "codes"))
    (start + order).astype(np.int64).tofile(_run(runs, shard, "rows"))
    np.save(_run(runs, shard, "counts.tmp.npy"), np.bincount(lists, minlength=ivf.nlist))
    os.replace(_run(runs, shard, "counts.tmp.npy"), _run(runs, shard, "counts.npy"))
    release_freed_memory()


def _list_ranges(sizes: np.ndarray, bytes_per_vector: int) -> Iterator[tuple[int, int]]:
    """Consecutive ranges of lists holding about RANGE_BYTES each (one list larger than that is its own range)."""
    start, held = 0, 0
    for lst, size in enumerate(sizes.tolist()):
        if held and held + size * bytes_per_vector > RANGE_BYTES:
            yield start, lst
            start, held = lst, 0
        held += size * bytes_per_vector
    yield start, len(sizes)


def _merge(trained: faiss.Index, counts: np.ndarray, runs: Path, path: Path) -> None:
    """The index file: its header, then each list's codes and ids (global rows, in corpus order), gathered from
    every run a range of lists at a time."""
    code_size = faiss.extract_index_ivf(trained).code_size
    sizes = counts.sum(axis=0)
    starts = np.concatenate([np.zeros((len(counts), 1), np.int64), np.cumsum(counts, axis=1)], axis=1)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as out:
        out.write(header(trained, sizes))
        for first, last in _list_ranges(sizes, code_size + 8):
            codes, rows, lists = [], [], []
            for shard in range(len(counts)):
                begin, end = int(starts[shard, first]), int(starts[shard, last])
                codes.append(np.fromfile(_run(runs, shard, "codes"), np.uint8, (end - begin) * code_size,
                                         offset=begin * code_size).reshape(-1, code_size))  # fmt: skip
                rows.append(np.fromfile(_run(runs, shard, "rows"), np.int64, end - begin, offset=8 * begin))
                lists.append(np.repeat(np.arange(first, last), counts[shard, first:last]))
            order = np.argsort(np.concatenate(lists), kind="stable")  # by list, then shard, then row
            codes_sorted, rows_sorted = np.concatenate(codes)[order], np.concatenate(rows)[order]
            bounds = np.concatenate([[0], np.cumsum(sizes[first:last])])
            for begin, end in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                out.write(codes_sorted[begin:end].tobytes())
                out.write(rows_sorted[begin:end].astype("<i8").tobytes())
            release_freed_memory()
    os.replace(tmp, path)


def _write_ids(store: ShardStore, path: Path) -> None:
    """The JSON list of every passage id in index order, written a shard at a time (21M ids as Python strings
    would be gigabytes)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        out.write("[")
        for shard in range(store.num_shards):
            out.write(("," if shard else "") + json.dumps(store.ids(shard), ensure_ascii=False)[1:-1])
        out.write("]")
    os.replace(tmp, path)
