"""Print the Table 2-style TreeHop table from an `eval.py +method=treehop` run directory's metrics.json.

    python eval.py +method=treehop data=2wiki method.ckpt=<train run>/export ~logger hydra.run.dir=<dir>
    python scripts/eval_treehop.py <dir>

Micro recall (the paper's headline) = mean gold titles found / mean gold titles over the table's questions;
macro = mean per-question recall; K = mean distinct passages read; seconds per question (encoding included).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path


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
            macro = 100 * metrics[f"{base}/recall"]
            cell = f"{micro:.1f} / {macro:.1f} / {metrics[f'{base}/k']:.1f} / {metrics[f'{base}/seconds']:.4f}"
            cells.append(f"{cell:>30}")
        lines.append(f"{v:<14}" + "".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args()
    report = json.loads((args.run_dir / "metrics.json").read_text())
    print(f"{report['run'].get('dataset', '?')}: {report['run']['n']} questions")
    print(table(report["metrics"]))


if __name__ == "__main__":
    main()
