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
from hoprag.compare.explorer import explorer_page, plugged
from hoprag.compare.hops import hop_report
from hoprag.compare.hops import write_csv as write_hops_csv
from hoprag.compare.matched import DEFAULT_MEASURE, MEASURES, csv_rows, match, parse_budgets
from hoprag.compare.page import PLOTS, figures, html_report
from hoprag.compare.provenance import Stamp
from hoprag.compare.render import brief, report, significance_rows, table_rows, train_rows
from hoprag.compare.runs import CompareError
from hoprag.compare.shortcuts import split as split_shortcuts
from hoprag.stats import RESAMPLES


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["run"])
        writer.writeheader()
        writer.writerows(rows)


def write(comparison: Comparison, out: Path) -> None:
    """`table.csv` and `significance.csv` (eval runs), `train.csv` (train runs), `matched.csv` (the budget-matched
    comparison, when made), `table_multihop.csv` and `significance_multihop.csv` (with `--shortcuts`), `report.md`,
    `report.html`, `explorer.html` (the question explorer, eval runs), `hops.csv` (hop attribution, with gold chains)
    and each plot as `<name>.png` (for papers and READMEs) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    if comparison.groups:
        _write_csv(out / "table.csv", table_rows(comparison))
        _write_csv(out / "significance.csv", significance_rows(comparison))
    if comparison.train:
        _write_csv(out / "train.csv", train_rows(comparison))
    if comparison.matched is not None and comparison.matched.pairings:
        _write_csv(out / "matched.csv", csv_rows(comparison.matched))
    else:  # as a stale plot: a budget-matched table from an earlier report in `out` must not survive
        (out / "matched.csv").unlink(missing_ok=True)
    multihop = comparison.shortcuts.multihop if comparison.shortcuts is not None else None
    for name, rows in (("table_multihop", table_rows), ("significance_multihop", significance_rows)):
        if multihop is not None:  # --shortcuts: the multi-hop-only tables (none left over from an earlier report)
            _write_csv(out / f"{name}.csv", rows(multihop))
        else:
            (out / f"{name}.csv").unlink(missing_ok=True)
    write_hops_csv(comparison.hops, out)  # hops.csv: each question's failure label and hop steps (gold chains only)
    (out / "report.md").write_text(report(comparison), encoding="utf-8")
    plots = figures(comparison)
    for name in PLOTS:  # a plot that no longer applies must not survive from an earlier report in `out`
        if name in plots:
            (out / f"{name}.png").write_bytes(plots[name][0])
        else:
            (out / f"{name}.png").unlink(missing_ok=True)
    (out / "report.html").write_text(html_report(comparison, plots), encoding="utf-8")
    if comparison.groups:  # the question explorer (hoprag.compare.explorer): eval runs only, none left over
        (out / "explorer.html").write_text(explorer_page(comparison, *plugged(comparison)), encoding="utf-8")
    else:
        (out / "explorer.html").unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python compare.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="eval or train run directories, multirun directories or globs")
    parser.add_argument("--baseline", help="the run the others are tested against (default: the first)")
    parser.add_argument("--out", type=Path, help="folder for the CSV tables, report.md and report.html")
    parser.add_argument("--intersect", action="store_true", help="pair runs on the questions they hold alike")
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help="bootstrap and permutation resamples")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    parser.add_argument("--brief", action="store_true", help="print the table and one row of tests per run only")
    parser.add_argument("--cost", choices=list(MEASURES), default=DEFAULT_MEASURE,
                        help="budget-matched comparison: the per-question cost a budget counts (default tokens)")
    parser.add_argument("--budgets", help="budget-matched comparison: budgets per question, e.g. 2000,4000 "
                        "(default: where the matched runs change)")
    parser.add_argument("--metric", help="budget-matched comparison: the quality compared, a column's key or header "
                        "(default: F1, else passage recall)")  # fmt: skip
    parser.add_argument("--shortcuts", nargs="+", metavar="PROBE", help="shortcut_probe run(s) of the runs' data "
                        "and LLM: every table and test again on the questions they do not flag (multi-hop only)")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        budgets = None if args.budgets is None else parse_budgets(args.budgets)
    except CompareError as e:
        parser.error(str(e))
    try:
        comparison = build(args.runs, args.baseline, args.intersect, args.resamples, args.seed)
        comparison.matched = match(comparison, args.cost, budgets, args.metric, args.intersect, args.resamples,
                                   args.seed) if comparison.groups else None  # fmt: skip
        if args.shortcuts:
            comparison.shortcuts = split_shortcuts(comparison, args.shortcuts, args.intersect, args.seed)
        comparison.hops = hop_report(comparison.groups)  # hop attribution: None without gold chains
    except CompareError as e:  # the runs, not the command line, are at fault: the message alone, no usage
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    comparison.stamp = Stamp.now(argv)
    print((brief if args.brief else report)(comparison), end="")
    if args.out is not None:
        write(comparison, args.out)
        print(f"written to {args.out}: report.md and report.html (every test with its CI, the plots, the runs)")
    return 0
