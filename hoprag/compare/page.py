"""`hoprag.compare`'s report as one self-contained HTML page: the tables, the paired tests, and the plots of
`hoprag.compare.plots` inlined as base64 PNGs (no external CSS, script or image, so the file can be mailed or
archived alone)."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from html import escape

from hoprag.compare import plots as compare_plots
from hoprag.compare.comparison import Comparison
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
from hoprag.compare.matched import caption as matched_caption
from hoprag.compare.matched import cells as matched_cells
from hoprag.compare.matched import header as matched_header
from hoprag.compare.matched import intro as matched_intro
from hoprag.compare.matched import reason_line, verdicts
from hoprag.compare.provenance import questions, runs_cells, runs_header
from hoprag.compare.render import (
    TABLE_NOTE,
    TRAIN_NOTE,
    identical_note,
    left_out_note,
    significance_cells,
    significance_header,
    significance_intro,
    table_cells,
    table_header,
    train_cells,
    train_header,
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f3f3f3; }
figure { display: inline-block; margin: 0.5em 1em 0.5em 0; }
figcaption { font-size: 0.85em; color: #555; }
"""


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """An HTML table of `header` and `rows`, every cell escaped."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(png: bytes, caption: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<figure><img src="data:image/png;base64,{data}" alt="{escape(caption)}"><figcaption>{escape(caption)}</figcaption></figure>'


def _significance(comparison: Comparison) -> str:
    baseline = escape(comparison.baseline.name)  # type: ignore[union-attr]  # eval runs have a baseline
    if not comparison.significance:
        return f"<p>No run to test against the baseline <code>{baseline}</code>.</p>"
    intro = significance_intro(comparison, f"<code>{baseline}</code>")
    same = identical_note(comparison)
    table = html_table(significance_header(comparison), significance_cells(comparison))
    return f"<p>{intro}</p>" + table + (f"<p>{escape(same)}</p>" if same else "")


PLOTS = ("quality_cost", "sweep", "hops", "train", "matched_cost")  # the plot files a report may write, `<name>.png`


def figures(comparison: Comparison) -> dict[str, tuple[bytes, str]]:
    """The report's plots that apply, by file stem: (PNG, caption)."""
    found: dict[str, tuple[bytes | None, str]] = {}
    if comparison.groups:
        quality = getattr(compare_plots.quality_column(comparison), "header", "")
        cost = getattr(compare_plots.cost_column(comparison), "header", "")
        swept = compare_plots.sweep(comparison.groups)
        swept_key = swept.key if swept else ", ".join(compare_plots.swept_keys(comparison.groups))
        undrawn = compare_plots.undrawn(comparison)
        left = f"; not drawn (no {quality} or {cost}): {', '.join(undrawn)}" if undrawn else ""
        found["quality_cost"] = (compare_plots.quality_cost_plot(comparison),
                                 f"{quality} against {cost}: the Pareto front dashed, its runs in red{left}")  # fmt: skip
        found["sweep"] = (compare_plots.sweep_plot(comparison), f"{quality} against {swept_key}")
        found["hops"] = (compare_plots.hop_plot(comparison), "TreeHop: micro passage recall by hop")
        if comparison.matched is not None and not comparison.matched.reason:
            found["matched_cost"] = (compare_plots.matched_cost_plot(comparison),
                                     matched_caption(comparison.matched, comparison.groups))  # fmt: skip
    if comparison.train:
        found["train"] = (compare_plots.train_plot(comparison), "Monitored metric per epoch (stars: best epoch)")
    return {name: (png, caption) for name, (png, caption) in found.items() if png is not None}


def _matched(comparison: Comparison, plots: dict[str, tuple[bytes, str]]) -> str:
    """The budget-matched section: why it was not made in one line, or its table, verdicts, notes and plot."""
    found = comparison.matched
    if found is None:
        return ""
    if found.reason or found.reference is None:
        return f"<p>{escape(reason_line(found))}</p>"
    said = "".join(f"<p>{escape(line)}</p>" for line in [*verdicts(found), *found.notes])
    figure = _figure(*plots["matched_cost"]) if "matched_cost" in plots else ""
    return ("<h3>Budget-matched comparison</h3>" + f"<p>{escape(matched_intro(found, found.reference.name))}</p>"
            + html_table(matched_header(found), matched_cells(found)) + said + figure)  # fmt: skip


