"""`python compare.py` (hoprag.compare) over real eval run directories (made by the runner on a scripted LLM): the table,
seed collapse, paired significance, question-set refusals, and the ways runs are named on the command line;
over hand-written retrieval records (per-question passage recall) and train run directories (Lightning CSV
logs); and the self-contained HTML report."""

from __future__ import annotations

import csv
import itertools
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pytest

from hoprag.compare import CompareError, TrainRun, build, find_runs, main, markdown_table, table_rows
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


def squeezed(text: str) -> str:
    """The report with its table padding collapsed: cells compared by content and order."""
    return re.sub(r" {2,}", " ", re.sub(r"\|-+", "|---", text))


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
        assert row["cost/mean/llm_calls"] == "1.00" and "cost/mean/retrieval_calls" not in row  # 0 in every run
        assert float(row["cost/mean/prompt_tokens"]) == metrics["cost/mean/prompt_tokens"] > 0
        assert row["cost/mean/completion_tokens"] == "1.0" and row["em_std"] == ""
        assert float(row["cost/mean/seconds/total"]) == pytest.approx(metrics["cost/mean/seconds/total"], abs=1e-3)
    raw = capsys.readouterr().out
    printed = squeezed(raw)
    assert "| run | n | EM | F1 | Acc | LLM calls | prompt tok | compl. tok | s/question |" in printed
    assert "| +method=a | 50 | 80.0 | 80.0 | 80.0 | 1.00 |" in printed
    assert (tmp_path / "out" / "report.md").read_text() in raw
    lines = raw.splitlines()
    table = lines[lines.index(next(line for line in lines if re.match(r"\| run +\| +n \|", line))) :][:4]
    assert table[2].startswith("| +method=a ") and table[3].startswith("| +method=b ")
    assert len({len(line) for line in table}) == 1  # padded: the columns align (header, rule, rows)
    assert "Columns not shown: retrievals, passages: 0 in every run." in printed


def test_the_report_says_when_how_and_from_what_it_was_made(tmp_path, capsys):
    eval_run(tmp_path / "a", range(40), ["+method=a"])
    eval_run(tmp_path / "b", range(10), ["+method=b"])
    hydra = "hydra:\n  job:\n    name: eval\n  overrides:\n    hydra:\n    - hydra.run.dir=logs/x\n    - hydra.mode=RUN\n"
    (tmp_path / "a" / ".hydra" / "hydra.yaml").write_text(hydra + "    task:\n    - data=fake\n    - +method=a\n")
    (tmp_path / "a" / ".hydra" / "config.yaml").write_text("data: {}\n")  # saved when the run started
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--resamples", "100"]) == 0
    printed = capsys.readouterr().out
    first = printed.splitlines()[0]
    assert re.fullmatch(r"Made \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S* from hoprag \S+ by: python compare\.py .*/a .*/b "
                        r"--resamples 100", first)  # fmt: skip
    assert "Questions: ?, 50 questions." in printed  # the runner alone records no dataset name
    runs = printed[printed.index("Runs:") :].splitlines()[2:]
    assert runs[0] == "| run | dataset | questions | started | commit | directory | command |" and len(runs) == 4
    assert runs[2].startswith("| +method=a | ? | 50 | ")
    assert f"| {tmp_path / 'a'} | python eval.py data=fake +method=a hydra.run.dir=logs/x |" in runs[2]
    assert runs[3] == f"| +method=b | ? | 50 | ? | ? | {tmp_path / 'b'} | ? |"  # no Hydra record: unknown
    started = json.loads((tmp_path / "a" / "metrics.json").read_text())["run"]
    assert "started" not in started  # the runner alone: eval.py stamps `started` and `commit`, else .hydra's time
    assert re.search(r"\| 50 \| \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S* \| \? \|", runs[2])


