"""The budget-matched comparison (`hoprag.compare.matched`, issue 46): each method's Pareto front over its own
runs, the matched-cost step function (never an interpolated run; no run under a budget is no match), the paired
test of the matched runs on a constructed example whose answer is known, when it is not made and why, and
`compare.py` writing its table, CSV and plot from run directories."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from hoprag.compare import CompareError, Comparison, Group, Question, Run, main, table_columns
from hoprag.compare.matched import (
    MEASURES,
    Method,
    Point,
    at_budget,
    default_budgets,
    front,
    match,
    methods,
    parse_budgets,
)
from hoprag.compare.plots import matched_cost_plot
from hoprag.compare.render import markdown_matched
from tests.unit.test_compare import squeezed

PNG = b"\x89PNG\r\n\x1a\n"
N = 20


def point(label: str, cost: float, quality: float) -> Point:
    return Point(Group(label, []), label, cost, quality)


def run(method: str, overrides: Sequence[str], f1: Sequence[float], tokens: float, **extra: float) -> Group:
    """A one-run group of `method`: per-question F1 `f1` (0..1) over questions q0.., `tokens` prompt tokens a
    question (and 10 completion tokens), its metrics.json as the runner writes it."""
    metrics = {"n": len(f1), "f1": 100 * sum(f1) / len(f1), "cost/mean/prompt_tokens": tokens,
               "cost/mean/completion_tokens": 10.0, "cost/mean/seconds/total": 0.5, **extra}  # fmt: skip
    per_question = {f"q{i}": {"f1": float(s), "prompt_tokens": tokens, "completion_tokens": 10.0}
                    for i, s in enumerate(f1)}  # fmt: skip
    asked = {f"q{i}": Question(f"question {i}?", frozenset({"yes"})) for i in range(len(f1))}
    path = Path("/runs") / "_".join(o.lstrip("+").replace("/", "_") for o in overrides)
    one = Run(path, list(overrides), metrics, info={"method": method, "n": len(f1)},
              _per_question=per_question, _questions=asked)  # fmt: skip
    return Group(",".join(overrides), [one])


def comparison(*groups: Group, resamples: int = 500) -> Comparison:
    return Comparison(list(groups), groups[0], table_columns(groups), [], resamples)


# -- the front and the step function ----------------------------------------------------------------------------


def test_a_methods_front_keeps_the_runs_no_cheaper_run_of_it_beats():
    points = [point("k=1", 100, 20.0), point("k=3", 300, 35.0), point("k=5", 500, 30.0), point("k=4", 400, 40.0)]
    assert [p.label for p in front(points)] == ["k=1", "k=3", "k=4"]  # k=5 costs more than k=4 for less
    assert front([]) == []


def test_matching_is_the_fronts_step_function_never_an_interpolated_run():
    steps = front([point("k=1", 100, 20.0), point("k=3", 300, 35.0), point("k=5", 500, 45.0)])
    assert at_budget(steps, 99.9) is None  # below every run: no match, not a guess
    assert at_budget(steps, 0) is None
    assert at_budget(steps, 100).label == "k=1"  # a run costing exactly the budget is within it
    assert at_budget(steps, 299).label == "k=1"  # between two runs: the cheaper run, not a mixture of both
    assert at_budget(steps, 300).label == "k=3"
    assert at_budget(steps, 10_000).label == "k=5"
    assert at_budget([], 10_000) is None
    tied = [point("a", 100, 30.0), point("b", 100, 30.0)]  # equal runs both stay on the front: the first counts
    assert at_budget(front(tied), 100).label == "a"


def test_default_budgets_are_where_the_matched_runs_change_and_both_sides_have_one():
    ref = Method("a", [], front([point("a1", 100, 20.0), point("a3", 300, 30.0)]))
    other = Method("b", [], front([point("b1", 50, 10.0), point("b2", 200, 25.0), point("b3", 400, 40.0)]))
    assert default_budgets(ref, [other]) == [100, 200, 300, 400]  # 50: the reference has no run yet
    dear = Method("c", [], front([point("c1", 1000, 90.0)]))
    assert default_budgets(ref, [dear]) == [1000]  # under 1000 c has no run: nothing to pair


def test_budgets_from_the_command_line_are_numbers():
    assert parse_budgets("4000, 2000") == [2000.0, 4000.0]
    for bad in ("2k", "", "-5", "nan"):
        with pytest.raises(CompareError, match="--budgets"):
            parse_budgets(bad)


# -- methods ----------------------------------------------------------------------------------------------------


def test_runs_group_into_methods_by_name_and_non_numeric_settings_numeric_ones_are_budget_knobs():
    groups = [
        *(run("standard_rag", ["+method=standard_rag", f"method.k={k}"], [0.5] * 4, 100.0 * k) for k in (1, 3)),
        run("standard_rag", ["+method=standard_rag", "method.k=3", "retriever=bm25"], [0.5] * 4, 300.0),
        *(run("ircot", ["+method=ircot", f"method.max_turns={t}"], [0.5] * 4, 1000.0 * t) for t in (1, 2)),
        run("prunerag", ["+experiment=prunerag_wo_con"], [0.5] * 4, 900.0),
    ]
    found, unplaced = methods(groups, MEASURES["tokens"], table_columns(groups)[0])
    assert unplaced == []
    assert [(m.name, [p.label for p in m.points]) for m in found] == [
        ("standard_rag", ["method.k=1", "method.k=3"]),
        ("standard_rag (retriever=bm25)", ["method.k=3"]),  # another retriever is another method, not a budget
        ("ircot", ["method.max_turns=1", "method.max_turns=2"]),
        ("prunerag (experiment=prunerag_wo_con)", ["+experiment=prunerag_wo_con"]),
    ]
    assert [p.cost for p in found[2].points] == [1010.0, 2010.0]  # tokens: prompt + completion


# -- the paired test at a budget --------------------------------------------------------------------------------


def swept() -> list[Group]:
    """Method a (the baseline) at 100 and 300 tokens, method b at 200 and 400: b's cheap run is 10 points better
    than a's cheap run on every question; b's dear run is a's dear run, question for question."""
    a1, a3 = [0.2, 0.4] * (N // 2), [0.5, 0.7] * (N // 2)
    return [
        run("a", ["+method=a", "method.k=1"], a1, 90.0),
        run("a", ["+method=a", "method.k=3"], a3, 290.0),
        run("b", ["+method=b", "method.n=1"], [s + 0.1 for s in a1], 190.0),
        run("b", ["+method=b", "method.n=2"], a3, 390.0),
    ]


def test_the_matched_runs_are_paired_on_their_questions_with_the_known_difference():
    found = match(comparison(*swept()), "tokens", [50, 250, 1000], resamples=500)
    assert found.reason == "" and found.reference.name == "a" and found.quality.key == "f1"
    below, mid, high = found.pairings
    assert (below.reference_run, below.run, below.test) == (None, None, None)  # no run under 50 tokens
    assert (mid.reference_run.label, mid.run.label) == ("method.k=1", "method.n=1")
    t = mid.test
    assert (t.n, t.mean_a, t.mean_b, t.diff) == pytest.approx((N, 30.0, 40.0, 10.0))
    assert (t.ci_low, t.ci_high) == pytest.approx((10.0, 10.0))  # the same +10 on every question
    assert t.p == pytest.approx(1 / 501)  # no sign flip reaches it but all-same signs (2 in 2^20)
    assert (high.reference_run.label, high.run.label) == ("method.k=3", "method.n=2")
    assert (high.test.diff, high.test.p) == (0.0, 1.0)

    shown = squeezed(markdown_matched(Comparison([], None, [], [], 0, matched=found)))
    assert "| ≤ tokens/question | a run (tokens; F1) | method | run (tokens; F1) | shared | Δ F1 | 95% CI | p |" in (
        shown
    )
    row = "| 250 | method.k=1 (100; 30.0) | b | method.n=1 (200; 40.0) | 20 | +10.00 | [+10.00, +10.00] | 0.0020 |"
    assert row in shown
    assert "| 50 | none within budget | b | none within budget | – | – | – | – |" in shown
    assert "At ≤ 250 tokens a question, b beats a on F1: +10.00 [+10.00, +10.00]" in shown


def test_a_noisy_difference_has_its_mean_inside_the_interval_and_default_budgets_cover_every_matching():
    a1 = [0.0, 1.0, 0.5, 0.25] * 5
    b1 = [0.5, 0.75, 0.5, 0.5] * 5  # +0.5, -0.25, 0, +0.25: mean +0.125 → +12.5 F1
    groups = [run("a", ["+method=a", "k=1"], a1, 100.0), run("a", ["+method=a", "k=2"], [1.0] * 20, 300.0),
              run("b", ["+method=b", "k=1"], b1, 100.0)]  # fmt: skip
    found = match(comparison(*groups), "tokens", resamples=2000)
    assert found.budgets == [110.0, 310.0]  # the front costs where a and b both have a run
    first = found.pairings[0].test
    assert first.diff == pytest.approx(12.5) and first.ci_low < 12.5 < first.ci_high
    assert found.pairings[1].reference_run.label == "k=2" and found.pairings[1].test.diff == pytest.approx(-43.75)


def test_the_metric_flag_picks_a_paired_quality_column_or_lists_them():
    groups = swept()
    assert match(comparison(*groups), metric="F1", resamples=100).quality.key == "f1"
    with pytest.raises(CompareError, match=r"--metric 'em' is no paired-testable quality column .*: f1"):
        match(comparison(*groups), metric="em")
    with pytest.raises(CompareError, match="--cost 'money'"):
        match(comparison(*groups), "money")


def test_it_is_not_made_without_two_methods_a_sweep_or_a_cost_and_says_why():
    one = [run("a", ["+method=a", f"k={k}"], [0.5] * 4, 100.0 * k) for k in (1, 2)]
    assert match(comparison(*one)).reason == "it needs two methods or more, and these runs are of one (a)"
    unswept = [run("a", ["+method=a"], [0.5] * 4, 100.0), run("b", ["+method=b"], [0.5] * 4, 200.0)]
    found = match(comparison(*unswept))
    assert found.reason.startswith("no method was swept over a budget") and matched_cost_plot(
        Comparison([], None, [], [], 0, matched=found)) is None  # fmt: skip
    free = match(comparison(*swept()), "passages")  # no run reads a passage
    assert free.reason == "no run spends any passages (--cost tokens or seconds measures what they spend)"
    assert markdown_matched(Comparison([], None, [], [], 0, matched=free)) == (
        "Budget-matched comparison (passages): not made: no run spends any passages (--cost tokens or seconds "
        "measures what they spend)."
    )
    assert markdown_matched(Comparison([], None, [], [], 0)) == ""  # not computed: nothing said


def test_the_plot_is_a_png_with_the_fronts():
    found = match(comparison(*swept()), resamples=100)
    assert matched_cost_plot(Comparison(swept(), None, [], [], 0, matched=found)).startswith(PNG)


# -- compare.py over run directories ----------------------------------------------------------------------------


def run_dir(path: Path, method: str, overrides: Sequence[str], right: int, tokens: int, n: int = N) -> None:
    """An eval run directory of `method` answering the first `right` of `n` questions right, at `tokens` prompt
    tokens a question (records, metrics.json and Hydra's overrides as eval.py leaves them)."""
    records = []
    for i in range(n):
        score = float(i < right)
        cost = {"llm_calls": 1, "prompt_tokens": tokens, "completion_tokens": 10, "retrieval_calls": 1,
                "passages_read": tokens // 100, "seconds": {"answer": 0.1}}  # fmt: skip
        records.append({"id": f"q{i}", "method": method, "question": f"Is {i} a number?", "prediction": "",
                        "golds": ["yes"], "gold_titles": [], "gold_passages": [], "retrieved": [],
                        "scores": {"em": score, "f1": score}, "cost": cost, "stats": {}})  # fmt: skip
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in ["data=fake", *overrides]))
    (path / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    metrics = {"n": n, "em": 100 * right / n, "f1": 100 * right / n, "cost/mean/llm_calls": 1.0,
               "cost/mean/prompt_tokens": float(tokens), "cost/mean/completion_tokens": 10.0,
               "cost/mean/retrieval_calls": 1.0, "cost/mean/passages_read": float(tokens // 100),
               "cost/mean/seconds/total": 0.1}  # fmt: skip
    (path / "metrics.json").write_text(json.dumps({"run": {"method": method, "n": n}, "metrics": metrics}))


def test_compare_writes_the_matched_table_csv_and_plot_from_sweeps(tmp_path, capsys):
    sweep_a, sweep_b = tmp_path / "sweep_a", tmp_path / "sweep_b"
    for job, (k, right, tokens) in enumerate(((1, 4, 490), (3, 8, 1490), (5, 9, 2490))):
        run_dir(sweep_a / str(job), "standard_rag", ["+method=standard_rag", f"method.k={k}"], right, tokens)
    for job, (turns, right, tokens) in enumerate(((1, 6, 990), (2, 14, 1990))):
        run_dir(sweep_b / str(job), "ircot", ["+method=ircot", f"method.max_turns={turns}"], right, tokens)
    out = tmp_path / "out"
    args = [str(sweep_a), str(sweep_b), "--out", str(out), "--resamples", "200"]
    assert main([*args, "--budgets", "2000,500,400"]) == 0

    printed = squeezed(capsys.readouterr().out)
    assert "Budget-matched comparison of F1 at equal tokens per question" in printed
    assert ("| 2,000 | method.k=3 (1,500; 40.0) | ircot | method.max_turns=2 (2,000; 70.0) | 20 | +30.00 |"
            in printed)  # fmt: skip
    assert "| 400 | none within budget | ircot | none within budget | – |" in printed
    assert "| 500 | method.k=1 (500; 20.0) | ircot | none within budget | – |" in printed
    assert "At ≤ 2,000 tokens a question, ircot beats standard_rag on F1: +30.00" in printed
    with open(out / "matched.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["budget"], r["reference_run"], r["run"], r["shared"]) for r in rows] == [
        ("400", "", "", ""),
        ("500", "+method=standard_rag,method.k=1", "", ""),
        ("2000", "+method=standard_rag,method.k=3", "+method=ircot,method.max_turns=2", "20"),
    ]
    assert (out / "matched_cost.png").read_bytes().startswith(PNG)
    page = (out / "report.html").read_text()
    assert "<h3>Budget-matched comparison</h3>" in page and "<td>method.max_turns=2 (2,000; 70.0)</td>" in page

    assert main([*args, "--cost", "passages"]) == 0  # the default budgets: where the matched runs change
    printed = squeezed(capsys.readouterr().out)
    assert "Budget-matched comparison of F1 at equal passages per question" in printed
    with open(out / "matched.csv", newline="") as f:
        assert [r["budget"] for r in csv.DictReader(f)] == ["9", "14", "19", "24"]

    assert main([str(sweep_a / "0"), str(sweep_b / "0"), "--out", str(out), "--resamples", "50"]) == 0
    assert "Budget-matched comparison (tokens): not made: no method was swept" in capsys.readouterr().out
    assert not (out / "matched_cost.png").exists() and not (out / "matched.csv").exists()  # stale ones removed


def test_bad_budgets_are_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path), "--budgets", "cheap"])
    assert stop.value.code == 2 and "--budgets 'cheap': give numbers" in capsys.readouterr().err
