"""Print the Table 2-style TreeHop table from an `eval.py +method=treehop` run directory's metrics.json.

    python eval.py +method=treehop data=2wiki method.search.ckpt=<train run>/export ~logger hydra.run.dir=<dir>
    python scripts/runs/eval_treehop.py <dir>

Micro recall (the paper's headline) = mean gold titles found / mean gold titles over the table's questions;
macro = mean per-question recall; K = mean distinct passages read; seconds per question (encoding included).

Below the table, each variant's hops are compared with `--versus` (default direct@10) question by question
(predictions.jsonl): the micro-recall difference, its 95% bootstrap interval and the sign-flip p-value, so
"how close" a retriever is to another is a measured interval rather than a difference of two means.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from hoprag.stats import paired_test


def table(metrics: dict[str, float]) -> str:
    gold = metrics["method/gold"]
    keys = [k for k in metrics if re.fullmatch(r"method/.+/hop\d+/hits", k)]
    order = ("direct", "q-c", "untrained", "treehop")
    variants = sorted(
        dict.fromkeys(k.split("/")[1] for k in keys),
        key=lambda v: (order.index(v.split("@")[0]) if v.split("@")[0] in order else len(order), int(v.split("@")[1])),
    )
    hops = max(int(re.search(r"hop(\d+)", k).group(1)) for k in keys)
    header = f"{'retriever':<14}" + "".join(f"{f'hop{h} R / Rmacro / K / s':>30}" for h in range(1, hops + 1))
    lines = [header, "-" * len(header)]
    for v in variants:
        cells = []
        for h in range(1, hops + 1):
            base = f"method/{v}/hop{h}"
            if f"{base}/hits" not in metrics:
                cells.append(f"{'':>30}")
                continue
            micro = 100 * metrics[f"{base}/hits"] / gold
            macro = metrics[f"{base}/recall"]  # a percentage, as every rate hoprag reports
            cell = f"{micro:.1f} / {macro:.1f} / {metrics[f'{base}/k']:.1f} / {metrics[f'{base}/seconds']:.4f}"
            cells.append(f"{cell:>30}")
        lines.append(f"{v:<14}" + "".join(cells))
    return "\n".join(lines)


def paired(records: list[dict[str, float]], versus: str) -> str:
    """Each `variant/hopN` against `versus` (`variant@k/hopN`, hop 1 if no hop is named) over the same
    questions: hits per question over the mean gold count, so the mean difference is a micro-recall difference."""
    ref = versus if "/hop" in versus else f"{versus}/hop1"
    if not records or f"{ref}/hits" not in records[0]:
        return f"no per-question {ref} hits in predictions.jsonl"
    scale = 100 / (sum(r["gold"] for r in records) / len(records))
    base = [scale * r[f"{ref}/hits"] for r in records]
    lines = [f"paired over {len(records)} questions, micro recall minus {ref}: diff [95% CI] p  wins/losses"]
    for key in (k[: -len("/hits")] for k in records[0] if k.endswith("/hits") and k != f"{ref}/hits"):
        other = [scale * r[f"{key}/hits"] for r in records]
        test = paired_test(base, other)
        wins = sum(o > b for o, b in zip(other, base))
        losses = sum(o < b for o, b in zip(other, base))
        lines.append(
            f"{key:<22}{test.diff:+6.1f} [{test.ci_low:+.1f}, {test.ci_high:+.1f}]  p {test.p:.2f}  {wins}/{losses}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--versus", default="direct@10", help="the reference variant[/hopN] of the paired comparison")
    args = parser.parse_args()
    report = json.loads((args.run_dir / "metrics.json").read_text())
    print(f"{report['run'].get('dataset', '?')}: {report['run']['n']} questions")
    print(table(report["metrics"]))
    predictions = args.run_dir / "predictions.jsonl"
    if predictions.exists():
        lines = (json.loads(line) for line in predictions.read_text().splitlines() if line.strip())
        print()
        print(paired([r["stats"] for r in lines if r.get("stats", {}).get("gold")], args.versus))


if __name__ == "__main__":
    main()
