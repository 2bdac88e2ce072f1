"""`python -m hoprag.compare` over real eval run directories (made by the runner on a scripted LLM): the table,
seed collapse, paired significance, question-set refusals, and the ways runs are named on the command line."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pytest

from hoprag.compare import CompareError, build, find_runs, main, markdown_table, table_rows
from hoprag.data.types import QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, NoRetrieval
from hoprag.stats import paired_test, sign_flip_p

N = 50


def eval_run(path: Path, right: Iterable[int], overrides: Sequence[str] = (), n: int = N) -> dict:
    """An eval run over `n` yes/no questions (gold "yes"), answered right on the questions numbered `right`."""
    right = sorted(right)
    rules = [(rf"Is ({'|'.join(map(str, right))}) a number", "yes")] if right else []
    method = NoRetrieval(ScriptedLLM(rules=rules, default_reply="no"), prompt=ChatPrompt("Be brief.", "{question}"))
    examples = [QAExample(f"q{i}", f"Is {i} a number?", ["yes"]) for i in range(n)]
    metrics = run(method, examples, path)
    (path / ".hydra").mkdir()
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in ["data=fake", *overrides]))
    return metrics


def test_the_table_holds_each_runs_quality_and_cost_named_by_its_own_overrides(tmp_path, capsys):
    a = eval_run(tmp_path / "a", range(40), ["+method=a"])
    b = eval_run(tmp_path / "b", range(10), ["+method=b"])
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "out")]) == 0

    with open(tmp_path / "out" / "table.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["run"] for r in rows] == ["+method=a", "+method=b"]  # data=fake is common to both: left out
    assert [(r["n"], r["em"], r["f1"], r["acc"]) for r in rows] == [("50", "80.0", "80.0", "80.0"),
                                                                     ("50", "20.0", "20.0", "20.0")]  # fmt: skip
    for row, metrics in zip(rows, (a, b)):
        assert row["cost/mean/llm_calls"] == "1.00" and row["cost/mean/retrieval_calls"] == "0.00"
        assert float(row["cost/mean/prompt_tokens"]) == metrics["cost/mean/prompt_tokens"] > 0
        assert row["cost/mean/completion_tokens"] == "1.0" and row["em_std"] == ""
        assert float(row["cost/mean/seconds/total"]) == pytest.approx(metrics["cost/mean/seconds/total"], abs=1e-3)
    printed = capsys.readouterr().out
    assert "| run | n | EM | F1 | Acc | LLM calls | prompt tok | compl. tok | retrievals | s/question |" in printed
    assert "| +method=a | 50 | 80.0 | 80.0 | 80.0 | 1.00 |" in printed
    assert (tmp_path / "out" / "report.md").read_text() in printed


def test_runs_that_differ_only_by_seed_collapse_to_mean_and_std(tmp_path):
    eval_run(tmp_path / "a1", range(40), ["+method=a", "seed=1"])
    eval_run(tmp_path / "a2", range(30), ["+method=a", "seed=2"])
    eval_run(tmp_path / "b1", range(10), ["+method=b", "seed=1"])
    comparison = build([str(tmp_path / d) for d in ("a1", "a2", "b1")], resamples=500)
    rows = {r["run"]: r for r in table_rows(comparison)}
    assert rows.keys() == {"+method=a", "+method=b"}
    assert (rows["+method=a"]["runs"], rows["+method=a"]["em"], rows["+method=a"]["em_std"]) == ("2", "70.0", "14.1")
    assert (rows["+method=b"]["runs"], rows["+method=b"]["em_std"]) == ("1", "")
    assert "| +method=a | 2 | 50 | 70.0 ± 14.1 |" in markdown_table(comparison)
    em = next(s.test for s in comparison.significance if s.column.key == "em")  # b against a's seed mean
    assert (em.n, em.mean_a, em.mean_b) == (N, 70.0, 20.0)


def test_a_large_difference_is_significant_and_an_identical_pair_is_not(tmp_path):
    eval_run(tmp_path / "good", range(40), ["+method=good"])
    eval_run(tmp_path / "bad", range(5), ["+method=bad"])
    eval_run(tmp_path / "same", range(40), ["+method=same"])
    comparison = build([str(tmp_path / d) for d in ("bad", "good", "same")], baseline="+method=good")
    assert comparison.baseline.name == "+method=good"
    tests = {(s.run, s.column.key): s.test for s in comparison.significance}

    worse = tests["+method=bad", "em"]
    assert worse.n == N and worse.diff == pytest.approx(-70.0)
    assert worse.p < 0.01 and worse.ci_high < 0 < -worse.ci_low

    same = tests["+method=same", "em"]
    assert (same.n, same.diff, same.p, same.ci_low, same.ci_high) == (N, 0.0, 1.0, 0.0, 0.0)
    assert tests["+method=same", "cost/mean/llm_calls"].p == 1.0


def test_different_question_sets_are_refused_unless_intersected(tmp_path, capsys):
    eval_run(tmp_path / "all", range(40), ["limit=50"])
    eval_run(tmp_path / "some", range(40), ["limit=30"], n=30)
    dirs = [str(tmp_path / "all"), str(tmp_path / "some")]
    with pytest.raises(
        CompareError, match=r"answered 30 questions and the baseline 'limit=50' 50, 30 of them .*--intersect"
    ):
        build(dirs)
    with pytest.raises(SystemExit) as stop:
        main(dirs)
    assert stop.value.code == 2 and "--intersect" in capsys.readouterr().err

    em = next(s.test for s in build(dirs, intersect=True).significance if s.column.key == "em")
    assert (em.n, em.mean_a, em.mean_b, em.p) == (30, 100.0, 100.0, 1.0)  # the shared 30 only


def test_seeds_over_different_questions_are_refused_unless_intersected(tmp_path):
    eval_run(tmp_path / "a1", range(50), ["+method=a", "seed=1"])
    eval_run(tmp_path / "a2", range(20), ["+method=a", "seed=2"], n=20)
    eval_run(tmp_path / "b", range(50), ["+method=b"])
    dirs = [str(tmp_path / d) for d in ("b", "a1", "a2")]
    with pytest.raises(CompareError, match="the seeds of '\\+method=a' answered different questions"):
        build(dirs)
    em = next(s.test for s in build(dirs, intersect=True, resamples=200).significance if s.column.key == "em")
    assert (em.n, em.mean_b) == (20, 100.0)


def test_a_multirun_folder_and_a_glob_name_the_same_runs_in_job_order(tmp_path, caplog):
    sweep = tmp_path / "sweep"
    for job, right in zip((0, 1, 10, 2), (range(10), range(20), range(30), range(40))):
        eval_run(sweep / str(job), right, [f"+method=m{job}"], n=10)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    (sweep / "3").mkdir()
    (sweep / "3" / "predictions.jsonl").write_text("")  # a job that died before writing metrics.json
    expected = [(sweep / j).resolve() for j in ("0", "1", "2", "10")]

    assert find_runs([str(sweep)]) == expected
    assert "skipping" in caplog.text and str(sweep / "3") in caplog.text
    assert find_runs([str(sweep / "*")]) == expected
    assert find_runs([str(sweep / "1"), str(sweep)]) == [expected[1], expected[0], *expected[2:]]  # once each
    names = [g.name for g in build([str(sweep)], resamples=200).groups]
    assert names == ["+method=m0", "+method=m1", "+method=m2", "+method=m10"]

    with pytest.raises(CompareError, match="has not finished"):
        find_runs([str(sweep / "3")])
    with pytest.raises(CompareError, match="no run directory, multirun directory or glob match"):
        find_runs([str(tmp_path / "nothing*")])


def test_unknown_baseline_lists_the_runs(tmp_path):
    eval_run(tmp_path / "a", range(5), ["+method=a"], n=5)
    eval_run(tmp_path / "b", range(5), ["+method=b"], n=5)
    with pytest.raises(CompareError, match=r"--baseline 'c' is none of the runs:\n  \+method=a\n  \+method=b"):
        build([str(tmp_path / "a"), str(tmp_path / "b")], baseline="c")
    assert build([str(tmp_path / "a"), str(tmp_path / "b")], baseline="b").baseline.name == "+method=b"  # by folder


def test_a_run_without_its_predictions_cannot_be_tested(tmp_path):
    eval_run(tmp_path / "a", range(5), ["+method=a"], n=5)
    eval_run(tmp_path / "b", range(5), ["+method=b"], n=5)
    (tmp_path / "b" / "predictions.jsonl").unlink()
    with pytest.raises(CompareError, match="predictions.jsonl not found.*paired tests read"):
        build([str(tmp_path / "a"), str(tmp_path / "b")])


def test_the_sign_flip_p_value_matches_exact_enumeration():
    diffs = np.array([1.0, 2.0, 0.5, 1.5, -0.5, 1.0])
    flips = [np.array(s) @ diffs for s in itertools.product((-1, 1), repeat=len(diffs))]
    exact = np.mean([abs(f) >= abs(diffs.sum()) - 1e-12 for f in flips])
    assert sign_flip_p(diffs, resamples=20_000) == pytest.approx(exact, abs=0.01)


def test_the_bootstrap_interval_covers_the_mean_and_is_seeded():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0, 1, 200), rng.normal(0.3, 1, 200)
    test = paired_test(a, b, resamples=2000, seed=3)
    assert test.ci_low < test.diff < test.ci_high and test.diff == pytest.approx(float(np.mean(b - a)))
    assert paired_test(a, b, resamples=2000, seed=3) == test
    with pytest.raises(ValueError, match="one length"):
        paired_test([1.0], [1.0, 2.0])
