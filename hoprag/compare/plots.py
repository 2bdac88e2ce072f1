"""The plots of `hoprag.compare`'s HTML report, each as PNG bytes (None where it does not apply), with the data
behind each kept in pure functions so it is tested apart from the drawing.

- quality against cost per eval group, with the Pareto front (`pareto_front`);
- a sweep's parameter against quality, when the groups' overrides differ in one numeric key (`sweep`);
- TreeHop's micro recall per hop and retriever variant (`hop_curves`);
- each train run's monitored metric per epoch;
- the budget-matched comparison: each method's front over its own runs, the matched runs ringed
  (`matched_cost_plot`, from `hoprag.compare.matched`).

matplotlib is imported inside `_png` only (its Agg canvas, no pyplot state), so importing this module is light.
"""

from __future__ import annotations

import io
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hoprag.compare.columns import Column
from hoprag.compare.comparison import Comparison
from hoprag.compare.groups import QUALIFIERS, SEED, Group, is_run_control_override
from hoprag.compare.provenance import questions

HOP_HITS = re.compile(r"^method/(.+)/hop(\d+)/hits$")
VARIANTS = ("direct", "q-c", "untrained", "treehop")  # scripts/runs/eval_treehop.py's order


# -- data --------------------------------------------------------------------------------------------------------


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the (cost, quality) points no other point dominates (no more cost and no less quality, one of
    them strictly), by rising cost."""
    front = [
        i for i, (c, q) in enumerate(points)
        if not any(c2 <= c and q2 >= q and (c2, q2) != (c, q) for c2, q2 in points)
    ]  # fmt: skip
    return sorted(front, key=lambda i: points[i])


def _nonzero(groups: Sequence[Group], column: Column) -> bool:
    return any(v != 0 for g in groups for v in g.values(column.key))


def quality_column(comparison: Comparison) -> Column | None:
    """F1, else gold-passage recall, else the first other quality column, that some run reports nonzero (a
    retrieval-only run reports F1 0)."""
    quality = [c for c in comparison.columns if not c.key.startswith("cost/")]
    preferred = sorted(quality, key=lambda c: ("f1", "retrieval/passage_recall").index(c.key)
                       if c.key in ("f1", "retrieval/passage_recall") else 2)  # fmt: skip
    return next((c for c in preferred if _nonzero(comparison.groups, c)), None)


def cost_column(comparison: Comparison) -> Column | None:
    """Prompt tokens per question when some run spends any, else passages read (retrieval-only runs), else
    seconds per question."""
    by_key = {c.key: c for c in comparison.columns}
    for key in ("cost/mean/prompt_tokens", "cost/mean/passages_read", "cost/mean/seconds/total"):
        if key in by_key and _nonzero(comparison.groups, by_key[key]):
            return by_key[key]
    return None


def _settings(group: Group) -> dict[str, str]:
    """The group's overrides as key -> value (`+`/`++`/`~` prefixes dropped), without seeds and the overrides
    that change nothing computed (`show=`, paths, caches), as the group's name leaves them out."""
    kept = (o for o in group.runs[0].overrides if not SEED.match(o) and not is_run_control_override(o))
    pairs = (o.lstrip("+~").split("=", 1) for o in kept)
    return {p[0]: (p[1] if len(p) > 1 else "") for p in pairs}


def _varied(settings: Sequence[dict[str, str]]) -> tuple[list[str], list[str]]:
    """The keys whose value differs across `settings`, and those of them that are a number in every one."""
    keys = dict.fromkeys(k for s in settings for k in s)
    differing = [k for k in keys if len({s.get(k) for s in settings}) > 1]
    return differing, [k for k in differing if all(_number(s.get(k)) is not None for s in settings)]


def _number(text: str | None) -> float | None:
    try:
        return float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def labels(groups: Sequence[Group]) -> list[str]:
    """The plots' names for the groups: the method (an eval run's `run.method`), then in brackets the overrides
    that differ across the groups (`+`/`~` dropped, the one naming the method left out) and what qualifies its
    figures (an un-tuned router); the group's table name where two would read alike or nothing names it."""
    settings = [_settings(g) for g in groups]
    differing, _ = _varied(settings)
    found = []
    for group, own in zip(groups, settings):
        info = getattr(group.runs[0], "info", {})
        method = info.get("method")
        said = [text for key, describe in QUALIFIERS.items() if key in info and (text := describe(info[key]))]
        rest = [f"{k}={own[k]}" for k in differing if k in own and own[k] != method] + said
        found.append(f"{method} ({', '.join(rest)})" if method and rest else method or ", ".join(rest))
    return [text if text and found.count(text) == 1 else g.name for text, g in zip(found, groups)]


