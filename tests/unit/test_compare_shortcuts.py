"""`compare.py --shortcuts <probe run>` (issue 46 item 3): every table and paired test again on the questions the
shortcut probe did not flag, with the counts, in report.md, report.html and CSV; the main table's and tests' code
run on the subset; and a probe of another LLM, other data or fewer questions refused."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from hoprag.compare import Run, build, main, table_rows
from hoprag.compare.shortcuts import restricted, split
from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, NoRetrieval, ShortcutProbe
from tests.unit.test_compare import record, retrieval_run, squeezed

N = 40
LLM = {"_target_": "hoprag.llm.ScriptedLLM", "name": "scripted", "model": "m1", "default": {"max_new_tokens": 64}}
DATA = {"name": "fake", "format": "hotpotqa", "questions": {"sha256": "abc"}, "sample": None}


def examples(n: int) -> list[QAExample]:
    """Yes/no questions, each with one gold paragraph (and a distractor) in its context."""
    return [QAExample(f"q{i}", f"Is {i} a number?", ["yes"], supporting_titles=[f"T{i}"],
                      context=[Passage(f"p{i}", f"T{i}", f"{i} is a number."), Passage(f"d{i}", "D", "No.")])
            for i in range(n)]  # fmt: skip


def method_run(path: Path, right: Iterable[int], overrides: Sequence[str], llm: dict = LLM, n: int = N) -> None:
    """A closed-book eval run answering "yes" (right) on the questions numbered `right`, with its fingerprint."""
    right = sorted(right)
    rules = [(rf"Is ({'|'.join(map(str, right))}) a number", "yes")] if right else []
    method = NoRetrieval(ScriptedLLM(rules=rules, default_reply="no"), prompt=ChatPrompt("Be brief.", "{question}"))
    run(method, examples(n), path, run_info={"dataset": "fake"}, fingerprint={"llm": llm, "data": DATA})
    (path / ".hydra").mkdir()
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in ["data=fake", *overrides]))


def probe_run(path: Path, closed: Iterable[int], single: Iterable[int], llm: dict = LLM, data: dict = DATA,
              n: int = N, no_gold: Iterable[int] = ()) -> Path:  # fmt: skip
    """A shortcut probe whose closed-book answer is right on `closed` and whose gold paragraph answers on `single`
    (the questions numbered `no_gold` without their gold paragraph)."""
    closed, single, no_gold = set(closed), set(single), set(no_gold)

    def reply(prompt: str) -> str:
        i = int(re.search(r"Is (\d+) a number", prompt).group(1))
        return "yes" if i in (closed if prompt.startswith("system: Closed book.") else single) else "no"

    probe = ShortcutProbe(ScriptedLLM(rules=[(lambda p: True, reply, -0.5)]), ChatPrompt("Closed book.", "{question}"),
                          ChatPrompt("Read.", "{passages}\n{question}"))  # fmt: skip
    asked = [replace(ex, context=ex.context[1:]) if i in no_gold else ex for i, ex in enumerate(examples(n))]
    run(probe, asked, path, run_info={"dataset": "fake"}, fingerprint={"llm": llm, "data": data})
    return path


@pytest.fixture
def runs(tmp_path) -> list[str]:
    """a right on q0-q29, b on q0-q14; the probe flags q0-q14 (q0-q9 closed-book, q5-q14 from their paragraph)."""
    method_run(tmp_path / "a", range(30), ["+method=a"])
    method_run(tmp_path / "b", range(15), ["+method=b"])
    return [str(tmp_path / "a"), str(tmp_path / "b")]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_every_table_and_test_again_on_the_multihop_questions_with_the_counts(tmp_path, runs, capsys):
    probe = probe_run(tmp_path / "probe", range(10), range(5, 15))
    out = tmp_path / "out"
    assert main([*runs, "--shortcuts", str(probe), "--out", str(out), "--resamples", "200"]) == 0

    assert [(r["run"], r["n"], r["em"]) for r in read_csv(out / "table.csv")] == [
        ("+method=a", "40", "75.0"), ("+method=b", "40", "37.5")]  # the main table: all questions  # fmt: skip
    multihop = read_csv(out / "table_multihop.csv")
    assert [(r["run"], r["n"], r["em"], r["f1"], r["acc"]) for r in multihop] == [
        ("+method=a", "25", "60.0", "60.0", "60.0"), ("+method=b", "25", "0.0", "0.0", "0.0")]  # fmt: skip
    tests = {r["metric"]: r for r in read_csv(out / "significance_multihop.csv")}
    assert (tests["em"]["shared"], tests["em"]["baseline"], tests["em"]["value"], tests["em"]["diff"]) == (
        "25", "60.00", "0.00", "-60.00")  # fmt: skip
    assert float(tests["em"]["p"]) < 0.01

    report = squeezed((out / "report.md").read_text())
    said = ("Of the 40 compared questions, 15 are shortcut questions (10 answered closed-book, 10 from a single gold "
            "paragraph) and 25 multi-hop. Shortcut rule: closed-book answer or any single-gold-paragraph answer with "
            f"EM = 1, by the runs' own LLM (probe: {probe}).")  # fmt: skip
    assert said in report
    section = report[report.index("**Multi-hop only**") :]
    assert "| +method=a | 25 | 60.0 | 60.0 | 60.0 |" in section and "| +method=b | 25 | 0.0 | 0.0 | 0.0 |" in section
    assert "| +method=b | EM | 25 | 60.00 | 0.00 | -60.00 |" in section  # the tests on the subset
    assert "| +method=b | EM | 40 | 75.00 | 37.50 | -37.50 |" in report[: report.index("**Multi-hop only**")]
    assert (out / "report.md").read_text() in capsys.readouterr().out

    html = (out / "report.html").read_text()
    assert "<h3>Multi-hop only</h3>" in html and "15 are shortcut questions" in html
    assert "<td>+method=a</td><td>25</td><td>60.0</td>" in html and "<h4>Paired tests, multi-hop only</h4>" in html
    page = (out / "explorer.html").read_text()  # the explorer's tag filter: shortcut or multi-hop, per question
    data = json.loads(page.split('<script type="application/json" id="data">')[1].split("</script>")[0])
    assert data["tags"] == ["multi-hop", "shortcut"]
    assert sum(q["tg"] == ["shortcut"] for q in data["questions"]) == 15


def test_the_subset_of_every_question_reproduces_each_runs_metrics_json(tmp_path, runs):
    """A probe that flags nothing leaves every question: the subset's rows, computed from the records' per-question
    figures, are the runs' own metrics.json figures (the same code shows both)."""
    probe = probe_run(tmp_path / "probe", [], [], no_gold=range(5))
    comparison = build(runs, resamples=100)
    found = split(comparison, [str(probe)])
    assert (found.n_shortcut, found.n_multihop, found.without_gold) == (0, N, 5)
    assert found.summary().endswith(" 5 questions had no gold paragraph in their context: they are flagged by their "
                                    "closed-book answer alone.")  # fmt: skip
    keys = ["n", "em", "f1", "acc", "cost/mean/llm_calls", "cost/mean/prompt_tokens", "cost/mean/completion_tokens"]
    main_rows, sub_rows = table_rows(comparison), table_rows(found.multihop)
    shown = ["run", *keys]
    assert [{k: r[k] for k in shown} for r in sub_rows] == [{k: r[k] for k in shown} for r in main_rows]
    assert [(s.run, s.column.key, s.test) for s in found.multihop.significance] == [
        (s.run, s.column.key, s.test) for s in comparison.significance]


