"""Print the TreeRare trees of an `eval.py +method=treerare` (or `+method=tree_retrieval`) run readably.

    python scripts/runs/show_treerare.py <run_dir> [-n 1] [--outputs] [--trees-only]

For each question: the question, gold and predicted answers with their cover-EM and EM, the gold titles
found among the retrieved passages, then the tree from the root down (each node's label and height,
phrase, queries, passage titles, evidence and fallbacks; `--outputs` adds the whole evidence and the raw
QG / SAG replies) and the question's figures; at the end the run's TreeRare metrics from metrics.json.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from hoprag.evaluation.predictions import metrics_summary, run_records
from hoprag.search.treerare.show import format_tree

SUMMARY = (
    "n", "em", "f1", "acc", "cover_em", "retrieval/passage_recall@15", "retrieval/answer_recall@15",
    "retrieval/all_gold_retrieved", "retrieval/passages_read", "parse_failures", "cost/mean/llm_calls",
    "cost/mean/retrieval_calls", "cost/mean/prompt_tokens", "cost/mean/truncated_prompts",
    "cost/mean/seconds/total", "method/tree_nodes", "method/processed_nodes", "method/tree_height",
    "method/queries", "method/qg_fallbacks", "method/sag_fallbacks", "method/traversal_fallback",
    "method/multi_sentence",
)  # fmt: skip


def is_treerare(record: dict) -> bool:
    """TreeRare's trace tree (a node list), not PruneRAG's (a nested root node)."""
    return "nodes" in record.get("trace", {}).get("tree", {})


def header(record: dict) -> str:
    scores = record.get("scores", {})
    shown = "   ".join(f"{name}={scores[key]:.0f}" for key, name in (("cover_em", "cover-EM"), ("em", "EM"))
                       if key in scores)  # fmt: skip
    retrieved = {p["title"] for p in record.get("retrieved", [])}
    found = [t for t in record.get("gold_titles", []) if t in retrieved]
    # Tree-Retrieval without generate=true answers nothing: its empty predictions' scores mean nothing
    answered = f"predicted: {record['prediction']!r}   {shown}" if "output" in record["trace"] else "(retrieval only)"
    lines = [f"Q: {record['question']}", f"   gold: {record['golds'][:3]}   {answered}".rstrip()]
    if record.get("gold_titles"):
        lines.append(f"   gold titles retrieved: {len(found)} of {len(record['gold_titles'])} "
                     f"({len(record.get('retrieved', []))} passages read): {record['gold_titles']}")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("-n", type=int, default=1, help="questions to show (0: all)")
    parser.add_argument("--outputs", action="store_true", help="whole evidence and the raw QG / SAG replies")
    parser.add_argument("--brief", action="store_true", help="each node's phrase and queries: no passages, no evidence")
    parser.add_argument("--trees-only", action="store_true", help="no run metrics at the end (eval.py printed them)")
    args = parser.parse_args(argv)
    try:
        records = [r for r in run_records(args.run_dir) if is_treerare(r)]
    except FileNotFoundError as e:
        raise SystemExit(str(e)) from None
    if not records:
        raise SystemExit(f"{args.run_dir} holds no TreeRare trees (was the method +method=treerare or tree_retrieval?)")
    for i, r in enumerate(records[: args.n or None]):
        print(("\n" if i else "") + header(r))
        print(format_tree(r["trace"]["tree"], outputs=args.outputs, brief=args.brief))
        if args.outputs and r["trace"].get("output"):
            print(f"   final output: {' '.join(r['trace']['output'].split())}")
        stats = ", ".join(f"{k}={v:g}" for k, v in r.get("stats", {}).items())
        print(f"   {stats}")
    if not args.trees_only:
        print("\n" + metrics_summary(args.run_dir, SUMMARY))


if __name__ == "__main__":
    main()
