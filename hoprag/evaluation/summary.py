"""The report `eval.py` ends with: a run's first predictions, then one compact, aligned table of its headline
means, and where the run lives.

metrics.json holds every figure (totals, macro averages, per-stage seconds, each CRAG category ...); the table
shows the few a reader compares runs by, in a fixed order, so every run's report reads the same: answer rates
(n/a when the method generated no answer, or the dataset has no such gold), retrieval rates (n/a without
retrieval or gold passages), the cost per question, then the method's own figures when they are few. Cost
figures beyond the core ones show only when nonzero, and no totals: a total is the mean times the questions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hoprag.evaluation.runner import METRICS, PREDICTIONS

NA = "n/a"
CELLS_PER_LINE = 3
MAX_METHOD_FIGURES = 12  # more (TreeHop's per-variant hops) and the table would drown: metrics.json has them
ANSWER = ("em", "f1", "acc", "cover_em", "precision", "recall")
ANSWER_EXTRA = ("efr", "forget_rate", "parse_failures_pct")
COST = ("llm_calls", "prompt_tokens", "completion_tokens", "retrieval_calls", "passages_read", "seconds/total")
DATASET = re.compile(r"^(asqa|ambigdocs)/[^/]+$|^crag/(acc|hall|miss|score)@|^crag/unjudged$")

Cell = tuple[str, str]


def format_summary(output_dir: str | Path, show: int = 0) -> str:
    """A finished run's report: its first `show` predictions, the metrics table, and the run directory."""
    output_dir = Path(output_dir)
    report = json.loads((output_dir / METRICS).read_text())
    lines = []
    with open(output_dir / PREDICTIONS, encoding="utf-8") as f:
        for _, line in zip(range(show), f):
            r = json.loads(line)
            lines.append(f"Q: {r['question']}\n   predicted: {r['prediction']!r}   gold: {r['golds'][:3]}")
    lines.append(headline(report["run"]))
    lines.append(metrics_table(report["metrics"]))
    lines.append(f"run directory: {output_dir}  (metrics.json: all {len(report['metrics'])} figures)")
    return "\n".join(lines)


def headline(run: Mapping[str, Any]) -> str:
    """`<method> on <dataset>: <n> questions, <seconds>` (and how many answers an earlier run left, and the
    small-model overlay when it changed the method's settings: conf/aids/)."""
    kept = run.get("resumed_with") or 0
    resumed = f", {kept} of them answered by an earlier run" if kept else ""
    seconds = f" in {run['seconds']:.1f} s" if "seconds" in run else ""
    aided = run.get("aids", "none") != "none"
    aids = f" (with the {run['aids']} overlay's aids; aids=none: the paper's settings)" if aided else ""
    return f"{run['method']} on {run.get('dataset', '?')}: {run['n']} questions{seconds}{resumed}{aids}"


def metrics_table(metrics: Mapping[str, float]) -> str:
    """The headline means as an aligned grid, one titled group of `name value` cells (or a note) per topic."""
    return grid([(title, cells) for title, cells in _groups(metrics) if cells])


def _groups(metrics: Mapping[str, float]) -> list[tuple[str, list[Cell] | str]]:
    answer = [_rate(metrics, key) for key in ANSWER] + [_rate(metrics, k) for k in ANSWER_EXTRA if k in metrics]
    dataset = [(key, _number(value)) for key, value in metrics.items() if DATASET.match(key)]
    cost = [(key.replace("seconds/total", "seconds"), _cost(metrics, key)) for key in COST]
    cost += [(key, _number(metrics[f"cost/mean/{key}"])) for key in _other_costs(metrics)]
    method = {key.removeprefix("method/"): value for key, value in metrics.items() if key.startswith("method/")}
    if len(method) > MAX_METHOD_FIGURES:
        shown: list[Cell] | str = f"{len(method)} figures (method/...): see metrics.json"
    else:
        shown = [(key, _number(value)) for key, value in method.items()]
    return [
        ("answer (%)", answer),
        ("dataset", dataset),
        ("retrieval (%)", _retrieval(metrics)),
        ("per question", cost),
        ("method", shown),
    ]


