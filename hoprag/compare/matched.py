"""Budget-matched comparison (issue 46): methods compared at equal cost, each swept over its own budget knob.

    python compare.py <runs of several methods>... [--cost tokens|passages|calls|seconds] [--budgets 2000,4000]
                      [--metric f1] [--baseline RUN]

- **Methods.** A method is the method a run names (metrics.json `run.method`, else its `+method=` or
  `+experiment=` choice) together with the overrides whose value is not a number and that differ across the
  runs (`retriever=bm25`, `+experiment=prunerag_wo_con`, `llm=...`): such a setting is another method, not
  another budget. The numeric overrides that differ (`method.k=1,3,5`, `method.max_turns=`, PruneRAG's τ, a
  number of samples or simulations) are its budget knobs, and each of its table rows (a run, or a seed group)
  is one point of the method, named by those knobs.
- **Cost and quality.** A point's cost is its runs' mean per-question cost of the measure (`--cost`): prompt +
  completion tokens (default), passages read, LLM calls or seconds (`cost/mean/...` of metrics.json); its
  quality is the comparison's main quality column (F1, else passage recall; `--metric` picks another), both as
  the table shows them (metrics.json, mean over seeds).
- **Front.** A method's Pareto front is its points that no other of its points beats at no more cost
  (`plots.pareto_front`); quality against cost is then a step function: at budget B the method is worth its
  best front point costing at most B (`at_budget`). Nothing is interpolated between two runs: a paired test
  needs per-question scores that some run really produced, and a run between two budgets produced none. A
  budget below a method's cheapest run has no match, and the table says so instead of guessing.
- **Budgets.** By default every front point's cost at which the reference method and at least one other method
  both have a run: the budgets at which the matched runs change, so no distinct matching is left out.
  `--budgets 2000,4000` sets them (in the measure's unit, per question).
- **Tests.** At each budget, each other method's matched run is paired against the reference method's matched
  run (the baseline's method: `--baseline` picks it, else the first run's) over the questions both answered
  alike (`groups.shared_questions`, `--intersect` as for the main tests), with the main tests' machinery
  (`significance.paired_tests`, `hoprag.stats`): Δ = method − reference, a bootstrap 95% CI and a sign-flip
  permutation p. A sentence names each difference both tests find (CI excluding 0 and p < 0.05, `verdicts`).
- **When.** Only with at least two methods that have a point each, at least one of them swept (two or more
  points: otherwise the main paired tests already compare the runs as they are), and some run spending the
  measure; otherwise nothing is drawn and the report says why in one line (`Matched.reason`).

`match` computes it (pure: no drawing); `header`, `cells`, `verdicts` and `csv_rows` show it (`render` and `page`
put them in report.md and report.html, `cli` writes matched.csv); the plot is `plots.matched_cost_plot`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from hoprag.compare.columns import Column
from hoprag.compare.comparison import Comparison
from hoprag.compare.groups import Group, shared_questions
from hoprag.compare.plots import _number, _settings, _varied, pareto_front, quality_column
from hoprag.compare.provenance import questions
from hoprag.compare.runs import CompareError
from hoprag.compare.significance import paired_tests
from hoprag.stats import PairedTest


@dataclass(frozen=True)
class Measure:
    """A cost measure: the metrics.json keys summed into a question's cost, its unit and how a figure shows."""

    keys: tuple[str, ...]
    unit: str
    digits: int


MEASURES = {
    "tokens": Measure(("cost/mean/prompt_tokens", "cost/mean/completion_tokens"), "tokens", 0),
    "passages": Measure(("cost/mean/passages_read",), "passages", 1),
    "calls": Measure(("cost/mean/llm_calls",), "LLM calls", 2),
    "seconds": Measure(("cost/mean/seconds/total",), "seconds", 3),
}
DEFAULT_MEASURE = "tokens"


@dataclass(frozen=True)
class Point:
    """One table row (a run or a seed group) of a method: its name within the method (its budget knobs), its
    mean per-question cost and its quality, as the table shows them."""

    group: Group
    label: str
    cost: float
    quality: float


@dataclass
class Method:
    """A method's points by rising cost, and its Pareto front (by rising cost)."""

    name: str
    points: list[Point]
    front: list[Point] = field(default_factory=list)