def test_a_subsets_passage_recall_is_micro_and_its_efr_comes_from_the_same_figures(tmp_path):
    gold = [["A", "B"], ["C", "D", "E"], ["F", "G"], []]
    titles = [["A", "B"], ["C", "D", "Y"], ["F", "G"], ["F", "Z"]]  # all gold of q0 and q2 found, 2 of 3 of q1
    records = [record(i, g, t, answer="F") for i, (g, t) in enumerate(zip(gold, titles))]
    records[0]["scores"]["em"] = 1.0  # q0 right with all its gold read; q2 wrong with all of it (forgotten)
    metrics = {"em": 25.0, "retrieval/passage_recall": 85.7, "efr": 50.0}
    retrieval_run(tmp_path / "r", records, metrics, ["+method=r"])
    whole = restricted(Run.load(tmp_path / "r"), ["q0", "q1", "q2", "q3"]).metrics
    assert whole == pytest.approx({"n": 4, "em": 25.0, "retrieval/passage_recall": 600 / 7, "efr": 50.0,
                                   "forget_rate": 100 / 3})  # fmt: skip
    part = restricted(Run.load(tmp_path / "r"), ["q3", "q1", "q2"])
    assert part.metrics == pytest.approx({"n": 3, "em": 0.0, "retrieval/passage_recall": 80.0, "efr": 100.0,
                                          "forget_rate": 50.0})  # fmt: skip
    assert list(part.questions()) == ["q1", "q2", "q3"] and list(part.per_question()) == ["q1", "q2", "q3"]


