"""Compare finished `eval.py` and `train.py` runs: tables of quality and cost, paired significance against a
baseline, and a self-contained HTML report with plots.

`python compare.py`'s command line (see the package docstring; `python -m hoprag.compare` is an alias), and
`write`, which puts a comparison's tables, report and plots into a folder."""

from __future__ import annotations

import argparse
import csv
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from hoprag.compare.comparison import Comparison, build
from hoprag.compare.page import PLOTS, figures, html_report
from hoprag.compare.provenance import Stamp
from hoprag.compare.render import brief, report, significance_rows, table_rows, train_rows
from hoprag.compare.runs import CompareError
from hoprag.stats import RESAMPLES


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["run"])
        writer.writeheader()
        writer.writerows(rows)


def write(comparison: Comparison, out: Path) -> None:
    """`table.csv` and `significance.csv` (eval runs), `train.csv` (train runs), `report.md`, `report.html` and
    each plot as `<name>.png` (for papers and READMEs) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    if comparison.groups:
        _write_csv(out / "table.csv", table_rows(comparison))
        _write_csv(out / "significance.csv", significance_rows(comparison))
    if comparison.train:
        _write_csv(out / "train.csv", train_rows(comparison))
    (out / "report.md").write_text(report(comparison), encoding="utf-8")
    plots = figures(comparison)
    for name in PLOTS:  # a plot that no longer applies must not survive from an earlier report in `out`
        if name in plots:
            (out / f"{name}.png").write_bytes(plots[name][0])
        else:
            (out / f"{name}.png").unlink(missing_ok=True)
    (out / "report.html").write_text(html_report(comparison, plots), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python compare.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="eval or train run directories, multirun directories or globs")
    parser.add_argument("--baseline", help="the run the others are tested against (default: the first)")
    parser.add_argument("--out", type=Path, help="folder for the CSV tables, report.md and report.html")
    parser.add_argument("--intersect", action="store_true", help="pair runs on the questions they hold alike")
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help="bootstrap and permutation resamples")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    parser.add_argument("--brief", action="store_true", help="print the table and one row of tests per run only")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        comparison = build(args.runs, args.baseline, args.intersect, args.resamples, args.seed)
    except CompareError as e:  # the runs, not the command line, are at fault: the message alone, no usage
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    comparison.stamp = Stamp.now(argv)
    print((brief if args.brief else report)(comparison), end="")
    if args.out is not None:
        write(comparison, args.out)
        print(f"written to {args.out}: report.md and report.html (every test with its CI, the plots, the runs)")
    return 0