@dataclass(frozen=True)
class Pairing:
    """At `budget`: the reference method's and `method`'s matched runs (None: none costs at most the budget)
    and the paired test of `method`'s run against the reference's (None: a side has no run, or the quality
    has no per-question figure to pair)."""

    budget: float
    method: Method
    reference_run: Point | None
    run: Point | None
    test: PairedTest | None


@dataclass
class Matched:
    """The budget-matched comparison: the measure, the quality column, the methods and the reference among
    them, the budgets and one `Pairing` per budget and other method; `reason` says why it was not made ("" when
    it was), `notes` what it left out."""

    measure: str
    quality: Column | None
    methods: list[Method]
    reference: Method | None
    budgets: list[float]
    pairings: list[Pairing]
    resamples: int
    reason: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def unit(self) -> str:
        return MEASURES[self.measure].unit


# -- the front and the matching rule ----------------------------------------------------------------------------


def front(points: Sequence[Point]) -> list[Point]:
    """The points no other point beats at no more cost (`plots.pareto_front`), by rising cost."""
    return [points[i] for i in pareto_front([(p.cost, p.quality) for p in points])]


def at_budget(points: Sequence[Point], budget: float) -> Point | None:
    """The step function of a front: the best point costing at most `budget` (the cheapest of equals), None
    when every point costs more. Never a point between two runs: none was run there."""
    within = [p for p in points if p.cost <= budget]
    return max(within, key=lambda p: p.quality) if within else None


def default_budgets(reference: Method, others: Sequence[Method]) -> list[float]:
    """Every front point's cost at which the reference and at least one other method both have a run: the
    budgets at which the matched runs change."""
    costs = sorted({p.cost for m in (reference, *others) for p in m.front})
    return [b for b in costs if at_budget(reference.front, b) and any(at_budget(m.front, b) for m in others)]


def parse_budgets(text: str) -> list[float]:
    """`--budgets 2000,4000` as numbers (each ≥ 0), sorted."""
    try:
        budgets = sorted(float(b) for b in text.split(",") if b.strip())
    except ValueError:
        raise CompareError(f"--budgets {text!r}: give numbers separated by commas, e.g. 2000,4000") from None
    if not budgets or any(not math.isfinite(b) or b < 0 for b in budgets):
        raise CompareError(f"--budgets {text!r}: give one or more numbers ≥ 0, separated by commas")
    return budgets


# -- methods and their points -----------------------------------------------------------------------------------


def group_cost(group: Group, measure: Measure) -> float | None:
    """The group's mean per-question cost: the sum of the measure's keys, each its runs' mean (None when a run
    lacks one)."""
    values = [group.values(k) for k in measure.keys]
    if any(len(v) != len(group.runs) for v in values):
        return None
    return sum(statistics.fmean(v) for v in values)


def methods(groups: Sequence[Group], measure: Measure, quality: Column) -> tuple[list[Method], list[str]]:
    """The groups as methods (see the module's docstring), in the order their first group appears, each with its
    points and front; and the names of the groups placed nowhere (no cost or quality figure)."""
    settings = [_settings(g) for g in groups]
    differing, _ = _varied(settings)
    found: dict[str, list[Point]] = {}
    unplaced = []
    for group, own in zip(groups, settings):
        info = getattr(group.runs[0], "info", {})
        method = str(info.get("method") or own.get("method") or own.get("experiment") or "")
        variant = [f"{k}={own[k]}" for k in differing if k in own and _number(own[k]) is None and own[k] != method]
        name = f"{method} ({', '.join(variant)})" if method and variant else method or ", ".join(variant) or group.name
        cost, values = group_cost(group, measure), group.values(quality.key)
        if cost is None or not values:
            unplaced.append(group.name)
            continue
        knobs = ",".join(f"{k}={own[k]}" for k in differing if k in own and _number(own[k]) is not None)
        found.setdefault(name, []).append(Point(group, knobs or group.name, cost, statistics.fmean(values)))
    result = [Method(name, sorted(points, key=lambda p: (p.cost, -p.quality))) for name, points in found.items()]
    for m in result:
        m.front = front(m.points)
    return result, unplaced


def pick_quality(comparison: Comparison, metric: str | None) -> Column | None:
    """The column named `metric` (its key or header, any case), else the comparison's main quality column
    (`plots.quality_column`); a name that is no paired-testable quality column is refused, listing them."""
    if metric is None:
        return quality_column(comparison)
    testable = [c for c in comparison.columns if not c.key.startswith("cost/") and c.per_question is not None]
    for c in testable:
        if metric.lower() in (c.key.lower(), c.header.lower()):
            return c
    listed = ", ".join(c.key for c in testable) or "none"
    raise CompareError(f"--metric {metric!r} is no paired-testable quality column of these runs: {listed}")


