"""Reranker throughput: the trained cross-encoder against the MiniLM bi-encoder, measured side by side in one run.

    python scripts/bench/bench_reranker.py [--model <export>] [--questions 16] [--pool 20] [--repeats 3]
        [--max-length 128] [--batch-size 64] [--threads N] [--out bench.json]

What is measured: the first --questions questions of the bundled HotpotQA dev sample, each with its BM25 top
--pool over the questions' pooled paragraphs (real candidate lists, as Tree-Retrieval and `retriever.rerank`
hand a reranker), reranked in one batched `rerank()` call by

1. `reranker=trained`: the cross-encoder export of `python train.py +model=reranker` (`--model`, default the
   published one) in `CrossEncoderReranker`, without its score cache, so every pair goes through the network; and
2. `reranker=minilm`: the bi-encoder `EmbeddingReranker` with the bundled all-MiniLM-L6-v2, a fresh one per
   repeat, so its vector cache starts empty and each distinct query and passage is encoded once.

Both are built from their `conf/reranker/` configs, on the CPU.

Both models are loaded and warmed up before any clock starts; the repeats alternate the two, so a machine shared
with other jobs slows both alike. Reported per reranker: the median wall seconds of a repeat and pairs/s (pairs =
the (question, candidate) pairs scored), the ratio bi-encoder/cross-encoder, and the load average, which on a
shared machine says how far to trust the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import torch
from hydra.utils import instantiate

from hoprag.paths import cache_root
from hoprag.retrieval import Hit, Reranker
from hoprag.scripts import compose_config, hotpotqa_dev, offline_defaults, pooled_bm25


def reranker(name: str, *overrides: str) -> Reranker:
    """`conf/reranker/<name>.yaml` as the eval configs compose it, with `overrides` of its own keys."""
    return instantiate(compose_config("eval", [f"+reranker={name}", *(f"reranker.{o}" for o in overrides)]).reranker)


def bi_encoder() -> Reranker:
    """The `reranker=minilm` bi-encoder on the CPU (its weights are shared per process, its vector cache is not)."""
    return reranker("minilm", "embedder.device=cpu")


def timed(reranker: Reranker, questions: list[str], pools: list[list[Hit]]) -> float:
    started = time.perf_counter()
    reranker.rerank(questions, pools, k=None)
    return time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=str(cache_root() / "rerankers" / "minilm-ce"), help="the cross-encoder export")
    ap.add_argument("--questions", type=int, default=16)
    ap.add_argument("--pool", type=int, default=20, help="BM25 candidates per question")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-length", type=int, default=128, help="the cross-encoder's tokens per pair (as trained)")
    ap.add_argument("--batch-size", type=int, default=64, help="the cross-encoder's pairs per forward pass")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = ap.parse_args()
    offline_defaults()
    if args.threads:
        torch.set_num_threads(args.threads)
    if not Path(args.model).is_dir():
        raise SystemExit(
            f"{args.model} is not a folder: train one with `python train.py +model=reranker`, or pass --model"
        )

    examples = hotpotqa_dev(args.questions).examples
    questions = [ex.question for ex in examples]
    pools = pooled_bm25(examples).search(questions, args.pool)
    pairs = sum(len(pool) for pool in pools)
    cross = reranker("trained", f"model={args.model}", "device=cpu", "cache_size=0", f"max_length={args.max_length}",
                     f"batch_size={args.batch_size}")  # fmt: skip
    for warm in (cross, bi_encoder()):  # weights loaded, first calls paid, before any clock
        warm.rerank(questions[:1], pools[:1], k=None)

    seconds: dict[str, list[float]] = {"cross-encoder": [], "bi-encoder": []}
    load_before = os.getloadavg()[0]
    for _ in range(args.repeats):
        seconds["cross-encoder"].append(timed(cross, questions, pools))
        seconds["bi-encoder"].append(timed(bi_encoder(), questions, pools))
    load_after = os.getloadavg()[0]

    results = {}
    print(f"{len(questions)} questions x BM25 top-{args.pool} = {pairs} pairs, {args.repeats} repeats, "
          f"torch threads {torch.get_num_threads()}, load average {load_before:.1f} -> {load_after:.1f} "
          f"on {os.cpu_count()} CPUs")  # fmt: skip
    for name, runs in seconds.items():
        median = statistics.median(runs)
        results[name] = {"seconds": median, "pairs_per_second": pairs / median, "runs": runs}
        print(f"{name:<14} {median:8.2f} s   {pairs / median:8.1f} pairs/s")
    ratio = results["bi-encoder"]["pairs_per_second"] / results["cross-encoder"]["pairs_per_second"]
    print(f"ratio bi-encoder / cross-encoder pairs/s: {ratio:.2f}x")
    if args.out:
        settings = {k: v for k, v in vars(args).items() if k != "out"}
        record = {"settings": settings, "pairs": pairs, "load_average": [load_before, load_after], "results": results}
        args.out.write_text(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