def _shortcuts(comparison: Comparison) -> str:
    """The multi-hop-only section (`--shortcuts`): the counts and rule, then the main table's and tests' code on
    the questions the shortcut probe did not flag."""
    found = comparison.shortcuts
    if found is None:
        return ""
    parts = ["<h3>Multi-hop only</h3>", f"<p>Shortcut questions left out. {escape(found.summary())}</p>"]
    if found.multihop is not None:
        sub, left_out = found.multihop, left_out_note(found.multihop)
        parts += [*(f"<p><strong>Note.</strong> {escape(n)}</p>" for n in sub.notes),
                  f"<p>{escape(found.table_note())}</p>", html_table(table_header(sub), table_cells(sub)),
                  f"<p>{escape(left_out)}</p>" if left_out else "", "<h4>Paired tests, multi-hop only</h4>",
                  _significance(sub)]  # fmt: skip
    return "".join(parts)


def _hops(comparison: Comparison) -> str:
    """The hop attribution section (`hoprag.compare.hops`), "" without gold chains."""
    found = comparison.hops
    if found is None:
        return ""
    header = recall_header(found)
    return "\n".join([
        "<h3>Hop attribution</h3>",
        "<p>Over the gold chains (MuSiQue decompositions, 2Wiki evidences).</p>",
        *(f"<p><strong>Note.</strong> {escape(n)}</p>" for n in found.notes),
        f"<p>{escape(LABELS_INTRO)}</p>", html_table(labels_header(found), labels_cells(found)),
        f"<p>{escape(RECALL_INTRO)}</p>", html_table(header, recall_cells(found)),
        f"<p>{escape(SUB_INTRO)}</p>", html_table(header, sub_cells(found)),
    ])  # fmt: skip


def html_report(comparison: Comparison, plots: dict[str, tuple[bytes, str]] | None = None) -> str:
    """The whole page; `plots` as `figures` returns them (drawn here when not given)."""
    plots = figures(comparison) if plots is None else plots
    parts = [f"<p>{escape(comparison.stamp.line())}</p>"] if comparison.stamp else []
    if comparison.groups:
        eval_plots = [_figure(*plots[n]) for n in ("quality_cost", "sweep", "hops") if n in plots]
        left_out = left_out_note(comparison)
        parts += [
            f"<p>Questions: {escape(questions(comparison.groups))}.</p>",
            *(f"<p><strong>Note.</strong> {escape(n)}</p>" for n in comparison.notes),
            "<h2>Eval runs</h2>",
            f"<p>{escape(TABLE_NOTE)}</p>",
            html_table(table_header(comparison), table_cells(comparison)),
            f"<p>{escape(left_out)}</p>" if left_out else "",
            "<h3>Paired tests</h3>",
            _significance(comparison),
            _shortcuts(comparison),
            _matched(comparison, plots),
            _hops(comparison),
            *(["<h3>Plots</h3>", *eval_plots] if eval_plots else []),
        ]
    if comparison.train:
        parts += [
            "<h2>Train runs</h2>",
            f"<p>The monitored metric's best value (by its mode), its epoch, and the last value. {escape(TRAIN_NOTE)}</p>",
            html_table(train_header(comparison), train_cells(comparison)),
            _figure(*plots["train"]) if "train" in plots else "",
        ]
    parts += ["<h2>Runs</h2>", html_table(runs_header(), runs_cells(comparison.groups, comparison.train))]
    body = "\n".join(p for p in parts if p)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>hoprag comparison</title>'
        f"<style>{STYLE}</style></head>\n<body><h1>hoprag comparison</h1>\n{body}\n</body></html>\n"
    )