# -- the comparison ---------------------------------------------------------------------------------------------


def match(
    comparison: Comparison,
    measure: str = DEFAULT_MEASURE,
    budgets: Sequence[float] | None = None,
    metric: str | None = None,
    intersect: bool = False,
    resamples: int | None = None,
    seed: int = 0,
) -> Matched:
    """The budget-matched comparison of the comparison's eval groups (see the module's docstring)."""
    if measure not in MEASURES:
        raise CompareError(f"--cost {measure!r}: choose one of {', '.join(MEASURES)}")
    resamples = comparison.resamples if resamples is None else resamples
    quality = pick_quality(comparison, metric) if comparison.groups else None
    unit = MEASURES[measure].unit

    def undone(reason: str, found: Sequence[Method] = ()) -> Matched:
        return Matched(measure, quality, list(found), None, [], [], resamples, reason)

    if quality is None:
        return undone("no run reports a quality metric to compare")
    spent = [group_cost(g, MEASURES[measure]) for g in comparison.groups]
    if not any(spent):
        others = [n for n, m in MEASURES.items() if n != measure and any(group_cost(g, m) for g in comparison.groups)]
        hint = f" (--cost {' or '.join(others)} measures what they spend)" if others else ""
        return undone(f"no run spends any {unit}{hint}")
    found, unplaced = methods(comparison.groups, MEASURES[measure], quality)
    notes = [f"Not placed (no {unit} or {quality.header} figure): {', '.join(unplaced)}."] if unplaced else []
    if len(found) < 2:
        alone = f" ({found[0].name})" if found else ""
        return undone(f"it needs two methods or more, and these runs are of one{alone}", found)
    if all(len(m.points) < 2 for m in found):
        return undone("no method was swept over a budget (one run each): the paired tests above compare the runs "
                      "as they are", found)  # fmt: skip
    base = comparison.baseline
    reference = next((m for m in found if any(p.group is base for p in m.points)), found[0])
    others = [m for m in found if m is not reference]
    chosen = list(budgets) if budgets is not None else default_budgets(reference, others)
    pairings = []
    for budget in chosen:
        ref_run = at_budget(reference.front, budget)
        for m in others:
            run = at_budget(m.front, budget)
            test = None
            if ref_run is not None and run is not None:
                ids, dropped = shared_questions(run.group, ref_run.group, intersect)
                notes += dropped
                tests = paired_tests(run.group, ref_run.group, ids, [quality], resamples, seed)
                test = tests[0].test if tests else None
            pairings.append(Pairing(budget, m, ref_run, run, test))
    if quality.per_question is None:
        notes.append(f"{quality.header} has no per-question figure: the matched runs are not paired-tested.")
    return Matched(measure, quality, found, reference, chosen, pairings, resamples, "", list(dict.fromkeys(notes)))


# -- as text ----------------------------------------------------------------------------------------------------


