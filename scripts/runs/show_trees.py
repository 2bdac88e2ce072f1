"""Print the PruneRAG trees of an `eval.py +method=prunerag` run readably.

    python scripts/runs/show_trees.py <run_dir> [-n 3] [--outputs] [--trees-only]

For each question: the question, gold and predicted answers, the tree (node kind and depth, status,
accepted answer and confidence, retrieved titles; `--outputs` adds the raw decision outputs) and its
figures; then the run's PruneRAG metrics (EM/F1, EFR, all-gold-retrieved, RN, decision calls, parse errors,
free-text fallbacks, repaired JSON, share of trees grown past the root).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hoprag.evaluation.predictions import metrics_summary, run_records
from hoprag.search.prunerag import format_tree

SUMMARY = (
    "n", "em", "f1", "efr", "forget_rate", "retrieval/all_gold_retrieved", "retrieval/passage_recall_macro",
    "parse_failures", "cost/mean/retrieval_calls", "cost/mean/llm_calls", "method/decision_calls",
    "method/decision_parse_errors", "method/decision_fallbacks", "method/decision_repairs", "method/expanded",
    "method/tree_nodes", "method/tree_depth", "method/llm_seconds",
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("-n", type=int, default=3, help="questions to show (0: all)")
    parser.add_argument("--outputs", action="store_true", help="also print the raw decision outputs")
    parser.add_argument("--trees-only", action="store_true", help="no run metrics at the end (eval.py printed them)")
    args = parser.parse_args()
    try:
        records = [r for r in run_records(args.run_dir) if "tree" in r.get("trace", {})]
    except FileNotFoundError as e:
        raise SystemExit(str(e)) from None
    if not records:
        raise SystemExit(f"{args.run_dir} holds no PruneRAG trees (was the method +method=prunerag?)")
    for i, r in enumerate(records[: args.n or None]):
        em = r["scores"]["em"]
        separator = "\n" if i else ""
        print(
            f"{separator}Q: {r['question']}\n   gold: {r['golds'][:3]}   predicted: {r['prediction']!r}   EM={em:.0f}"
        )
        print(format_tree(r["trace"]["tree"], outputs=args.outputs))
        stats = ", ".join(f"{k}={v:g}" for k, v in r.get("stats", {}).items())
        print(f"   {stats}")
    if not args.trees_only:
        print("\n" + metrics_summary(args.run_dir, SUMMARY))


if __name__ == "__main__":
    main()