def test_brief_prints_the_table_and_one_row_of_quality_tests_per_run(tmp_path, capsys):
    eval_run(tmp_path / "a", range(40), ["+method=a"])
    eval_run(tmp_path / "b", range(10), ["+method=b"])
    eval_run(tmp_path / "c", range(40), ["+method=c"])  # answers as a does
    assert main([str(tmp_path / d) for d in "abc"] + ["--brief", "--resamples", "200", "--out", str(tmp_path / "o")]) == 0
    printed = squeezed(capsys.readouterr().out)
    assert printed.startswith("Made ") and "| +method=b | 50 | 20.0 | 20.0 | 20.0 |" in printed
    tests = printed[printed.index("Paired against `+method=a`") :].splitlines()
    assert tests[2] == "| run | EM | F1 | Acc |"  # quality only: the costs differ visibly in the table above
    assert re.fullmatch(r"\| \+method=b \| -60\.00 \(p 0\.0\d\) \| -60\.00 \(p 0\.0\d\) \| -60\.00 \(p 0\.0\d\) \|", tests[4])
    assert tests[5] == "| +method=c | = | = | = |"  # equal to the baseline on every question
    assert "Runs:" not in printed and "report.md and report.html" in printed
    assert "| +method=b | EM | 50 | 80.00 | 20.00 | -60.00 |" in squeezed((tmp_path / "o" / "report.md").read_text())


def test_run_names_leave_out_overrides_that_change_nothing_computed(tmp_path):
    eval_run(tmp_path / "a", range(40), ["+method=a", "show=3", "llm.generation_cache=null"])
    eval_run(tmp_path / "b", range(10), ["+method=b", "show=0", "paths.cache_dir=/x"])
    assert [g.name for g in build([str(tmp_path / "a"), str(tmp_path / "b")]).groups] == ["+method=a", "+method=b"]


def test_runs_that_differ_only_by_seed_collapse_to_mean_and_std(tmp_path):
    eval_run(tmp_path / "a1", range(40), ["+method=a", "seed=1"])
    eval_run(tmp_path / "a2", range(30), ["+method=a", "seed=2"])
    eval_run(tmp_path / "b1", range(10), ["+method=b", "seed=1"])
    comparison = build([str(tmp_path / d) for d in ("a1", "a2", "b1")], resamples=500)
    rows = {r["run"]: r for r in table_rows(comparison)}
    assert rows.keys() == {"+method=a", "+method=b"}
    assert (rows["+method=a"]["runs"], rows["+method=a"]["em"], rows["+method=a"]["em_std"]) == ("2", "70.0", "14.1")
    assert (rows["+method=b"]["runs"], rows["+method=b"]["em_std"]) == ("1", "")
    assert "| +method=a | 2 | 50 | 70.0 ± 14.1 |" in squeezed(markdown_table(comparison))
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


def test_the_html_report_is_self_contained_with_the_table_the_tests_and_plots(tmp_path):
    eval_run(tmp_path / "a", range(40), ["+method=a"], n=20)
    eval_run(tmp_path / "b", range(5), ["+method=b", "+note=<i>"], n=20)
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "out"), "--resamples", "200"]) == 0

    page = (tmp_path / "out" / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and page.count("data:image/png;base64,") == 1  # the quality/cost plot
    assert not re.search(r"(src|href)\s*=\s*[\"'](?!data:)", page) and "<script" not in page and "<link" not in page
    assert "+method=b,+note=&lt;i&gt;" in page and "<i>" not in page  # names are escaped
    assert "<td>+method=b,+note=&lt;i&gt;</td><td>EM</td><td>20</td>" in page  # the shared questions per test
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "table.csv",
        "significance.csv",
        "report.md",
        "report.html",
        "explorer.html",  # the question explorer (tests/unit/test_compare_explorer.py)
        "quality_cost.png",  # the inlined plot, also as a file (for a paper or a README)
    }
    assert (tmp_path / "out" / "quality_cost.png").read_bytes().startswith(b"\x89PNG")
    (tmp_path / "out" / "sweep.png").write_bytes(b"an earlier report's plot")
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "out"), "--resamples", "200"]) == 0
    assert not (tmp_path / "out" / "sweep.png").exists()  # no sweep here: the stale file is gone


def text(title: str) -> str:
    return f"{title} {title}1 {title}2 {title}3 story"  # shares 1 token in 5 with another title's text


def record(i: int, gold: Sequence[str], titles: Sequence[str], answer: str = "x") -> dict:
    """A prediction record (as the runner writes it) retrieving passages titled `titles` for gold titles `gold`."""
    cost = {
        "llm_calls": 1,
        "prompt_tokens": 10,
        "completion_tokens": 1,
        "retrieval_calls": 1,
        "seconds": {"answer": 0.1},
    }
    retrieved = [{"id": f"p-{t}", "title": t, "text": text(t)} for t in titles]
    return {"id": f"q{i}", "method": "m", "question": f"q{i}?", "prediction": "", "golds": [answer],
            "gold_titles": list(gold), "gold_passages": [text(t) for t in gold], "retrieved": retrieved,
            "parse_failed": False, "scores": {"em": 0.0}, "cost": cost, "stats": {}, "trace": None}  # fmt: skip