def undrawn(comparison: Comparison) -> list[str]:
    """The groups the quality-cost plot leaves out: no run of theirs reports its quality or its cost."""
    quality, cost = quality_column(comparison), cost_column(comparison)
    if quality is None or cost is None:
        return []
    names = labels(comparison.groups)
    return [n for n, g in zip(names, comparison.groups) if not g.values(quality.key) or not g.values(cost.key)]


@dataclass(frozen=True)
class Sweep:
    """The one numeric key the groups differ in, and per combination of the other differing keys (the line's
    label, "" when there are none) the (value, group index) points by rising value."""

    key: str
    lines: dict[str, list[tuple[float, int]]]


def sweep(groups: Sequence[Group]) -> Sweep | None:
    """The swept parameter: the single key whose value differs across groups and is a number in every one."""
    if len(groups) < 2:
        return None
    settings = [_settings(g) for g in groups]
    differing, numeric = _varied(settings)
    if len(numeric) != 1:
        return None
    key = numeric[0]
    lines: dict[str, list[tuple[float, int]]] = {}
    for i, s in enumerate(settings):
        label = ",".join(f"{k}={s[k]}" for k in differing if k != key and k in s)
        lines.setdefault(label, []).append((float(s[key]), i))
    return Sweep(key, {label: sorted(points) for label, points in lines.items()})


def swept_keys(groups: Sequence[Group]) -> dict[str, list[tuple[float, int]]]:
    """Every numeric key the groups differ in -> (value, group index) points by rising value: a search over
    several parameters (e.g. an Optuna trial set), drawn one panel per key."""
    settings = [_settings(g) for g in groups]
    _, numeric = _varied(settings)
    return {k: sorted((float(s[k]), i) for i, s in enumerate(settings)) for k in numeric}


