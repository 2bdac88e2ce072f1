"""A comparison as text: the rows of the eval, train and significance tables (as the CSV files hold them),
their cells as shown, and the markdown report; `page` renders the same rows as HTML."""

from __future__ import annotations

import re
import statistics

from hoprag.compare.columns import TRAIN, Column
from hoprag.compare.comparison import Comparison
from hoprag.compare.groups import Group
from hoprag.compare.hops import (
    LABELS_INTRO,
    RECALL_INTRO,
    SUB_INTRO,
    labels_cells,
    labels_header,
    recall_cells,
    recall_header,
    sub_cells,
)
from hoprag.compare.matched import cells as matched_cells
from hoprag.compare.matched import header as matched_header
from hoprag.compare.matched import intro as matched_intro
from hoprag.compare.matched import reason_line, verdicts
from hoprag.compare.provenance import questions, runs_cells, runs_header
from hoprag.compare.significance import Significance


def _cell(values: list[float], digits: int) -> tuple[str, str]:
    """(mean, std) as text; std is "" for one value, and both are "" when no run reports the metric."""
    if not values:
        return "", ""
    mean = f"{statistics.fmean(values):.{digits}f}"
    return mean, (f"{statistics.stdev(values):.{digits}f}" if len(values) > 1 else "")


def _n(group: Group) -> str:
    ns = sorted({int(r.metrics.get("n", r.info.get("n", 0))) for r in group.runs})
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


def table_rows(comparison: Comparison) -> list[dict[str, str]]:
    """One row per group: run, runs, n, then every column's mean and `<key>_std` (as CSV writes them)."""
    rows = []
    for g in comparison.groups:
        row = {"run": g.name, "runs": str(len(g.runs)), "n": _n(g)}
        for c in comparison.columns:
            row[c.key], row[f"{c.key}_std"] = _cell(g.values(c.key), c.digits)
        rows.append(row)
    return rows


NUMBER = re.compile(r"^(?:[-+]?\d|\[[-+]?\d|[–=]$)")  # a figure, a CI, "–" or "=": right-aligned when padded


