"""A reproduced table in the paper's layout, written as `table.md`, `table.csv`, `paired.csv` and `table.html`:
per cell the paper's figure, hoprag's and their difference (`paper / hoprag (Δ)`, Δ = hoprag − paper), per row
the cost per question, then each row's paired tests against the paper's own baseline row. Nothing in it depends
on when it was made, so a rerun over the same runs writes the same files."""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

from hoprag.compare.page import STYLE, html_table
from hoprag.compare.render import markdown_grid
from hoprag.reproduce.cells import Cell, Paired, Results
from hoprag.reproduce.plan import Job
from hoprag.reproduce.spec import Table, as_lines

COST_HEADER = ("LLM calls/q", "tokens/q", "s/q")
COST_DIGITS = {"llm_calls": 2, "tokens": 0, "seconds": 3}
COST_NOTE = ("Cost per question: the mean over the row's runs; an LLM reply read from the generation cache counts its "
             "tokens but takes no time (`cost/*/llm_cache_hits`).")  # fmt: skip


@dataclass
class Footnotes:
    """Numbered notes, each text once, in the order cells first need them."""

    texts: list[str] = field(default_factory=list)

    def mark(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[{self.texts.index(text) + 1}]"


def _number(value: float, digits: int) -> str:
    return f"{value:.{digits}f}"


def cell_text(cell: Cell, notes: Footnotes) -> str:
    """`paper / hoprag (Δ)`; `–` where the paper prints no figure; hoprag's status (with a note) where it has none."""
    paper = (
        "–" if cell.paper is None else ("n/r" if cell.paper.value is None else _number(cell.paper.value, cell.digits))
    )
    if cell.paper is not None and cell.paper.note:
        paper += notes.mark(f"Paper: {cell.paper.note}")
    if cell.value is None:
        return f"{paper} / {cell.status}{notes.mark(cell.reason) if cell.reason else ''}"
    ours = _number(cell.value, cell.digits)
    if cell.partial:
        ours += notes.mark(f"hoprag's average over the groups that ran ({cell.partial} here), not the paper's set")
    delta = f" ({cell.delta:+.{cell.digits}f})" if cell.delta is not None else ""
    return f"{paper} / {ours}{delta}"


@dataclass
class Report:
    """Everything the files show, computed once."""

    table: Table
    scale: str
    header: list[str]
    rows: list[list[str]]
    csv_rows: list[dict[str, str]]
    paired: list[Paired]
    notes: Footnotes
    untested: list[str]
    questions: list[str]


def build(table: Table, scale: str, jobs: list[Job], resamples: int, seed: int) -> Report:
    results = Results(table, scale, jobs)
    notes = Footnotes()
    header = ["row", *(f"{table.groups[g].label} {table.metrics[m].label}" for g, m in table.columns), *COST_HEADER]
    rows, csv_rows = [], []
    for row in table.rows:
        cost = results.cost(row)
        cost_text = ["–" if cost[k] is None else _number(cost[k], d) for k, d in COST_DIGITS.items()]
        cells = [results.cell(row, g, m) for g, m in table.columns]
        shared = (
            f"{row.name} reads the runs of {table.row(row.run).name}: its cost is that run's."
            if row.run != row.id
            else ""
        )
        rows.append(
            [row.name + (notes.mark(shared) if shared else ""), *(cell_text(c, notes) for c in cells), *cost_text]
        )
        for (g, m), c in zip(table.columns, cells):
            n = results.n(row, g) if not table.groups[g].mean_of else None
            csv_rows.append({
                "row": row.name, "group": g, "metric": m,
                "paper": "" if c.paper is None or c.paper.value is None else str(c.paper.value),
                "paper_note": "" if c.paper is None else c.paper.note,
                "hoprag": "" if c.value is None else _number(c.value, c.digits + 1),
                "delta": "" if c.delta is None else _number(c.delta, c.digits + 1),
                "status": c.status, "reason": c.reason, "n": "" if n is None else str(n),
                **{k: text for k, text in zip(COST_DIGITS, cost_text)},
            })  # fmt: skip
    paired, untested = results.paired(resamples, seed)
    return Report(table, scale, header, rows, csv_rows, paired, notes, untested, _questions(table, results))


def _questions(table: Table, results: Results) -> list[str]:
    """Per group, how many questions its runs answered (a range when rows differ)."""
    lines = []
    for g in table.run_groups():
        ns = sorted({n for row in table.rows if row.run == row.id and (n := results.n(row, g)) is not None})
        if ns:
            lines.append(f"{table.groups[g].label}: {ns[0]}" + (f"–{ns[-1]}" if len(ns) > 1 else ""))
    return lines


def intro(report: Report) -> list[str]:
    """The lines above the table: which paper table, which scale and what it shows, and the shared settings."""
    t, scale = report.table, report.table.scales[report.scale]
    kind = {"smoke": "Smoke scale: mechanics, not quality.", "rehearsal": "Rehearsal: code paths, not figures."}.get(
        report.scale, "Paper scale.")  # fmt: skip
    baseline = t.row(t.baseline).name
    lines = [
        f"**{kind}** {scale.label}",
        f"Paper: {t.digest}. Each cell: paper / hoprag (Δ = hoprag − paper). Paired tests against {baseline}.",
        f"Every run: `{as_lines(scale.overrides) or '(the defaults)'}`. {COST_NOTE}",
    ]
    narrowed = [f"{row.name} `{as_lines(row.narrowed)}`" for row in t.rows if row.narrowed]
    if report.scale == "rehearsal" and narrowed:
        lines.append(f"Searches narrowed for the rehearsal (the paper's widths at scale=paper): {'; '.join(narrowed)}.")
    if scale.settings:
        lines.append("The paper's settings: " + "; ".join(f"{k} {v}" for k, v in scale.settings.items()) + ".")
    if report.questions:
        lines.append("Questions per run: " + "; ".join(report.questions) + ".")
    return lines


PAIRED_HEADER = ["row", "column", "shared", "baseline", "row value", "Δ", "95% CI", "p"]


def paired_cells(report: Report) -> list[list[str]]:
    t = report.table
    out = []
    for p in report.paired:
        d, x = p.digits + 1, p.test
        column = f"{t.groups[p.group].label} {t.metrics[p.metric].label}"
        out.append([t.row(p.row).name, column, str(x.n), f"{x.mean_a:.{d}f}", f"{x.mean_b:.{d}f}",
                    f"{x.diff:+.{d}f}", f"[{x.ci_low:+.{d}f}, {x.ci_high:+.{d}f}]", f"{x.p:.4f}"])  # fmt: skip
    return out


def markdown(report: Report) -> str:
    t = report.table
    parts = [f"# {t.title}", *intro(report), markdown_grid(report.header, report.rows)]
    parts += [f"{i}. {text}" for i, text in enumerate(report.notes.texts, 1)]
    parts += [f"Note: {n}" for n in t.notes]
    parts += [f"Stood in for: {'; '.join(t.scales[report.scale].stand_ins)}."] if t.scales[report.scale].stand_ins else []
    parts.append(f"## Paired tests against {t.row(t.baseline).name}")
    if report.paired:
        parts.append(markdown_grid(PAIRED_HEADER, paired_cells(report)))
    parts += report.untested or ([] if report.paired else ["(no row shares questions with the baseline's runs)"])
    return "\n\n".join(parts) + "\n"


def html(report: Report) -> str:
    t = report.table
    body = [f"<h1>{escape(t.title)}</h1>", *(f"<p>{escape(line)}</p>" for line in intro(report)),
            html_table(report.header, report.rows)]  # fmt: skip
    if report.notes.texts:
        body.append("<ol>" + "".join(f"<li>{escape(text)}</li>" for text in report.notes.texts) + "</ol>")
    body += [f"<p><strong>Note.</strong> {escape(n)}</p>" for n in t.notes]
    if t.scales[report.scale].stand_ins:
        body.append(f"<p><strong>Stood in for:</strong> {escape('; '.join(t.scales[report.scale].stand_ins))}.</p>")
    body.append(f"<h2>Paired tests against {escape(t.row(t.baseline).name)}</h2>")
    if report.paired:
        body.append(html_table(PAIRED_HEADER, paired_cells(report)))
    body += [f"<p>{escape(n)}</p>" for n in report.untested]
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(t.title)}</title>'
            f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(body) + "\n</body></html>\n")  # fmt: skip


def _csv(path: Path, rows: list[dict[str, str]], fields: list[str]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def write(report: Report, out_dir: Path) -> None:
    """`table.md`, `table.csv` (one line per row and column), `paired.csv` and `table.html` into `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "table.md").write_text(markdown(report), encoding="utf-8")
    fields = ["row", "group", "metric", "paper", "paper_note", "hoprag", "delta", "status", "reason", "n",
              *COST_DIGITS]  # fmt: skip
    _csv(out_dir / "table.csv", report.csv_rows, fields)
    paired = [dict(zip(PAIRED_HEADER, cells)) for cells in paired_cells(report)]
    _csv(out_dir / "paired.csv", paired, PAIRED_HEADER)
    (out_dir / "table.html").write_text(html(report), encoding="utf-8")
