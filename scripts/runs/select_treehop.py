"""Compare TreeHop designs over several validation splits of the training trees, never the evaluation set.

One split's 48 held-back trees are too few to separate designs a point apart (one gold title ≈ 0.8 points), so
each design is trained once per split seed and judged by its mean gain over `q − c` on the same trees:

    python train.py -m +model=treehop,treehop_small_data model.datamodule.seed=1,2,3,4,5 \\
        ~logger.wandb export=false hydra.sweep.dir=<dir>
    python scripts/runs/select_treehop.py <dir>

Runs are grouped by their overrides without `model.datamodule.seed`; per design: splits, the gain at each run's
best epoch (what checkpoint selection keeps) and averaged over its epochs (how stable it is), K at hop 2, and at
the best epoch the recall itself and its margin over direct top-10 on the same trees (logs from before
`val/direct_recall@10` existed show nan).
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections import defaultdict
from pathlib import Path

import yaml

SPLIT = "model.datamodule.seed="


def run_gains(run: Path, hop: int) -> tuple[float, float, float, float, float] | None:
    """(gain at the best epoch, mean gain over epochs, K, recall and recall − direct top-10 at the best epoch)
    of one run, from its CSV log."""
    logs = sorted(run.glob("csv/*/metrics.csv"))
    if not logs:
        return None
    rows = [r for r in csv.DictReader(logs[-1].open()) if r.get(f"val/recall@5_hop{hop}")]
    epochs = [r for r in rows if r.get("epoch")]  # the step-0 row of the untrained model has no epoch
    if not epochs:
        return None
    gains = [float(r[f"val/recall@5_hop{hop}"]) - float(r[f"val/qc_recall@5_hop{hop}"]) for r in epochs]
    best = max(range(len(epochs)), key=lambda i: float(epochs[i][f"val/recall@5_hop{hop}"]))
    recall = float(epochs[best][f"val/recall@5_hop{hop}"])
    direct = epochs[best].get("val/direct_recall@10") or "nan"
    return gains[best], statistics.mean(gains), float(epochs[best][f"val/k_hop{hop}"]), recall, recall - float(direct)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep_dir", type=Path, help="a train.py multirun directory (or a folder of run dirs)")
    parser.add_argument("--hop", type=int, default=2)
    args = parser.parse_args()
    designs: dict[str, list[tuple[float, ...]]] = defaultdict(list)
    for overrides in sorted(args.sweep_dir.glob("*/.hydra/overrides.yaml")):
        run = overrides.parent.parent
        gains = run_gains(run, args.hop)
        if gains is None:
            print(f"skipped {run}: no validation rows")
            continue
        design = " ".join(o for o in yaml.safe_load(overrides.read_text()) if not o.startswith(SPLIT))
        designs[design].append(gains)
    if not designs:
        raise SystemExit(f"no train.py runs with validation logs under {args.sweep_dir}")
    print(
        f"{'splits':>6} {'gain@best':>10} {'gain/epochs':>12} {'K':>5} {'recall':>7} {'−top10':>7}  "
        f"design (hop {args.hop}, gain over q − c)"
    )
    for design, runs in sorted(designs.items(), key=lambda kv: -statistics.mean(g[0] for g in kv[1])):
        best, mean, k, recall, vs_direct = (statistics.mean(g[i] for g in runs) for i in range(5))
        print(f"{len(runs):>6} {best:>+10.2f} {mean:>+12.2f} {k:>5.2f} {recall:>7.2f} {vs_direct:>+7.2f}  {design}")


if __name__ == "__main__":
    main()
