"""reproduce.py's parts without running a model: a table config read and checked, its jobs planned per scale, a
job's finished state, the cells read from metrics.json, each metric's per-question figure for the paired tests,
and the rendered files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hoprag.paths import PROJECT_ROOT
from hoprag.reproduce import Table, TableError, cells, forwarded, plan, render, runner
from hoprag.reproduce.cells import Cell, figure_of
from hoprag.reproduce.render import Footnotes, cell_text
from hoprag.reproduce.spec import Figure, Reading


def table_config(**changes) -> dict:
    """A small table: two datasets and their average, two metrics, a baseline, a row reading another's run, a
    row skipped at smoke scale and one that needs a file."""
    config = {
        "name": "toy",
        "title": "Toy table",
        "digest": "spec/toy.md §1",
        "baseline": "rag",
        "notes": ["a caveat"],
        "scales": {
            "smoke": {"label": "small", "overrides": ["limit=2", "llm=scripted"], "vars": {"judge": "rule"}},
            "paper": {"label": "big", "overrides": ["aids=none", "llm=vllm"], "vars": {"judge": "gpt"}},
        },
        "groups": {
            "hotpotqa": {"label": "HotpotQA", "overrides": ["data=hotpotqa"]},
            "2wiki": {
                "label": "2Wiki",
                "overrides": {"all": ["data=2wiki"], "paper": ["data.sample=500"]},
                "skip": {"smoke": "not here"},
            },
            "avg": {"label": "Avg", "mean_of": ["hotpotqa", "2wiki"]},
        },
        "metrics": {"f1": {"label": "F1", "key": "f1"}, "acc": {"label": "Acc", "key": "crag/acc@{judge}"}},
        "rows": [
            {"id": "rag", "name": "RAG", "overrides": ["+method=standard_rag"], "paper": {"hotpotqa/f1": 50.0}},
            {
                "id": "closed",
                "name": "Closed",
                "overrides": {"smoke": ["+method=no_retrieval"]},
                "skip": {"paper": "not offline"},
                "paper": {"avg/f1": {"value": 30.0, "note": "(?) garbled"}},
            },
            {"id": "same", "name": "Same run", "run": "rag", "keys": {"f1": {"key": "em", "scale": 0.01}}},
            {
                "id": "trained",
                "name": "Trained",
                "overrides": ["+method=treehop"],
                "requires": {"smoke": [{"path": "no/such/export", "command": "python train.py +model=treehop"}]},
            },
        ],
    }
    config.update(changes)
    return config


def test_a_table_config_is_read_per_scale():
    t = Table.parse(table_config())
    assert t.columns == [(g, m) for g in ("hotpotqa", "2wiki", "avg") for m in ("f1", "acc")]
    assert t.run_groups() == ["hotpotqa", "2wiki"]
    paper = ("data=2wiki", "data.sample=500")
    assert t.groups["2wiki"].overrides == {"smoke": ("data=2wiki",), "paper": paper, "rehearsal": paper}
    assert t.reading(t.row("rag"), "acc", "smoke").key == "crag/acc@rule"
    assert t.reading(t.row("rag"), "acc", "paper").key == "crag/acc@gpt"
    same = t.reading(t.row("same"), "f1", "smoke")
    assert (same.key, same.scale, same.digits) == ("em", 0.01, 1)  # the row's key, scale given, digits the metric's
    assert t.row("closed").paper[("avg", "f1")] == Figure(30.0, "(?) garbled")


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"baseline": "nope"}, "baseline 'nope' is no row"),
        ({"columns": [["hotpotqa", "em"]]}, "column hotpotqa/em"),
        ({"scales": {"smoke": {"label": "x"}}}, "'paper'"),
    ],
)
def test_a_table_that_names_what_it_lacks_is_refused(changes, message):
    with pytest.raises(TableError, match=message) as e:
        Table.parse(table_config(**changes))
    assert "conf/table/toy.yaml" in str(e.value)


def test_a_row_that_runs_nothing_at_a_scale_must_say_why():
    config = table_config()
    config["rows"].append({"id": "bare", "overrides": {"paper": ["+method=cot"]}})
    with pytest.raises(TableError, match="row 'bare' has no overrides at scale smoke and no reason to skip it"):
        Table.parse(config)


def test_a_row_may_only_read_the_runs_of_a_row_that_has_its_own():
    config = table_config()
    config["rows"].append({"id": "chain", "run": "same"})
    with pytest.raises(TableError, match="reads the runs of 'same'"):
        Table.parse(config)


def test_the_plan_has_one_job_per_row_with_runs_and_group_and_says_why_one_is_skipped(tmp_path):
    jobs = {j.name: j for j in plan(Table.parse(table_config()), "smoke", tmp_path, ["show=0"])}
    assert sorted(jobs) == sorted(f"{r}/{g}" for r in ("rag", "closed", "trained") for g in ("hotpotqa", "2wiki"))
    rag = jobs["rag/hotpotqa"]
    assert rag.overrides == ("limit=2", "llm=scripted", "show=0", "+method=standard_rag", "data=hotpotqa")
    assert rag.directory == tmp_path / "runs" / "rag" / "hotpotqa" and not rag.skip
    assert rag.sweep_overrides()[-1] == "hydra.sweep.subdir=rag/hotpotqa"
    assert jobs["rag/2wiki"].skip == "not here"
    assert not jobs["trained/hotpotqa"].skip  # its missing export is the preflight's to refuse (tested below)
    paper = {j.name: j for j in plan(Table.parse(table_config()), "paper", tmp_path)}
    assert paper["closed/hotpotqa"].skip == "not offline" and not paper["trained/hotpotqa"].skip
    assert paper["rag/2wiki"].overrides == ("aids=none", "llm=vllm", "+method=standard_rag", "data=2wiki", "data.sample=500")


def finished_run(directory: Path, overrides: list[str], n: int = 2, records: int = 2) -> None:
    (directory / ".hydra").mkdir(parents=True)
    (directory / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (directory / "predictions.jsonl").write_text("".join(json.dumps({"id": str(i)}) + "\n" for i in range(records)))
    (directory / "metrics.json").write_text(json.dumps({"run": {"n": n}, "metrics": {"n": n}}))


def test_a_job_is_finished_only_with_a_complete_metrics_json_written_after_it_last_started(tmp_path):
    job = plan(Table.parse(table_config()), "smoke", tmp_path, ["show=0"])[0]
    assert not job.finished()
    finished_run(job.directory, ["limit=2", "llm=scripted", "show=3", "logger=csv", "+method=standard_rag",
                                 "data=hotpotqa"])  # fmt: skip
    assert job.finished()  # show and logger are run control: they change nothing computed
    started = job.directory / ".hydra" / "overrides.yaml"
    os.utime(started, (started.stat().st_mtime + 10,) * 2)  # restarted after metrics.json was written
    assert not job.finished()


@pytest.mark.parametrize("overrides, n, records", [
    (["limit=3", "llm=scripted", "+method=standard_rag", "data=hotpotqa"], 2, 2),  # another limit
    (["limit=2", "llm=scripted", "+method=standard_rag", "data=hotpotqa"], 2, 3),  # resumed, not rescored
])  # fmt: skip
def test_a_job_run_otherwise_or_resumed_is_not_finished(tmp_path, overrides, n, records):
    job = plan(Table.parse(table_config()), "smoke", tmp_path)[0]
    finished_run(job.directory, overrides, n, records)
    assert not job.finished()


def test_a_reading_divides_by_its_denominator_and_scales():
    metrics = {"method/treehop@5/hop2/hits": 1.2, "method/gold": 2.4, "f1": 41.0}
    assert Reading("method/treehop@5/hop2/hits", "method/gold", 100.0).value(metrics) == pytest.approx(50.0)
    assert Reading("f1", scale=0.01).value(metrics) == pytest.approx(0.41)
    assert Reading("em").value(metrics) is None


@pytest.mark.parametrize("key, expected", [
    ("retrieval/passage_recall@5", ("passage_hits@5", "passage_gold", False, 100.0)),
    ("retrieval/passage_recall_macro@5", ("passage_hits@5", "passage_gold", True, 100.0)),
    ("retrieval/passage_recall", ("passage_hits", "passage_gold", False, 100.0)),
    ("retrieval/answer_recall@5", ("answer_recall@5", None, False, 100.0)),
    ("cost/mean/seconds/total", ("seconds", None, False, 1.0)),
    ("cost/mean/llm_calls", ("llm_calls", None, False, 1.0)),
    ("method/direct@5/hop1/k", ("method/direct@5/hop1/k", None, False, 1.0)),
    ("crag/acc@rule", ("crag/acc@rule", None, False, 100.0)),
    ("f1", ("f1", None, False, 100.0)),
    ("retrieval/passages_read", None),
])  # fmt: skip
def test_each_metric_pairs_with_the_per_question_figure_it_averages(key, expected):
    assert figure_of(key) == expected


def test_a_cell_shows_paper_hoprag_and_their_difference_with_notes():
    notes = Footnotes()
    assert cell_text(Cell(Figure(61.6), 63.04, 1), notes) == "61.6 / 63.0 (+1.4)"
    assert cell_text(Cell(None, 63.04, 1), notes) == "– / 63.0"
    assert cell_text(Cell(Figure(57.9, "a typo?"), None, 1, "skipped", "no export"), notes) == "57.9[1] / skipped[2]"
    assert cell_text(Cell(Figure(None), 0.4, 3, partial="2/6"), notes) == "n/r / 0.400[3]"
    average = "hoprag's average over the groups that ran (2/6 here), not the paper's set"
    assert notes.texts == ["Paper: a typo?", "no export", average]


def test_only_launcher_overrides_reach_the_rows_multirun():
    given = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.run.dir=x", "hydra.sweeper.max_batch_size=4"]
    assert forwarded(given) == ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.sweeper.max_batch_size=4"]


def test_a_key_given_as_an_override_is_refused_before_it_is_written(tmp_path):
    jobs = plan(Table.parse(table_config()), "smoke", tmp_path, ["llm.api_key=sk-123"])
    with pytest.raises(TableError, match="llm.api_key: give keys through the environment"):
        runner.launch(jobs, tmp_path)
    assert not (tmp_path / "jobs.json").exists()


def scored_run(directory: Path, overrides: list[str], f1: list[float], seconds: list[float]) -> None:
    """A finished run of `len(f1)` questions: each record's F1 and time, metrics.json their means (in %)."""
    (directory / ".hydra").mkdir(parents=True)
    (directory / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    records = [
        {"id": str(i), "question": f"q{i}", "golds": ["a"], "scores": {"f1": f},
         "cost": {"llm_calls": 1, "prompt_tokens": 10, "completion_tokens": 2, "retrieval_calls": 1,
                  "seconds": {"answer": s}}}
        for i, (f, s) in enumerate(zip(f1, seconds))
    ]  # fmt: skip
    (directory / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    metrics = {"f1": 100 * sum(f1) / len(f1), "cost/mean/seconds/total": sum(seconds) / len(seconds),
               "cost/mean/llm_calls": 1.0, "cost/mean/prompt_tokens": 10.0, "cost/mean/completion_tokens": 2.0}  # fmt: skip
    (directory / "metrics.json").write_text(json.dumps({"run": {"n": len(f1)}, "metrics": metrics}))


def test_rows_are_paired_tested_against_the_baseline_but_not_on_a_batchs_shared_time(tmp_path):
    """F1 pairs per question; the time column is not tested where a run's per-question time is one batch's time
    shared out (equal for every question): the pairs would carry no per-question variation."""
    config = table_config(metrics={"f1": {"label": "F1", "key": "f1"},
                                   "s": {"label": "s", "key": "cost/mean/seconds/total", "digits": 2}})  # fmt: skip
    config["rows"] = [r for r in config["rows"] if r["id"] in ("rag", "closed")]
    table = Table.parse(config)
    jobs = [j for j in plan(table, "smoke", tmp_path) if not j.skip]
    assert [j.name for j in jobs] == ["rag/hotpotqa", "closed/hotpotqa"]
    scored_run(jobs[0].directory, list(jobs[0].overrides), [1.0, 0.5, 1.0, 0.0], [0.4, 0.4, 0.4, 0.4])
    scored_run(jobs[1].directory, list(jobs[1].overrides), [0.0, 0.5, 0.0, 0.0], [0.1, 0.3, 0.2, 0.2])
    report = render.build(table, "smoke", plan(table, "smoke", tmp_path), resamples=200, seed=0)
    assert [(p.row, p.group, p.metric, p.test.n) for p in report.paired] == [("closed", "hotpotqa", "f1", 4)]
    assert report.paired[0].test.diff == pytest.approx(-50.0)
    assert report.untested == ["Not tested against RAG: Closed, HotpotQA s: " + cells.SHARED_TIME + "."]
    rag = next(r for r in report.rows if r[0] == "RAG")
    assert rag[1:3] == ["50.0 / 62.5 (+12.5)", "– / 0.40"]
    written = tmp_path / "table"
    render.write(report, written)
    assert "| Closed | HotpotQA F1 | 4 | 62.50 | 12.50 | -50.00 |" in (written / "table.md").read_text()


def test_a_cell_the_run_has_no_figure_for_says_why(tmp_path):
    """A figure a run may lack (EFR without a question whose gold passages were all retrieved) is shown as
    "no figure" with the metric's own reason, else with the key the run does not report."""
    config = table_config(metrics={"f1": {"label": "F1", "key": "f1"},
                                   "efr": {"label": "EFR", "key": "efr", "missing": "no question qualifies"},
                                   "em": {"label": "EM", "key": "em"}})  # fmt: skip
    config["rows"] = [r for r in config["rows"] if r["id"] == "rag"]
    table = Table.parse(config)
    job = plan(table, "smoke", tmp_path)[0]
    scored_run(job.directory, list(job.overrides), [1.0, 0.0], [0.1, 0.2])
    results = cells.Results(table, "smoke", plan(table, "smoke", tmp_path))
    row = table.row("rag")
    assert results.cell(row, "hotpotqa", "f1").value == pytest.approx(50.0)
    efr, em = results.cell(row, "hotpotqa", "efr"), results.cell(row, "hotpotqa", "em")
    assert (efr.status, efr.reason) == ("no figure", "no question qualifies")
    assert (em.status, em.reason) == ("no figure", "the run reports no em")
    assert results.cell(row, "2wiki", "f1").status == "skipped"  # the group is skipped at smoke scale


def test_a_job_that_lacks_a_need_is_refused_before_any_job_starts_and_the_table_says_why(tmp_path, monkeypatch):
    """The preflight runs before the multirun: a job whose questions file or trained export is missing is skipped
    with what it lacks and the command that makes it, the others run."""
    config = table_config()
    far = ["+method=standard_rag", "data.questions=no/such/questions.json"]
    config["rows"].append({"id": "far", "name": "Far", "overrides": far})
    launched = []
    monkeypatch.setattr(runner, "launch", lambda jobs, *args: launched.extend(j.name for j in jobs) or 0)
    runner.reproduce(Table.parse(config), "smoke", tmp_path, ["show=0"], resamples=10)
    assert launched == ["rag/hotpotqa", "closed/hotpotqa"]
    md = (tmp_path / "table.md").read_text()
    assert "needs no/such/questions.json, made by `put the file at " in md
    assert "needs no/such/export, made by `python train.py +model=treehop`" in md


def test_check_lists_every_need_and_exits_non_zero_when_one_is_missing_running_nothing(tmp_path):
    done = subprocess.run(
        [sys.executable, "reproduce.py", "table=sc_rag_t3", "scale=paper", "check=true", f"out_dir={tmp_path}"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, check=False,
        env={**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub")},
    )  # fmt: skip
    assert done.returncode == 1 and "needs missing (listed above)" in done.stderr
    assert done.stdout.startswith("Preflight of sc_rag_t3 at scale=paper: ")
    assert "| model | BAAI/bge-small-en-v1.5 | missing: not in the Hugging Face cache " in done.stdout
    assert not (tmp_path / "runs").exists() and not (tmp_path / "table.md").exists()


def test_a_job_without_a_finished_run_says_what_works(tmp_path):
    """Never started or stopped: a rerun resumes it; started under other settings (a fingerprint is there):
    a rerun would be refused again, so the footnote names overwrite=true."""
    from hoprag.evaluation.fingerprint import FINGERPRINT
    from hoprag.reproduce.cells import unfinished

    assert "rerun reproduce.py to run it" in unfinished(tmp_path) and "overwrite" not in unfinished(tmp_path)
    (tmp_path / FINGERPRINT).write_text("{}")
    assert "overwrite=true to start it afresh" in unfinished(tmp_path)