def retrieval_run(path: Path, records: Sequence[dict], metrics: dict, overrides: Sequence[str], match: str = "title"):
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (path / ".hydra" / "config.yaml").write_text(f"metrics:\n  passage_match: {match}\n  overlap_threshold: 0.75\n")
    (path / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (path / "metrics.json").write_text(
        json.dumps({"run": {"n": len(records)}, "metrics": {"n": len(records), **metrics}})
    )


def test_passage_recall_is_paired_tested_as_the_micro_average_of_the_records(tmp_path):
    gold = [["A", "B"], ["C", "D", "E"], ["F", "G"], []]  # the last question has no gold: counts in neither sum
    base = [["A", "X", "B"], ["Y"], ["F"], ["Z"]]  # 3 of 7 gold found in all; 2 of 7 in the first passage
    better = [["A", "B"], ["C", "D", "Y"], ["F", "G"], ["F", "Z"]]  # 6 of 7; @1 3 of 7
    keys = ["retrieval/passage_recall", "retrieval/passage_recall@1", "retrieval/answer_recall@1"]
    for name, titles, values in (("base", base, (42.9, 28.6, 25.0)), ("better", better, (85.7, 42.9, 50.0))):
        records = [record(i, g, t, answer="F") for i, (g, t) in enumerate(zip(gold, titles))]
        retrieval_run(tmp_path / name, records, dict(zip(keys, values)), [f"+method={name}"])
    tests = {
        s.column.key: s.test
        for s in build([str(tmp_path / "base"), str(tmp_path / "better")], resamples=200).significance
    }
    assert (tests["retrieval/passage_recall"].mean_a, tests["retrieval/passage_recall"].mean_b) == pytest.approx(
        (300 / 7, 600 / 7)
    )
    assert tests["retrieval/passage_recall"].n == 4
    assert tests["retrieval/passage_recall@1"].diff == pytest.approx(100 / 7)
    at1 = tests["retrieval/answer_recall@1"]  # the share of questions whose first passage holds the answer 'F'
    assert (at1.mean_a, at1.mean_b) == (25.0, 50.0)


def test_token_overlap_runs_match_gold_passages_by_text(tmp_path):
    for name, titles, recall in (("t", [["A", "C"], ["X"]], 33.3), ("u", [["A", "B"], ["D"]], 100.0)):
        records = [record(i, g, t) for i, (g, t) in enumerate(zip([["A", "B"], ["D"]], titles))]
        for r in records:  # titles that match no gold title: only the texts can match
            r["retrieved"] = [{**p, "title": p["title"] + " (film)"} for p in r["retrieved"]]
        retrieval_run(tmp_path / name, records, {"retrieval/passage_recall": recall}, [f"+m={name}"], "token_overlap")
    test = build([str(tmp_path / "t"), str(tmp_path / "u")], resamples=100).significance
    recall = next(s.test for s in test if s.column.key == "retrieval/passage_recall")
    assert (recall.mean_a, recall.mean_b) == pytest.approx((100 / 3, 100.0))


def test_runs_that_match_gold_passages_by_different_rules_are_flagged(tmp_path, capsys):
    records = [record(0, ["A", "B"], ["A", "C"])]
    retrieval_run(tmp_path / "t", records, {"retrieval/passage_recall": 50.0}, ["+m=t"], "token_overlap")
    retrieval_run(tmp_path / "u", records, {"retrieval/passage_recall": 50.0}, ["+m=u"], "title")
    assert build([str(tmp_path / "t")]).notes == []
    (note,) = build([str(tmp_path / "t"), str(tmp_path / "u")]).notes
    assert "token overlap ≥ 0.75: +m=t; title: +m=u" in note and "not comparable" in note
    assert main([str(tmp_path / "t"), str(tmp_path / "u"), "--out", str(tmp_path / "out"), "--resamples", "50"]) == 0
    assert "**Note.** Gold passages were matched by different rules" in capsys.readouterr().out
    assert "<strong>Note.</strong> Gold passages" in (tmp_path / "out" / "report.html").read_text()


def train_run(path: Path, monitored: Sequence[float | None], overrides: Sequence[str], mode: str | None = "max",
              initial: float | None = None) -> Path:  # fmt: skip
    """A train.py run directory whose latest CSV log has `monitored[e]` as epoch e's validation value (a train
    row between), an older log version that must be ignored, and a config naming the monitor."""
    (path / ".hydra").mkdir(parents=True)
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    model = "model:\n  monitor: ${optimized_metric}\n" + (f"  mode: {mode}\n" if mode else "")
    (path / ".hydra" / "config.yaml").write_text("optimized_metric: val/acc\n" + model)
    lines = ["epoch,step,train/loss,val/acc"] + ([f",0,,{initial}"] if initial is not None else [])
    for epoch, value in enumerate(monitored):
        lines += [f"{epoch},{10 * epoch + 5},1.5,", f"{epoch},{10 * epoch + 9},,{'' if value is None else value}"]
    for version, text in (("version_0", "epoch,step,val/acc\n0,1,99.0\n"), ("version_1", "\n".join(lines) + "\n")):
        (path / "csv" / version).mkdir(parents=True)
        (path / "csv" / version / "metrics.csv").write_text(text)
    return path


def test_a_train_run_reports_the_best_monitored_value_its_epoch_and_the_last(tmp_path):
    best = TrainRun.load(train_run(tmp_path / "max", [50.0, 55.0, 55.0, 52.0], [], initial=40.0))
    assert (best.monitor, best.mode) == ("val/acc", "max")  # interpolated from optimized_metric
    assert best.metrics == {"best": 55.0, "best_epoch": 1, "last": 52.0, "epochs": 4, "initial": 40.0}
    assert best.curve == [(0, 50.0), (1, 55.0), (2, 55.0), (3, 52.0)]
    low = TrainRun.load(train_run(tmp_path / "min", [3.0, 1.0, None, 2.0], [], mode="min"))
    assert low.metrics == {"best": 1.0, "best_epoch": 1, "last": 2.0, "epochs": 3}
    assert TrainRun.load(train_run(tmp_path / "default", [1.0, 2.0], [], mode=None)).metrics["best"] == 2.0


def test_train_seeds_collapse_and_eval_and_train_runs_get_separate_tables(tmp_path, capsys):
    for seed, curve in ((1, [50.0, 60.0]), (2, [70.0, 40.0])):
        train_run(tmp_path / "cv" / str(seed - 1), curve, ["+model=treehop", f"model.datamodule.seed={seed}"])
    eval_run(tmp_path / "a", range(5), ["+method=a"], n=10)
    eval_run(tmp_path / "b", range(8), ["+method=b"], n=10)
    out = tmp_path / "out"
    assert (
        main([str(tmp_path / "cv"), str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out), "--resamples", "100"])
        == 0
    )

    printed = squeezed(capsys.readouterr().out)
    assert "| +method=b | 10 | 80.0 |" in printed  # the eval table and its tests, as before
    assert "Train runs are not paired-tested" in printed
    assert "| +model=treehop | 2 | val/acc (max) | 65.00 ± 7.07 | 0.5 ± 0.7 | 50.00 ± 14.14 | 2.0 ± 0.0 |" in printed
    with open(out / "train.csv", newline="") as f:
        assert [(r["run"], r["best"], r["best_std"]) for r in csv.DictReader(f)] == [
            ("+model=treehop", "65.00", "7.07")
        ]
    with open(out / "significance.csv", newline="") as f:
        assert {r["run"] for r in csv.DictReader(f)} == {"+method=b"}  # no train run is tested
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2 and "<h2>Train runs</h2>" in page  # quality/cost, curves


def test_train_runs_alone_write_no_eval_table(tmp_path):
    train_run(tmp_path / "r", [1.0], ["+model=treehop"])
    comparison = build([str(tmp_path / "r")], baseline="anything")
    assert (comparison.groups, comparison.baseline, [g.name for g in comparison.train]) == (
        [],
        None,
        ["+model=treehop"],
    )
    assert main([str(tmp_path / "r"), "--out", str(tmp_path / "out")]) == 0
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"train.csv", "report.md", "report.html", "train.png"}