def hop_curves(metrics: Mapping[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """TreeHop's retriever variant (e.g. `q-c@5`) -> (hop, micro recall %: mean gold found / mean gold) by hop,
    from an eval run's `method/<variant>/hop<h>/hits` and `method/gold`; empty for other runs."""
    gold = metrics.get("method/gold")
    if not gold:
        return {}
    curves: dict[str, list[tuple[int, float]]] = {}
    for key, value in metrics.items():
        if m := HOP_HITS.match(key):
            curves.setdefault(m.group(1), []).append((int(m.group(2)), 100 * float(value) / float(gold)))

    def order(variant: str) -> tuple[int, str]:
        name = variant.split("@")[0]
        return (VARIANTS.index(name) if name in VARIANTS else len(VARIANTS), variant)

    return {v: sorted(curves[v]) for v in sorted(curves, key=order)}


def _group_hop_curves(group: Group) -> dict[str, list[tuple[int, float]]]:
    """`hop_curves` averaged over the group's seeds (hops every seed reports)."""
    per_run = [hop_curves(r.metrics) for r in group.runs]
    variants = [v for v in per_run[0] if all(v in c for c in per_run)]
    curves = {}
    for v in variants:
        by_hop = [dict(c[v]) for c in per_run]
        hops = sorted(set.intersection(*(set(h) for h in by_hop)))
        curves[v] = [(h, statistics.fmean(b[h] for b in by_hop)) for h in hops]
    return curves


# -- drawing -----------------------------------------------------------------------------------------------------


def _render(draw: Any, size: tuple[float, float]) -> bytes:
    """Draw on a fresh Agg figure and return the PNG (no metadata, so the bytes are reproducible)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(figure)
    draw(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    return buffer.getvalue()


def _png(draw: Any, size: tuple[float, float] = (6.4, 4.2)) -> bytes:
    """One gridded axes handed to `draw`."""

    def on_figure(figure: Any) -> None:
        axes = figure.add_subplot()
        axes.grid(alpha=0.3)
        draw(axes)

    return _render(on_figure, size)


def _mean_std(group: Group, column: Column) -> tuple[float, float] | None:
    values = group.values(column.key)
    if not values:
        return None
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def quality_cost_plot(comparison: Comparison) -> bytes | None:
    """Quality against cost per eval group (seed std as error bars), the Pareto front joined."""
    quality, cost = quality_column(comparison), cost_column(comparison)
    if quality is None or cost is None:
        return None
    names = labels(comparison.groups)
    points = [(name, _mean_std(g, cost), _mean_std(g, quality)) for name, g in zip(names, comparison.groups)]
    points = [(name, c, q) for name, c, q in points if c is not None and q is not None]
    if not points:
        return None
    front = pareto_front([(c[0], q[0]) for _, c, q in points])
    title = f"{quality.header} against {cost.header} ({questions(comparison.groups)})"

    def draw(axes: Any) -> None:
        for i, (name, c, q) in enumerate(points):
            axes.errorbar(c[0], q[0], xerr=c[1] or None, yerr=q[1] or None, fmt="o",
                          color="C3" if i in front else "C0", capsize=3)  # fmt: skip
            label = name.replace(",", ",\n") if len(name) > 30 else name  # long run names one override a line
            axes.annotate(label, (c[0], q[0]), textcoords="offset points", xytext=(4, 4), fontsize=7, va="top")
        axes.plot([points[i][1][0] for i in front], [points[i][2][0] for i in front], "--", color="C3",
                  label="Pareto front")  # fmt: skip
        axes.set_xlabel(f"{cost.header} per question")
        axes.set_ylabel(quality.header)
        axes.set_title(title, fontsize=9)
        axes.legend(fontsize=8)

    return _png(draw)


def sweep_plot(comparison: Comparison) -> bytes | None:
    """The swept parameter against quality, one line per combination of the other differing overrides; with
    several numeric parameters (a search), one scatter panel per parameter."""
    found, quality = sweep(comparison.groups), quality_column(comparison)
    if quality is None:
        return None
    if found is None:
        return _search_plot(comparison, quality)

    def draw(axes: Any) -> None:
        for label, points in found.lines.items():
            stats = [_mean_std(comparison.groups[i], quality) for _, i in points]
            kept = [(x, s) for (x, _), s in zip(points, stats) if s is not None]
            axes.errorbar([x for x, _ in kept], [s[0] for _, s in kept], yerr=[s[1] for _, s in kept],
                          marker="o", capsize=3, label=label or None)  # fmt: skip
        axes.set_xlabel(found.key)
        axes.set_ylabel(quality.header)
        axes.set_title(f"{quality.header} against {found.key} ({questions(comparison.groups)})", fontsize=9)
        if any(found.lines):
            axes.legend(fontsize=8)

    return _png(draw)


def hop_plot(comparison: Comparison) -> bytes | None:
    """TreeHop's micro recall by hop, one line per retriever variant (and group, when several have them)."""
    curves = [(name, _group_hop_curves(g)) for name, g in zip(labels(comparison.groups), comparison.groups)]
    curves = [(name, c) for name, c in curves if c]
    if not curves:
        return None

    def draw(axes: Any) -> None:
        lines = [(variant if len(curves) == 1 else f"{name}: {variant}", points)
                 for name, by_variant in curves for variant, points in by_variant.items()]  # fmt: skip
        for n, (label, points) in enumerate(lines):  # markers apart: variants often tie at hop 1
            axes.plot([h for h, _ in points], [r for _, r in points], marker="os^Dvp<>"[n % 8], alpha=0.8,
                      markersize=9 - n % 4, label=label)  # fmt: skip
        axes.set_xlabel("hop")
        axes.set_ylabel("passage recall (micro, %)")
        axes.set_title(f"TreeHop: passage recall by hop ({questions(comparison.groups)})", fontsize=9)
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.legend(fontsize=8)

    return _png(draw)


def _run_label(comparison: Comparison, group: Group, run: Any) -> str:
    """A seed group's runs by their seed overrides (else directory), after the group's name when there are several."""
    name = labels(comparison.train)[comparison.train.index(group)]
    if len(group.runs) == 1:
        return name
    own = ",".join(o.lstrip("+~") for o in run.overrides if SEED.match(o)) or run.label
    return own if len(comparison.train) == 1 else f"{name} · {own}"


def train_plot(comparison: Comparison) -> bytes | None:
    """Each train run's monitored metric per epoch, its best epoch marked."""
    runs = [(_run_label(comparison, g, r), r) for g in comparison.train for r in g.runs]
    if not runs:
        return None

    def draw(axes: Any) -> None:
        for label, run in runs:
            (line,) = axes.plot([e for e, _ in run.curve], [v for _, v in run.curve], marker=".", label=label)
            axes.plot(run.metrics["best_epoch"], run.metrics["best"], "*", color=line.get_color(), markersize=10)
        monitors = ", ".join(dict.fromkeys(r.monitor for _, r in runs))
        axes.set_xlabel("epoch")
        axes.set_ylabel(monitors)
        axes.set_title(f"{monitors} per epoch (stars: the best epoch)", fontsize=9)
        axes.xaxis.get_major_locator().set_params(integer=True)
        axes.legend(fontsize=7)

    return _png(draw)


def _search_plot(comparison: Comparison, quality: Column) -> bytes | None:
    panels = swept_keys(comparison.groups)
    if len(panels) < 2:
        return None

    def draw(figure: Any) -> None:
        for n, (key, points) in enumerate(panels.items()):
            axes = figure.add_subplot(1, len(panels), n + 1, sharey=figure.axes[0] if n else None)
            axes.grid(alpha=0.3)
            stats = [(x, _mean_std(comparison.groups[i], quality)) for x, i in points]
            kept = [(x, st) for x, st in stats if st is not None]
            axes.errorbar([x for x, _ in kept], [st[0] for _, st in kept], yerr=[st[1] for _, st in kept],
                          fmt="o", alpha=0.7, capsize=3)  # fmt: skip
            axes.set_xlabel(key)
            if n == 0:
                axes.set_ylabel(quality.header)
        figure.suptitle(f"{quality.header} against each searched parameter ({questions(comparison.groups)})",
                        fontsize=9)  # fmt: skip

    return _render(draw, (3.6 * len(panels), 3.6))


def matched_cost_plot(comparison: Comparison) -> bytes | None:
    """The budget-matched comparison (`comparison.matched`, see `hoprag.compare.matched`): each method's runs,
    its Pareto front as a step (at a budget a method is worth its best run costing at most that), the budgets
    dotted and the runs matched at each ringed; None when it was not made."""
    found = comparison.matched
    if found is None or found.reason or found.quality is None:
        return None
    unit, quality = found.unit, found.quality
    costs = [p.cost for m in found.methods for p in m.points] + list(found.budgets)
    right = max(costs) * 1.05 if max(costs) > 0 else 1.0
    logarithmic = min(costs) > 0 and max(costs) / min(costs) > 30
    matched = {(id(p.method), id(p.run)) for p in found.pairings if p.run} | {
        (id(found.reference), id(p.reference_run)) for p in found.pairings if p.reference_run
    }

    def draw(axes: Any) -> None:
        for n, method in enumerate(found.methods):
            color = f"C{n % 10}"
            axes.scatter([p.cost for p in method.points], [p.quality for p in method.points], color=color, alpha=0.35,
                         s=18)  # fmt: skip
            axes.scatter([p.cost for p in method.front], [p.quality for p in method.front], color=color, s=22)
            xs = [p.cost for p in method.front] + [right]
            ys = [p.quality for p in method.front] + [method.front[-1].quality]
            axes.step(xs, ys, where="post", color=color, label=method.name)
            on_front = {id(p) for p in method.front}
            for p in method.points:  # a run off the front greyed: it costs more than a run at least as good
                axes.annotate(p.label, (p.cost, p.quality), textcoords="offset points", xytext=(3, 3 + 7 * (n % 3)),
                              fontsize=6,  # labels of methods sharing a point stacked apart
                              color="k" if id(p) in on_front else "0.55")  # fmt: skip
            for p in method.front:
                if (id(method), id(p)) in matched:
                    axes.scatter([p.cost], [p.quality], s=110, facecolors="none", edgecolors="k", linewidths=1.2)
        for budget in found.budgets:
            axes.axvline(budget, color="0.5", linestyle=":", linewidth=0.8)
        axes.margins(y=0.12)  # room for the labels above the best runs
        if logarithmic:
            axes.set_xscale("log")
        axes.set_xlabel(f"{unit} per question")
        axes.set_ylabel(quality.header)
        axes.set_title(f"{quality.header} at equal {unit}: each method's front ({questions(comparison.groups)})",
                       fontsize=9)  # fmt: skip
        axes.legend(fontsize=8)

    return _png(draw)
