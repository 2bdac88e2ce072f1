"""Tree-Retrieval's retrieval-only effect (spec/treerare.md §2.7, Table 2): what the parse tree adds to BM25
and what the reranker adds, on the bundled dev samples, with no LLM.

    python scripts/components/compare_tree_retrieval.py [--datasets hotpotqa 2wiki musique] [--limit N]
        [--reranker minilm|none|cross_encoder] [--tree dt|ct] [--out file.json] [hydra overrides ...]

Each dataset is composed from the real eval config (`+experiment=tree_retrieval data=<ds> llm=scripted`), so
the corpus is the one `eval.py` pools from the questions' own paragraphs and the method is the configured
one. Four retrievers, each returning at most 15 passages a question:

- `bm25`: BM25 top-15 for the question;
- `tree`: Tree-Retrieval (per kept node its phrase's BM25 top-k, merged over the subtree, reranked against
  the question; the root's 15) with `--reranker`;
- `tree_no_rerank`: the same tree with `reranker@method.search.reranker=none` (merged candidates in BM25 score order);
- `bm25_rerank`: BM25 top-N for the question reranked by the same reranker to 15, N being the number of
  distinct passages the tree's BM25 searches returned for that question: the reranker without the tree, at
  the tree's candidate budget (reranking BM25's own top-15 to 15 could not change any recall@15).

Metrics come from `MetricSuite(ks=[15])` over `EvalRow`s, as the runner computes them: gold-passage recall@15
(micro, title match), answer recall@15, the share of questions with every gold passage retrieved, passages
per question, and wall milliseconds per question (models loaded beforehand; the BM25 index is built once and
not counted). Also reported per dataset: the tree's candidate pool (its size and its gold recall, the
ceiling for any reranking of it), recall@15 per question type, and the gold passages the tree gains and
loses against BM25, with how many of the gained ones the root phrase's own BM25 search missed (found only
through a sub-phrase).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.utils import instantiate

from hoprag.data.types import Passage, QAExample
from hoprag.metrics import EvalRow, MetricSuite
from hoprag.retrieval.retrievers import Hit
from hoprag.scripts import answer_timed, compose_config, offline_defaults

DATASETS = ("hotpotqa", "2wiki", "musique")
RETRIEVERS = ("bm25", "tree", "tree_no_rerank", "bm25_rerank")
# column label → MetricSuite key (`seconds` is this script's own)
METRICS = {
    "R@15": "retrieval/passage_recall@15",
    "AR@15": "retrieval/answer_recall@15",
    "all": "retrieval/all_gold_retrieved",
    "psg": "retrieval/passages_read",
    "ms/q": "seconds",
}
OUTPUT_DIR = "paths.output_dir=/tmp/compare_tree_retrieval"  # stands in for the run directory Hydra gives eval.py


def labels(reranker: str, tree: str) -> dict[str, str]:
    return {
        "bm25": "BM25 top-15",
        "tree": f"Tree-Retrieval ({tree.upper()}) + {reranker}",
        "tree_no_rerank": f"Tree-Retrieval ({tree.upper()}), no rerank",
        "bm25_rerank": f"BM25 top-N + {reranker} (N = tree pool)",
    }


def in_batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def question_type(example: QAExample) -> str:
    """The dataset's question type; MuSiQue's `3hop1` / `3hop2` variants count as one `3hop`."""
    return re.sub(r"^(\d+hop)\d*$", r"\1", example.type or "untyped")


def run_bm25(retriever: Any, questions: Sequence[str], k: int, batch_size: int) -> tuple[list[list[Hit]], float]:
    started = time.perf_counter()
    hits = [h for batch in in_batches(questions, batch_size) for h in retriever.search(list(batch), k)]
    return hits, time.perf_counter() - started


def run_bm25_rerank(
    retriever: Any, reranker: Any, questions: Sequence[str], pools: Sequence[int], keep: int, batch_size: int
) -> tuple[list[list[Hit]], float]:
    """Per question BM25 top-`pools[q]` reranked against the question to `keep`, in batches."""
    started = time.perf_counter()
    results: list[list[Hit]] = []
    for start in range(0, len(questions), batch_size):
        batch, sizes = list(questions[start : start + batch_size]), pools[start : start + batch_size]
        hits = retriever.search(batch, max(max(sizes), keep))
        results += reranker.rerank(batch, [h[: max(n, keep)] for h, n in zip(hits, sizes)], keep)
    return results, time.perf_counter() - started


def scores(suite: MetricSuite, examples: Sequence[QAExample], retrieved: Sequence[Sequence[Passage]]) -> dict:
    return suite([EvalRow.from_example(ex, "", passages) for ex, passages in zip(examples, retrieved)])


def gold_movement(
    examples: Sequence[QAExample],
    bm25: Sequence[Sequence[Passage]],
    tree: Sequence[Sequence[Passage]],
    root_hits: Sequence[Sequence[Hit]],
    outputs: Sequence[Any],
) -> dict[str, Any]:
    """Gold titles the tree retrieves that BM25 top-15 does not (and the reverse); of the gained ones, those
    absent from the root phrase's own BM25 hits, i.e. brought up by a sub-phrase, with a few examples naming
    the lowest node (first in post-order) whose kept list holds the title."""
    gained = lost = by_subphrase = 0
    examples_out = []
    for ex, b, t, root, out in zip(examples, bm25, tree, root_hits, outputs):
        gold = set(ex.supporting_titles)
        b_titles, t_titles, root_titles = {p.title for p in b}, {p.title for p in t}, {h.passage.title for h in root}
        lost += len((gold & b_titles) - t_titles)
        for title in sorted((gold & t_titles) - b_titles):
            gained += 1
            if title in root_titles:
                continue
            by_subphrase += 1
            nodes = out.trace["tree"]["nodes"]
            node = next((n for n in nodes if title in {p["title"] for p in n["passages"]}), None)
            if node is not None and len(examples_out) < 3:
                examples_out.append({"question": ex.question, "type": ex.type, "gold": title,
                                     "phrase": node["phrase"], "label": node["label"]})  # fmt: skip
    return {"gained": gained, "lost": lost, "gained_by_subphrase": by_subphrase, "examples": examples_out}


def compare_dataset(name: str, limit: int | None, reranker: str, tree: str, overrides: Sequence[str]) -> dict:
    common = ["+experiment=tree_retrieval", f"data={name}", "llm=scripted", f"method.tree={tree}",
              f"limit={'null' if limit is None else limit}", *overrides]  # fmt: skip
    cfg = compose_config("eval", [*common, f"reranker@method.search.reranker={reranker}", OUTPUT_DIR])
    plain = compose_config("eval", [*common, "reranker@method.search.reranker=none", OUTPUT_DIR])
    dataset = instantiate(cfg.data)
    examples, questions = dataset.examples, [ex.question for ex in dataset.examples]
    retriever = instantiate(cfg.retriever)(corpus=dataset.corpus())
    llm = instantiate(cfg.llm)
    keep, k, batch_size = int(cfg.method.search.keep), int(cfg.method.search.k), int(cfg.batch_size)
    if keep != 15:
        raise ValueError(f"the table is at 15 passages; method.search.keep is {keep}")
    tree_method = instantiate(cfg.method)(llm=llm, retriever=retriever)
    plain_method = instantiate(plain.method)(llm=llm, retriever=retriever)
    # load the parser and the reranker's weights before any clock starts (a throwaway reranker: the timed ones
    # start with empty vector caches)
    tree_method.search.parser.parse(questions[:1])
    instantiate(cfg.method.search.reranker).rerank(questions[:1], [retriever.search(questions[:1], 1)[0]], 1)

    suite = MetricSuite(ks=[keep])
    bm25_hits, bm25_seconds = run_bm25(retriever, questions, keep, batch_size)
    tree_out, tree_costs, tree_seconds = answer_timed(tree_method, examples, batch_size)
    plain_out, _, plain_seconds = answer_timed(plain_method, examples, batch_size)
    pool_sizes = [len(c.passage_ids) for c in tree_costs]
    same_reranker = instantiate(cfg.method.search.reranker)
    rerank_hits, rerank_seconds = run_bm25_rerank(retriever, same_reranker, questions, pool_sizes, keep, batch_size)
    retrieved = {
        "bm25": [[h.passage for h in hits] for hits in bm25_hits],
        "tree": [o.retrieved for o in tree_out],
        "tree_no_rerank": [o.retrieved for o in plain_out],
        "bm25_rerank": [[h.passage for h in hits] for hits in rerank_hits],
    }
    seconds = {"bm25": bm25_seconds, "tree": tree_seconds, "tree_no_rerank": plain_seconds,
               "bm25_rerank": rerank_seconds}  # fmt: skip
    rows = {}
    for key in RETRIEVERS:
        metrics = scores(suite, examples, retrieved[key])
        rows[key] = {label: metrics.get(m) for label, m in METRICS.items() if m != "seconds"}
        rows[key]["ms/q"] = round(1000 * seconds[key] / len(examples), 2)

    by_type: dict[str, list[int]] = defaultdict(list)
    for i, ex in enumerate(examples):
        by_type[question_type(ex)].append(i)
    types: dict[str, dict[str, Any]] = {}
    for kind, idx in sorted(by_type.items()):
        subset = [examples[i] for i in idx]
        types[kind] = {"n": len(idx)}
        for key in RETRIEVERS:
            types[kind][key] = scores(suite, subset, [retrieved[key][i] for i in idx]).get(METRICS["R@15"])
    pool = scores(suite, examples, [[retriever.get(i) for i in sorted(c.passage_ids)] for c in tree_costs])
    root_phrases = [o.trace["tree"]["nodes"][-1]["phrase"] if o.trace["tree"]["nodes"] else q
                    for o, q in zip(tree_out, questions)]  # fmt: skip
    root_hits = [h for batch in in_batches(root_phrases, batch_size) for h in retriever.search(list(batch), k)]
    return {
        "n": len(examples),
        "corpus": len(retriever.passages),
        "rows": rows,
        "tree": {
            "processed_nodes": round(sum(o.stats["processed_nodes"] for o in tree_out) / len(examples), 2),
            "bm25_queries": round(sum(c.retrieval_calls for c in tree_costs) / len(examples), 2),
            "traversal_fallbacks": int(sum(o.stats["traversal_fallback"] for o in tree_out)),
            "pool_size": round(sum(pool_sizes) / len(examples), 1),
            "pool_passage_recall": pool.get("retrieval/passage_recall"),
            "pool_all_gold": pool.get("retrieval/all_gold_retrieved"),
        },
        "by_type": types,
        "gold_vs_bm25": gold_movement(examples, retrieved["bm25"], retrieved["tree"], root_hits, tree_out),
    }


def compare(
    datasets: Sequence[str] = DATASETS,
    limit: int | None = None,
    reranker: str = "minilm",
    tree: str = "dt",
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    """Every dataset's rows, extras and the unweighted mean of each row's metrics over the datasets."""
    per_dataset = {name: compare_dataset(name, limit, reranker, tree, overrides) for name in datasets}
    mean = {
        key: {label: round(sum(d["rows"][key][label] for d in per_dataset.values()) / len(per_dataset), 2)
              for label in METRICS}
        for key in RETRIEVERS
    }  # fmt: skip
    return {"settings": {"reranker": reranker, "tree": tree, "limit": limit, "overrides": list(overrides)},
            "labels": labels(reranker, tree), "datasets": per_dataset, "mean": mean}  # fmt: skip


def format_table(result: dict[str, Any]) -> str:
    """One row per retriever; per dataset (then the mean over datasets) one column per metric."""
    blocks = [(f"{name} ({d['n']})", d["rows"]) for name, d in result["datasets"].items()]
    blocks.append(("mean", result["mean"]))
    width = [max(len(m), *(len(fmt(rows[key][m])) for _, rows in blocks for key in RETRIEVERS)) + 1 for m in METRICS]
    block_width = sum(width) + 2
    name_width = max(len(label) for label in result["labels"].values()) + 2
    lines = [" " * name_width + "".join(f"{title:<{block_width}}" for title, _ in blocks).rstrip()]
    metric_heads = "".join(f"{m:>{w}}" for m, w in zip(METRICS, width)) + "  "
    lines.append((f"{'retriever':<{name_width}}" + metric_heads * len(blocks)).rstrip())
    for key in RETRIEVERS:
        cells = ""
        for _, rows in blocks:
            values = rows[key]
            cells += "".join(f"{fmt(values[m]):>{w}}" for m, w in zip(METRICS, width)) + "  "
        lines.append(f"{result['labels'][key]:<{name_width}}{cells.rstrip()}")
    return "\n".join(lines)


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f}"


def format_details(result: dict[str, Any]) -> str:
    """Per dataset: the tree's figures and pool, recall@15 per question type, and the gold passages moved."""
    short = {"bm25": "BM25", "tree": "tree", "tree_no_rerank": "tree-nr", "bm25_rerank": "BM25-N+rr"}
    lines = []
    for name, d in result["datasets"].items():
        t, g = d["tree"], d["gold_vs_bm25"]
        lines.append(f"{name}: {d['n']} questions, corpus {d['corpus']} passages; tree: {t['processed_nodes']} "
                     f"nodes and {t['bm25_queries']} BM25 queries a question, {t['traversal_fallbacks']} "
                     f"fallbacks; pool {t['pool_size']} passages, gold recall {t['pool_passage_recall']}, "
                     f"all gold {t['pool_all_gold']}")  # fmt: skip
        lines.append(f"  gold passages vs BM25 top-15: +{g['gained']} gained ({g['gained_by_subphrase']} only "
                     f"through a sub-phrase), -{g['lost']} lost")  # fmt: skip
        for ex in g["examples"]:
            lines.append(f"    e.g. {ex['question']!r} ({ex['type']}): {ex['gold']!r} via "
                         f"[{ex['label']}] {ex['phrase']!r}")  # fmt: skip
        lines.append("  R@15 by type: " + "; ".join(
            f"{kind} ({v['n']}): " + " / ".join(f"{short[k]} {v[k]}" for k in RETRIEVERS)
            for kind, v in d["by_type"].items()))  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", nargs="+", default=list(DATASETS))
    ap.add_argument("--limit", type=int, default=None, help="first N questions of each dataset (default all)")
    ap.add_argument("--reranker", default="minilm", help="a conf/reranker config (minilm, none, cross_encoder)")
    ap.add_argument("--tree", default="dt", choices=("dt", "ct"))
    ap.add_argument("--out", type=Path, default=None, help="write the whole result as JSON")
    args, overrides = ap.parse_known_args(argv)
    offline_defaults()
    started = time.perf_counter()
    result = compare(args.datasets, args.limit, args.reranker, args.tree, overrides)
    result["seconds"] = round(time.perf_counter() - started, 1)
    print(format_table(result))
    print("R@15: gold-passage recall@15 (micro, title match); AR@15: answer recall@15; all: questions with every "
          "gold passage retrieved (%); psg: passages a question; ms/q: wall milliseconds a question (a shared machine: "
          "approximate); mean: unweighted over datasets")  # fmt: skip
    print(format_details(result))
    print(f"total {result['seconds']} s")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