def markdown_grid(header: list[str], rows: list[list[str]], pad: bool = False) -> str:
    """A markdown table of `header` and `rows` (cells as shown; `|` escaped); `pad` aligns the columns for a
    terminal (figures right, text left), which renders the same."""
    cells = [list(header), *([c.replace("|", "\\|") for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))] if pad else [0] * len(header)
    right = [bool(rows) and all(NUMBER.match(row[i]) for row in cells[1:]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        return "| " + " | ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right)) + " |"

    rule = "|" + "|".join("-" * (w + 2) if pad else "---" for w in widths) + "|"
    return "\n".join([line(cells[0]), rule, *map(line, cells[1:])])


def cell_text(row: dict[str, str], column: Column) -> str:
    """A table cell as shown: mean ± std, the mean alone for one run, "–" when no run reports it."""
    return f"{row[column.key]} ± {row[column.key + '_std']}" if row[column.key + "_std"] else row[column.key] or "–"


def table_header(comparison: Comparison) -> list[str]:
    seeded = any(len(g.runs) > 1 for g in comparison.groups)
    return ["run", *(["runs"] if seeded else []), "n", *(c.header for c in comparison.columns)]


def table_cells(comparison: Comparison) -> list[list[str]]:
    seeded = any(len(g.runs) > 1 for g in comparison.groups)
    return [[row["run"], *([row["runs"]] if seeded else []), row["n"], *(cell_text(row, c) for c in comparison.columns)]
            for row in table_rows(comparison)]  # fmt: skip


def markdown_table(comparison: Comparison) -> str:
    return markdown_grid(table_header(comparison), table_cells(comparison), pad=True)


TRAIN_NOTE = "Train runs are not paired-tested: their logs hold no per-question scores."


def train_columns(comparison: Comparison) -> list[Column]:
    return [c for c in TRAIN if any(c.key in r.metrics for g in comparison.train for r in g.runs)]


def train_rows(comparison: Comparison) -> list[dict[str, str]]:
    """One row per train group: run, runs, the monitored metric and its mode, then each figure's mean and std."""
    rows = []
    for g in comparison.train:
        monitors = dict.fromkeys(f"{r.monitor} ({r.mode})" for r in g.runs)
        row = {"run": g.name, "runs": str(len(g.runs)), "metric": ", ".join(monitors)}
        for c in train_columns(comparison):
            row[c.key], row[f"{c.key}_std"] = _cell(g.values(c.key), c.digits)
        rows.append(row)
    return rows


def train_header(comparison: Comparison) -> list[str]:
    return ["run", "runs", "metric", *(c.header for c in train_columns(comparison))]


def train_cells(comparison: Comparison) -> list[list[str]]:
    columns = train_columns(comparison)
    return [[r["run"], r["runs"], r["metric"], *(cell_text(r, c) for c in columns)] for r in train_rows(comparison)]


def significance_rows(comparison: Comparison) -> list[dict[str, str]]:
    rows = []
    for s in comparison.significance:
        t, d = s.test, s.column.digits + 1
        rows.append({
            "run": s.run, "metric": s.column.key, "shared": str(t.n),
            "baseline": f"{t.mean_a:.{d}f}", "value": f"{t.mean_b:.{d}f}", "diff": f"{t.diff:+.{d}f}",
            "ci_low": f"{t.ci_low:+.{d}f}", "ci_high": f"{t.ci_high:+.{d}f}", "p": f"{t.p:.4f}",
        })  # fmt: skip
    return rows


TABLE_NOTE = "Each row holds its runs' own metrics.json figures, over their own n questions."


def significance_intro(comparison: Comparison, baseline: str) -> str:
    """What the paired tests compare, and over how many questions (`baseline`: the name as the page shows it)."""
    level = round(100 * comparison.significance[0].test.level)
    ns = sorted({s.test.n for s in comparison.significance})
    over = f"the {ns[0]} shared questions" if len(ns) == 1 else "the shared questions (column shared)"
    return (f"Paired against the baseline {baseline} over {over}, those both answered alike (same id, question "
            "text and golds); each side's value is its mean over them, from its own records: bootstrap "
            f"{level}% CI of the difference and sign-flip permutation p "
            f"({comparison.resamples} resamples).")  # fmt: skip


def significance_header(comparison: Comparison) -> list[str]:
    level = round(100 * comparison.significance[0].test.level)
    return ["run", "metric", "shared", "baseline on shared", "run on shared", "Δ", f"{level}% CI", "p"]


def _identical(s: Significance) -> bool:
    """Both sides equal on every shared question: nothing to test (the CSV keeps the row)."""
    return s.test.diff == 0 and s.test.ci_low == 0 and s.test.ci_high == 0


def significance_cells(comparison: Comparison) -> list[list[str]]:
    """The tests as shown: those where the two sides differ on some question (`identical_note` names the rest)."""
    rows = zip(comparison.significance, significance_rows(comparison))
    return [[r["run"], s.column.header, r["shared"], r["baseline"], r["value"], r["diff"],
             f"[{r['ci_low']}, {r['ci_high']}]", r["p"]] for s, r in rows if not _identical(s)]  # fmt: skip


def identical_note(comparison: Comparison) -> str:
    """The metrics left out of the tests' table because both sides are equal on every shared question."""
    same: dict[str, list[str]] = {}
    for s in comparison.significance:
        if _identical(s):
            same.setdefault(s.run, []).append(s.column.header)
    if not same:
        return ""
    listed = "; ".join(f"{run}: {', '.join(headers)}" for run, headers in same.items())
    return f"Not shown, equal to the baseline on every shared question: {listed}."


def left_out_note(comparison: Comparison) -> str:
    return f"Columns not shown: {'; '.join(comparison.left_out)}." if comparison.left_out else ""


def markdown_significance(comparison: Comparison) -> str:
    if not comparison.significance:
        return f"(no run to test against the baseline {comparison.baseline.name!r})"
    intro = significance_intro(comparison, f"`{comparison.baseline.name}`")
    table = markdown_grid(significance_header(comparison), significance_cells(comparison), pad=True)
    return "\n\n".join(p for p in (intro, table, identical_note(comparison)) if p)


def brief_tests(comparison: Comparison) -> str:
    """The paired tests of the quality columns as one row per run, each cell `Δ (p)` (costs differ visibly in the
    table; every test with its CI is in report.md)."""
    quality = [c for c in comparison.columns if not c.key.startswith("cost/")]
    by_run: dict[str, dict[str, str]] = {}
    for s, r in zip(comparison.significance, significance_rows(comparison)):
        if s.column in quality:
            cell = "=" if _identical(s) else f"{r['diff']} (p {float(r['p']):.2f})"
            by_run.setdefault(s.run, {})[s.column.header] = cell
    if not by_run:
        return ""
    headers = [c.header for c in quality if any(c.header in cells for cells in by_run.values())]
    rows = [[run, *(cells.get(h, "–") for h in headers)] for run, cells in by_run.items()]
    intro = (f"Paired against `{comparison.baseline.name}` (Δ and sign-flip permutation p; =: equal on every shared "
             "question; CIs in report.md):")  # fmt: skip
    return intro + "\n\n" + markdown_grid(["run", *headers], rows, pad=True)


def brief(comparison: Comparison) -> str:
    """What `compare.py --brief` prints: when and how, the eval table and one row of quality tests per run."""
    parts = [comparison.stamp.line()] if comparison.stamp else []
    if comparison.groups:
        parts += [f"Questions: {questions(comparison.groups)}.", markdown_table(comparison),
                  left_out_note(comparison), brief_tests(comparison)]  # fmt: skip
        if comparison.shortcuts is not None:  # --shortcuts: the multi-hop-only table and its tests' row per run
            sub = comparison.shortcuts.multihop
            parts += [f"Multi-hop only: {comparison.shortcuts.summary()}",
                      *((markdown_table(sub), brief_tests(sub)) if sub is not None else ())]  # fmt: skip
    if comparison.train:
        parts.append(markdown_grid(train_header(comparison), train_cells(comparison), pad=True))
    return "\n\n".join(p for p in parts if p) + "\n"


def markdown_matched(comparison: Comparison) -> str:
    """The budget-matched section (`hoprag.compare.matched`): why it was not made in one line, or its intro, table,
    verdicts and notes ("" when it was not computed)."""
    found = comparison.matched
    if found is None:
        return ""
    if found.reason or found.reference is None:
        return reason_line(found)
    table = markdown_grid(matched_header(found), matched_cells(found), pad=True)
    return "\n\n".join([matched_intro(found, f"`{found.reference.name}`"), table, *verdicts(found), *found.notes])


def markdown_shortcuts(comparison: Comparison) -> str:
    """The multi-hop-only section (`hoprag.compare.shortcuts`, `--shortcuts`): the counts and the rule, then the
    main table's and tests' code on the questions the probe did not flag ("" without `--shortcuts`)."""
    found = comparison.shortcuts
    if found is None:
        return ""
    parts = ["**Multi-hop only** (shortcut questions left out). " + found.summary()]
    if found.multihop is not None:
        sub = found.multihop
        parts += [*(f"**Note.** {n}" for n in sub.notes), found.table_note(), markdown_table(sub), left_out_note(sub),
                  markdown_significance(sub)]  # fmt: skip
    return "\n\n".join(p for p in parts if p)


def markdown_hops(comparison: Comparison) -> str:
    """The hop attribution section (`hoprag.compare.hops`): failure labels, per-hop recall and sub-answers ("" when
    no run has gold chains)."""
    found = comparison.hops
    if found is None:
        return ""
    header = recall_header(found)
    return "\n\n".join([
        "Hop attribution over the gold chains (MuSiQue decompositions, 2Wiki evidences).",
        *(f"**Note.** {n}" for n in found.notes),
        LABELS_INTRO, markdown_grid(labels_header(found), labels_cells(found), pad=True),
        RECALL_INTRO, markdown_grid(header, recall_cells(found), pad=True),
        SUB_INTRO, markdown_grid(header, sub_cells(found), pad=True),
    ])  # fmt: skip


def report(comparison: Comparison) -> str:
    """report.md (and what compare.py prints): when and how it was made, the tables, then where each run came from."""
    parts = [comparison.stamp.line()] if comparison.stamp else []
    if comparison.groups:
        parts.append(f"Questions: {questions(comparison.groups)}.")
    parts += [f"**Note.** {n}" for n in comparison.notes]
    if comparison.groups:
        parts += [TABLE_NOTE, markdown_table(comparison), left_out_note(comparison), markdown_significance(comparison)]
        parts.append(markdown_shortcuts(comparison))
        parts.append(markdown_matched(comparison))
        parts.append(markdown_hops(comparison))
    if comparison.train:
        parts += ["Train runs: the monitored metric's best value, its epoch, and the last value. " + TRAIN_NOTE,
                  markdown_grid(train_header(comparison), train_cells(comparison), pad=True)]  # fmt: skip
    parts += ["Runs:", markdown_grid(runs_header(), runs_cells(comparison.groups, comparison.train))]
    return "\n\n".join(p for p in parts if p) + "\n"
