"""Latency of TreeHop@K with 2 and 3 hops against direct top-K over the same flat index, as ratios.

    python scripts/bench/bench_treehop.py [--passages 50000] [--ckpt <train run>/export] [--threads 1]

The questions are the bundled 2Wiki dev sample's, encoded by the MiniLM embedder; the index holds `--passages`
random unit vectors of the embedder's width (an exact flat search costs the same whatever the vectors say).
"Retrieval" times the search loop alone on pre-encoded questions (every live branch of every question in
one FAISS search per hop, plus the TreeHop updates); "end to end" adds encoding the questions. Each figure is
the best of `--repeats` runs, in seconds per question (the paper, on an A100: 0.022 s vs 0.002 s, 11x).
"""

from __future__ import annotations

import argparse
import time

import faiss
import numpy as np
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hoprag.data.loading import load_questions
from hoprag.paths import PROJECT_ROOT, data_root
from hoprag.treehop import TreeHop, load_treehop, tree_search
from hoprag.treehop.retriever import model_step


def best_of(repeats: int, run) -> float:  # noqa: ANN001
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=50_000)
    parser.add_argument("--ckpt", default=None, help="a trained TreeHop (default: untrained, same widths)")
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)

    embedder = instantiate(OmegaConf.load(PROJECT_ROOT / "conf" / "embedder" / "minilm.yaml"))
    questions = [ex.question for ex in load_questions(data_root() / "2wikimultihopqa" / "dev_159.json", "2wikimultihopqa")]
    encoded = embedder.encode_queries(questions)  # loads the model outside the timings
    dim = encoded.shape[1]
    vectors = np.random.default_rng(0).normal(size=(args.passages, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = faiss.IndexFlatIP(dim)
    index.add(vectors)
    model = load_treehop(args.ckpt)[0] if args.ckpt else TreeHop(dim).eval()
    step = model_step(model)

    def search(queries, owners, k):  # noqa: ANN001, ANN202
        return index.search(np.ascontiguousarray(queries, dtype=np.float32), k)

    def run(n_hops: int, end_to_end: bool) -> float:
        def once() -> None:
            q = embedder.encode_queries(questions) if end_to_end else encoded
            tree_search(q, vectors, search, step if n_hops > 1 else None, args.top_k, n_hops)

        return best_of(args.repeats, once) / len(questions)

    print(f"{len(questions)} questions, flat index of {args.passages:,} x {dim}, K = {args.top_k}, "
          f"{args.threads} thread(s), {'trained' if args.ckpt else 'untrained'} TreeHop")  # fmt: skip
    print(f"{'stage':<12}{'direct s/q':>12}{'2 hops s/q':>12}{'ratio':>8}{'3 hops s/q':>12}{'ratio':>8}")
    for name, e2e in (("retrieval", False), ("end to end", True)):
        direct, two, three = (run(h, e2e) for h in (1, 2, 3))
        print(f"{name:<12}{direct:>12.5f}{two:>12.5f}{two / direct:>7.1f}x{three:>12.5f}{three / direct:>7.1f}x")


if __name__ == "__main__":
    main()
