"""Tree-Retrieval with a trained cross-encoder against BM25 and against the reranker alone, question by question.

    python scripts/components/tree_retrieval_trained_reranker.py [--datasets hotpotqa 2wiki musique] [--limit N]
        [--rerankers trained] [--out file.json] [hydra overrides, e.g. method.search.reranker.model=<export> ...]
    python scripts/components/tree_retrieval_trained_reranker.py --dump-pairs pairs.json.gz   # then score them
    python scripts/components/tree_retrieval_trained_reranker.py --scores scores.json          # elsewhere (a GPU)

Issue 34's table: on the bundled dev samples (each over its questions' pooled paragraphs, as `eval.py` builds it
from `+experiment=tree_retrieval data=<ds> llm=scripted`), gold-passage recall@15 (micro, title match) of

- `bm25`: BM25 top-15 for the question;
- `tree:<r>`: Tree-Retrieval (`method.generate=false`: per kept node its phrase's BM25 top-k, merged over the
  subtree and reranked against the question by reranker `<r>`, a `conf/reranker` config; the root's 15);
- `pool:<r>`: the reranker alone: the question's own BM25 top-N reranked by `<r>` to 15, N being the number of
  distinct passages the tree's BM25 searches returned for that question (the tree's candidate budget; the pool
  does not depend on the reranker, which only orders it). It separates what the tree adds from what the
  reranker adds.

Each pair of rows is compared question by question: the mean difference of micro recall@15 (each question's
gold hits over the dataset's mean gold count), its 95% bootstrap interval and the sign-flip p-value
(`hoprag.stats.paired_test`), per dataset and over the three (the unweighted mean of the datasets' recalls; each
question weighted so that its dataset counts a third, resampled together). One reranker serves both rows of a
config, so with a score cache (`reranker=trained` has one) each (question, passage) pair is scored once: the
tree's pool and BM25's top N mostly overlap, and on a CPU the scoring is nearly all of the run. Models load before
any clock starts; ms/q is wall time on a shared machine, the pool row's counting only the pairs the tree left.

Scoring can happen elsewhere: the pairs a reranker can be asked for are known without it (the tree's pool and
BM25's top N do not depend on the reranker), so `--dump-pairs` writes every distinct (question, passage) pair of
the run, gzipped JSON `{"pairs": [[question, passage contents], ...]}`, and `--scores` reads `{"pairs": ...,
"scores": [...]}` back: the rerankers named then order by those scores and a pair without one is an error.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import instantiate

from hoprag.data.types import Passage, QAExample
from hoprag.metrics.retrieval import passage_hits
from hoprag.retrieval import Hit, Reranker
from hoprag.scripts import answer_timed, compose_config, offline_defaults
from hoprag.stats import paired_test

DATASETS = ("hotpotqa", "2wiki", "musique")
KEEP = 15
OUTPUT_DIR = "paths.output_dir=/tmp/tree_retrieval_trained_reranker"  # stands in for eval.py's run directory


class ScoredPairs(Reranker):
    """Orders by scores computed elsewhere for each (question, passage contents); a pair without one is an error."""

    def __init__(self, scores: dict[tuple[str, str], float]) -> None:
        self.scores = scores

    def _score(self, queries: list[str], pools: list[list[Hit]]) -> list[Sequence[float]]:
        missing = [
            (q, h.passage.id)
            for q, pool in zip(queries, pools)
            for h in pool
            if (q, h.passage.contents) not in self.scores
        ]
        if missing:
            raise KeyError(f"{len(missing)} pairs have no score, e.g. {missing[0]}: dump the pairs of this very run")
        return [[self.scores[q, h.passage.contents] for h in pool] for q, pool in zip(queries, pools)]


def read_scores(path: Path) -> dict[tuple[str, str], float]:
    record = json.loads(path.read_text())
    if len(record["pairs"]) != len(record["scores"]):
        raise ValueError(f"{path}: {len(record['pairs'])} pairs, {len(record['scores'])} scores")
    return {(q, p): float(s) for (q, p), s in zip(record["pairs"], record["scores"])}


def pairs_of(name: str, limit: int | None, overrides: Sequence[str]) -> list[tuple[str, str]]:
    """Every (question, passage contents) pair a reranker can be given here: the tree's pool and BM25's top N."""
    cfg = compose_config("eval", ["+experiment=tree_retrieval", f"data={name}", "llm=scripted", "method.generate=false",
                                  f"limit={'null' if limit is None else limit}", OUTPUT_DIR, *overrides,
                                  "reranker@method.search.reranker=none"])  # fmt: skip
    dataset = instantiate(cfg.data)
    examples, questions = dataset.examples, [ex.question for ex in dataset.examples]
    retriever = instantiate(cfg.retriever)(corpus=dataset.corpus())
    method, batch_size = instantiate(cfg.method)(llm=instantiate(cfg.llm), retriever=retriever), int(cfg.batch_size)
    _, costs, _ = answer_timed(method, examples, batch_size)
    sizes = [len(c.passage_ids) for c in costs]
    pairs = {(q, retriever.get(i).contents) for q, c in zip(questions, costs) for i in c.passage_ids}
    for q, hits in zip(questions, bm25_pools(retriever, questions, sizes, batch_size)):
        pairs.update((q, h.passage.contents) for h in hits)
    return sorted(pairs)


def hits_at(examples: Sequence[QAExample], retrieved: Sequence[Sequence[Passage]]) -> list[int]:
    """Each question's distinct gold titles among its first KEEP distinct passages."""
    found = []
    for ex, passages in zip(examples, retrieved):
        distinct = list({p.id: p for p in passages}.values())[:KEEP]
        found.append(passage_hits([p.title for p in distinct], ex.supporting_titles))
    return found