def figure(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def run_cell(matched: Matched, point: Point | None) -> str:
    """A matched run as shown: its knobs, then (cost, quality); "none ≤ budget" without one."""
    if point is None:
        return "none within budget"
    quality: Column = matched.quality  # type: ignore[assignment]
    cost = figure(point.cost, MEASURES[matched.measure].digits)
    return f"{point.label} ({cost}; {point.quality:.{quality.digits}f})"


def header(matched: Matched) -> list[str]:
    quality: Column = matched.quality  # type: ignore[assignment]
    level = next((round(100 * p.test.level) for p in matched.pairings if p.test), 95)
    reference: Method = matched.reference  # type: ignore[assignment]
    run = f"run ({matched.unit}; {quality.header})"
    return [f"≤ {matched.unit}/question", f"{reference.name} {run}", "method", run, "shared", f"Δ {quality.header}",
            f"{level}% CI", "p"]  # fmt: skip


def cells(matched: Matched) -> list[list[str]]:
    """One row per budget and other method: the budget, both matched runs, and the test ("–" without one)."""
    quality: Column = matched.quality  # type: ignore[assignment]
    d, rows = quality.digits + 1, []
    for p in matched.pairings:
        t, tested = p.test, ["–"] * 4
        if t is not None:
            tested = [str(t.n), f"{t.diff:+.{d}f}", f"[{t.ci_low:+.{d}f}, {t.ci_high:+.{d}f}]", f"{t.p:.4f}"]
        rows.append([figure(p.budget, MEASURES[matched.measure].digits), run_cell(matched, p.reference_run),
                     p.method.name, run_cell(matched, p.run), *tested])  # fmt: skip
    return rows


def _side(point: Point | None, prefix: str) -> dict[str, str]:
    """A matched run's CSV cells: its table name, cost and quality ("" without one)."""
    if point is None:
        return {f"{prefix}run": "", f"{prefix}cost": "", f"{prefix}quality": ""}
    cost, quality = f"{point.cost:g}", f"{point.quality:g}"
    return {f"{prefix}run": point.group.name, f"{prefix}cost": cost, f"{prefix}quality": quality}


def csv_rows(matched: Matched) -> list[dict[str, str]]:
    """The pairings as `matched.csv` holds them (figures unrounded but the test's, "" where there is none)."""
    rows = []
    metric, reference = matched.quality.key, matched.reference.name  # type: ignore[union-attr]
    for p in matched.pairings:
        t = p.test
        rows.append({
            "measure": matched.measure, "budget": f"{p.budget:g}", "metric": metric,
            "reference": reference, **_side(p.reference_run, "reference_"),
            "method": p.method.name, **_side(p.run, ""),
            "shared": str(t.n) if t else "", "diff": f"{t.diff:+.4f}" if t else "",
            "ci_low": f"{t.ci_low:+.4f}" if t else "", "ci_high": f"{t.ci_high:+.4f}" if t else "",
            "p": f"{t.p:.4f}" if t else "",
        })  # fmt: skip
    return rows


def intro(matched: Matched, reference: str) -> str:
    """What the table compares (`reference`: the reference method's name as the page shows it)."""
    quality: Column = matched.quality  # type: ignore[assignment]
    names = ", ".join(m.name for m in matched.methods)
    return (f"Budget-matched comparison of {quality.header} at equal {matched.unit} per question: each method's "
            f"Pareto front over its own runs (metrics.json means; methods: {names}). "
            f"At each budget a method is its best front run costing at most the budget (a step: nothing is "
            f"interpolated, and no run under the budget is no match); each method is paired against {reference} "
            "over the questions both matched runs answered alike: Δ = method − reference, bootstrap CI and "
            f"sign-flip permutation p ({matched.resamples} resamples).")  # fmt: skip


def verdicts(matched: Matched) -> list[str]:
    """One sentence per test whose CI excludes 0 and whose p is below 1 − its level (both tests agree), e.g. "At
    ≤ 2,000 tokens a question, ircot beats standard_rag on F1: +3.10 [+0.80, +5.40] (p 0.012)."; one line saying
    so when no test does."""
    quality: Column = matched.quality  # type: ignore[assignment]
    d, said = quality.digits + 1, []
    for p in matched.pairings:
        t = p.test
        if t is None or t.ci_low <= 0 <= t.ci_high or t.p >= 1 - t.level:
            continue
        verb = "beats" if t.diff > 0 else "loses to"
        budget = figure(p.budget, MEASURES[matched.measure].digits)
        said.append(f"At ≤ {budget} {matched.unit} a question, {p.method.name} {verb} "
                    f"{matched.reference.name} on {quality.header}: {t.diff:+.{d}f} "  # type: ignore[union-attr]
                    f"[{t.ci_low:+.{d}f}, {t.ci_high:+.{d}f}] (p {t.p:.3g}).")  # fmt: skip
    tested = [p.test for p in matched.pairings if p.test]
    if not said and tested:
        level = tested[0].level
        said.append(f"No matched difference is significant (a {round(100 * level)}% CI that excludes 0 and "
                    f"p < {1 - level:.2g}).")  # fmt: skip
    return said


def reason_line(matched: Matched) -> str:
    return f"Budget-matched comparison ({matched.unit}): not made: {matched.reason}."


def caption(matched: Matched, groups: Sequence[Group]) -> str:
    quality: Column = matched.quality  # type: ignore[assignment]
    return (f"{quality.header} against {matched.unit} per question ({questions(groups)}): each method's runs, its "
            "Pareto front as a step (the matching rule); ringed: the runs matched at each budget (dotted)")  # fmt: skip