def _retrieval(metrics: Mapping[str, float]) -> list[Cell] | str:
    """Gold-passage and answer recall at the first cut-off and over everything read, or a note when nothing was
    read."""
    if "retrieval/passages_read" not in metrics:
        return f"{NA}: nothing retrieved"
    cut = _first_cut(metrics)
    cells = [_rate(metrics, f"retrieval/passage_recall{cut}", "passage_recall" + cut)]
    if cut:
        cells.append(_rate(metrics, "retrieval/passage_recall", "passage_recall"))
    cells += [
        _rate(metrics, f"retrieval/answer_recall{cut}", "answer_recall" + cut),
        _rate(metrics, "retrieval/all_gold_retrieved", "all_gold_retrieved"),
        ("passages_read", _number(metrics["retrieval/passages_read"])),
    ]
    if metrics.get("retrieval/empty_results"):
        cells.append(("empty_results", _number(metrics["retrieval/empty_results"])))
    return cells


def _first_cut(metrics: Mapping[str, float]) -> str:
    """`@k` of the first cut-off the run scored (metrics.ks), or "" when it scored none."""
    cuts = [m.group(1) for key in metrics if (m := re.fullmatch(r"retrieval/answer_recall(@\d+)", key))]
    return cuts[0] if cuts else ""


def _other_costs(metrics: Mapping[str, float]) -> list[str]:
    """The cost means beyond `COST` that are nonzero (prompts cut to fit, cache hits ...), per-stage seconds
    left to metrics.json."""
    names = [key.removeprefix("cost/mean/") for key in metrics if key.startswith("cost/mean/")]
    return [n for n in names if n not in COST and not n.startswith("seconds/") and metrics[f"cost/mean/{n}"]]


def _rate(metrics: Mapping[str, float], key: str, label: str | None = None) -> Cell:
    return (label or key, f"{metrics[key]:.1f}" if key in metrics else NA)


def _cost(metrics: Mapping[str, float], key: str) -> str:
    value = metrics.get(f"cost/mean/{key}")
    return NA if value is None else _number(value)


def _number(value: float) -> str:
    """An integer as one; otherwise 1 decimal from 100 up, 2 from 1 up, 3 significant digits below."""
    if float(value).is_integer():
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3g}"


def grid(groups: Sequence[tuple[str, Iterable[Cell] | str]]) -> str:
    """Groups of cells, `CELLS_PER_LINE` to a line, each column's names left- and values right-aligned across
    the whole table; a group's title starts its first line. A group given as a string is a note on one line."""
    rows: list[tuple[str, list[Cell] | str]] = []
    for title, cells in groups:
        if isinstance(cells, str):
            rows.append((title, cells))
            continue
        cells = list(cells)
        for i in range(0, len(cells), CELLS_PER_LINE):
            rows.append((title if i == 0 else "", cells[i : i + CELLS_PER_LINE]))
    if not rows:
        return ""
    title_width = max(len(title) for title, _ in rows)
    celled = [cells for _, cells in rows if not isinstance(cells, str)]
    names = [max((len(c[i][0]) for c in celled if len(c) > i), default=0) for i in range(CELLS_PER_LINE)]
    values = [max((len(c[i][1]) for c in celled if len(c) > i), default=0) for i in range(CELLS_PER_LINE)]
    lines = []
    for title, cells in rows:
        if isinstance(cells, str):
            shown = cells
        else:
            shown = "   ".join(f"{name:<{names[i]}} {value:>{values[i]}}" for i, (name, value) in enumerate(cells))
        lines.append(f"  {title:<{title_width}}   {shown}".rstrip())
    return "\n".join(lines)