def bm25_pools(retriever: Any, questions: list[str], sizes: list[int], batch_size: int) -> list[list[Hit]]:
    """Per question its BM25 top-`sizes[q]` (at least KEEP), searched in batches (each to its largest size)."""
    pools: list[list[Hit]] = []
    for start in range(0, len(questions), batch_size):
        batch, n = questions[start : start + batch_size], sizes[start : start + batch_size]
        pools += [hits[: max(size, KEEP)] for hits, size in zip(retriever.search(batch, max(max(n), KEEP)), n)]
    return pools


def rerank_pool(
    retriever: Any, reranker: Any, questions: list[str], sizes: list[int], batch_size: int
) -> list[list[Passage]]:
    """Per question its `bm25_pools` pool reranked against it to KEEP, in batches."""
    pools = bm25_pools(retriever, questions, sizes, batch_size)
    results: list[list[Passage]] = []
    for start in range(0, len(questions), batch_size):
        ranked = reranker.rerank(questions[start : start + batch_size], pools[start : start + batch_size], KEEP)
        results += [[h.passage for h in hits] for hits in ranked]
    return results


def run_dataset(
    name: str, limit: int | None, rerankers: Sequence[str], overrides: Sequence[str], scored: ScoredPairs | None = None
) -> dict[str, Any]:
    """Per-question gold hits of every row, the pool sizes and each row's wall seconds, on one dev sample (with
    `scored`, every reranker orders by those scores)."""
    common = ["+experiment=tree_retrieval", f"data={name}", "llm=scripted", "method.generate=false",
              f"limit={'null' if limit is None else limit}", OUTPUT_DIR, *overrides]  # fmt: skip
    configs = {r: compose_config("eval", [*common, f"reranker@method.search.reranker={r}"]) for r in rerankers}
    cfg = configs[rerankers[0]]
    dataset = instantiate(cfg.data)
    examples, questions = dataset.examples, [ex.question for ex in dataset.examples]
    retriever, llm, batch_size = (
        instantiate(cfg.retriever)(corpus=dataset.corpus()),
        instantiate(cfg.llm),
        int(cfg.batch_size),
    )
    if int(cfg.method.search.keep) != KEEP:
        raise ValueError(f"the table is at {KEEP} passages; method.search.keep is {cfg.method.search.keep}")
    started = time.perf_counter()
    bm25 = [[h.passage for h in hits] for hits in retriever.search(questions, KEEP)]
    rows: dict[str, list[int]] = {"bm25": hits_at(examples, bm25)}
    seconds: dict[str, float] = {"bm25": time.perf_counter() - started}
    sizes: list[int] = []
    for r, r_cfg in configs.items():
        method = instantiate(r_cfg.method)(llm=llm, retriever=retriever)
        method.search.parser.parse(questions[:1])  # the parser and the reranker's weights load before the clocks
        if scored is not None:
            method.search.reranker = scored
        method.search.reranker.rerank(questions[:1], [retriever.search(questions[:1], 1)[0]], 1)
        outputs, costs, seconds[f"tree:{r}"] = answer_timed(method, examples, batch_size)
        rows[f"tree:{r}"] = hits_at(examples, [o.retrieved for o in outputs])
        sizes = [len(c.passage_ids) for c in costs]  # the same for every reranker: it orders, never adds
        started = time.perf_counter()
        reranked = rerank_pool(retriever, method.search.reranker, questions, sizes, batch_size)
        seconds[f"pool:{r}"] = time.perf_counter() - started
        rows[f"pool:{r}"] = hits_at(examples, reranked)
    gold = [len(set(ex.supporting_titles)) for ex in examples]
    return {"n": len(examples), "corpus": len(retriever.passages), "gold": gold, "pool_sizes": sizes, "hits": rows,
            "ms_per_question": {k: round(1000 * s / len(examples), 1) for k, s in seconds.items()}}  # fmt: skip