def refusal(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_a_probe_of_another_llm_is_refused_naming_the_differing_settings(tmp_path, runs, capsys):
    other = probe_run(tmp_path / "probe", range(10), [], llm={**LLM, "model": "m2", "default": {"max_new_tokens": 8}})
    err = refusal([*runs, "--shortcuts", str(other)], capsys)
    assert f"the shortcut probe {other} was run with another LLM than {runs[0]}" in err
    assert 'llm.model: probe "m2" vs run "m1"; llm.default.max_new_tokens: probe 8 vs run 64' in err
    assert "python eval.py +method=shortcut_probe" in err and "Traceback" not in err


def test_a_probe_over_other_data_is_refused(tmp_path, runs, capsys):
    other = probe_run(tmp_path / "probe", range(10), [], data={**DATA, "questions": {"sha256": "def"}})
    err = refusal([*runs, "--shortcuts", str(other)], capsys)
    assert f"no shortcut probe over the data of {runs[0]} (fake)" in err
    assert 'data.questions.sha256: probe "def" vs run "abc"' in err


def test_a_probe_over_fewer_questions_is_refused_and_a_non_probe_run_is_not_a_probe(tmp_path, runs, capsys):
    small = probe_run(tmp_path / "probe", range(10), [], n=30)
    err = refusal([*runs, "--shortcuts", str(small)], capsys)
    assert "holds 30 questions, and 10 of the 40 that" in err and "the runs' data.limit (it resumes)" in err
    err = refusal([*runs, "--shortcuts", runs[1]], capsys)
    assert f"--shortcuts {Path(runs[1]).resolve()} is a no_retrieval run, not a shortcut_probe run" in err


def test_a_run_without_a_fingerprint_cannot_be_checked_against_the_probe(tmp_path, runs, capsys):
    probe = probe_run(tmp_path / "probe", range(10), [])
    (Path(runs[1]) / "run_fingerprint.json").unlink()
    err = refusal([*runs, "--shortcuts", str(probe)], capsys)
    assert f"{Path(runs[1]).resolve()} has no run_fingerprint.json with its llm and data settings" in err


def test_every_question_a_shortcut_leaves_no_multihop_table(tmp_path, runs):
    probe = probe_run(tmp_path / "probe", range(N), [])
    found = split(build(runs, resamples=100), [str(probe)])
    assert (found.n_shortcut, found.n_multihop, found.multihop) == (N, 0, None)
    assert json.loads((probe / "metrics.json").read_text())["metrics"]["method/shortcut"] == 1.0