def recall(data: dict[str, Any], row: str) -> float:
    return 100.0 * sum(data["hits"][row]) / sum(data["gold"])


def scaled(data: dict[str, Any], row: str, weight: float = 1.0) -> list[float]:
    """Per-question hits on the micro-recall scale (× 100 / mean gold), times `weight`."""
    scale = 100.0 * len(data["gold"]) / sum(data["gold"]) * weight
    return [scale * h for h in data["hits"][row]]


def paired(per_dataset: dict[str, dict[str, Any]], rows: Sequence[str]) -> dict[str, dict[str, dict[str, float]]]:
    """`b − a` for each pair of rows (a listed first), per dataset and over all (`all`)."""
    total = sum(d["n"] for d in per_dataset.values())
    tests: dict[str, dict[str, dict[str, float]]] = {}
    for a, b in combinations(rows, 2):
        key = f"{b} - {a}"
        tests[key] = {}
        for name, d in per_dataset.items():
            tests[key][name] = vars(paired_test(scaled(d, a), scaled(d, b)))
        weights = {name: total / (len(per_dataset) * d["n"]) for name, d in per_dataset.items()}
        pooled_a = [x for name, d in per_dataset.items() for x in scaled(d, a, weights[name])]
        pooled_b = [x for name, d in per_dataset.items() for x in scaled(d, b, weights[name])]
        tests[key]["all"] = vars(paired_test(pooled_a, pooled_b))
    return tests


def format_report(result: dict[str, Any]) -> str:
    per_dataset, rows = result["datasets"], result["rows"]
    names = list(per_dataset)
    head = (
        f"{'recall@15':<22}"
        + "".join(f"{n + ' (' + str(d['n']) + ')':>16}" for n, d in per_dataset.items())
        + f"{'mean':>9}{'ms/q':>28}"
    )
    lines = [head]
    for row in rows:
        values = [recall(per_dataset[n], row) for n in names]
        times = " / ".join(f"{per_dataset[n]['ms_per_question'][row]:g}" for n in names)
        lines.append(f"{row:<22}" + "".join(f"{v:>16.1f}" for v in values) + f"{np.mean(values):>9.1f}{times:>28}")
    pools = " / ".join(f"{np.mean(per_dataset[n]['pool_sizes']):.1f}" for n in names)
    lines.append(f"pool N (mean per question, {' / '.join(names)}): {pools}")
    lines.append("paired difference of micro recall@15, mean [95% CI] p:")
    for key, tests in result["paired"].items():
        cells = [
            f"{where} {t['diff']:+.1f} [{t['ci_low']:+.1f}, {t['ci_high']:+.1f}] p={t['p']:.3f}"
            for where, t in tests.items()
        ]
        lines.append(f"  {key}: " + "; ".join(cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--limit", type=int, default=None, help="first N questions of each dataset (default all)")
    ap.add_argument("--rerankers", nargs="+", default=["trained"], help="conf/reranker configs (trained, minilm, ...)")
    ap.add_argument("--out", type=Path, default=None, help="write the per-question hits and the tests as JSON")
    ap.add_argument("--dump-pairs", type=Path, default=None, help="write every pair to score (gzipped JSON) and stop")
    ap.add_argument("--scores", type=Path, default=None, help="order by these scores of the pairs (JSON)")
    args, overrides = ap.parse_known_args(argv)
    offline_defaults()
    started = time.perf_counter()
    if args.dump_pairs:
        pairs = [pair for name in args.datasets for pair in pairs_of(name, args.limit, overrides)]
        with gzip.open(args.dump_pairs, "wt", encoding="utf-8") as out:
            json.dump({"pairs": pairs}, out)
        print(f"{len(pairs)} pairs written to {args.dump_pairs}")
        return
    scored = ScoredPairs(read_scores(args.scores)) if args.scores else None
    per_dataset = {name: run_dataset(name, args.limit, args.rerankers, overrides, scored) for name in args.datasets}
    rows = ["bm25", *(f"{kind}:{r}" for r in args.rerankers for kind in ("pool", "tree"))]
    result = {"settings": {"limit": args.limit, "rerankers": args.rerankers, "overrides": list(overrides),
                           "scores": str(args.scores) if args.scores else None},
              "rows": rows, "datasets": per_dataset, "paired": paired(per_dataset, rows)}  # fmt: skip
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(format_report(result))
    print(f"total {result['seconds']} s")
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
