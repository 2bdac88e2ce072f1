"""`hoprag.compare` pairs a question only with the same question: same id, question text and golds (the golds as
a set), within a seed group and against the baseline, or refuses (`--intersect` keeps the agreeing ones and says
what it dropped). Every figure shown for a run is computed from its own records: the table is its metrics.json,
a paired value is labelled as over the shared questions. Corrupt metrics.json and predictions.jsonl files are
refused naming the path and line."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest

from hoprag.compare import CompareError, build, main
from hoprag.data.types import QAExample
from hoprag.evaluation.predictions import PredictionFile
from hoprag.evaluation.runner import run, summarize
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, NoRetrieval
from hoprag.metrics.aggregate import MetricSuite
from tests.unit.test_compare import record, retrieval_run


def qa_run(
    path: Path,
    n: int = 10,
    right: Iterable[int] = range(5),
    overrides: Sequence[str] = (),
    text: Callable[[int], str] = lambda i: f"Is {i} a number?",
    golds: Callable[[int], list[str]] = lambda i: ["yes"],
) -> dict:
    """An eval run over questions q0..q{n-1} (`text(i)`, `golds(i)`), answered "yes" on those numbered `right`."""
    rules = [(rf"Is ({'|'.join(map(str, right))}) a ", "yes")] if list(right) else []
    method = NoRetrieval(ScriptedLLM(rules=rules, default_reply="no"), prompt=ChatPrompt("Be brief.", "{question}"))
    metrics = run(method, [QAExample(f"q{i}", text(i), golds(i)) for i in range(n)], path)
    (path / ".hydra").mkdir()
    (path / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in ["data=fake", *overrides]))
    return metrics


# -- pairing -----------------------------------------------------------------------------------------------------


def test_shared_ids_holding_other_questions_are_refused_naming_both_runs_and_an_example(tmp_path, capsys):
    qa_run(tmp_path / "a", overrides=["+method=a"])
    qa_run(tmp_path / "b", overrides=["+method=b"], text=lambda i: f"Is {i} a {'prime' if i > 6 else 'number'}?")
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    expected = (f"{tmp_path / 'a'} and {tmp_path / 'b'} hold 3 question ids whose question or golds differ, "
                "e.g. 'q7': question 'Is 7 a number?' vs 'Is 7 a prime?'")  # fmt: skip
    with pytest.raises(CompareError, match=re.escape(expected)):
        build(dirs)
    with pytest.raises(SystemExit) as stop:
        main(dirs)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and expected in err and "Traceback" not in err

    comparison = build(dirs, intersect=True, resamples=100)
    em = next(s.test for s in comparison.significance if s.column.key == "em")
    assert em.n == 7  # q0..q6 only
    assert comparison.notes == [
        "--intersect: '+method=b' and the baseline '+method=a' are paired on 7 questions, dropping 0 that not all "
        "of them answered and 3 whose question text or golds differ between them."
    ]
    assert main([*dirs, "--intersect", "--resamples", "50", "--out", str(tmp_path / "out")]) == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "dropping 0 that not all of them answered and 3 whose question" in report


def test_golds_pair_as_a_set_and_other_golds_are_refused(tmp_path):
    qa_run(tmp_path / "a", overrides=["+method=a"], golds=lambda i: ["yes", "y"])
    qa_run(tmp_path / "same", overrides=["+method=same"], golds=lambda i: ["y", "yes", "yes"])  # order, repeats
    qa_run(tmp_path / "other", overrides=["+method=other"], golds=lambda i: ["yes"] if i == 4 else ["yes", "y"])
    assert build([str(tmp_path / "a"), str(tmp_path / "same")], resamples=50).significance[0].test.n == 10
    with pytest.raises(CompareError, match=re.escape("hold 1 question ids whose question or golds differ, e.g. 'q4': "
                                                     "golds ['y', 'yes'] vs ['yes']")):  # fmt: skip
        build([str(tmp_path / "a"), str(tmp_path / "other")])


def test_seeds_whose_shared_ids_hold_other_questions_are_refused(tmp_path):
    qa_run(tmp_path / "a1", overrides=["+method=a", "seed=1"])
    qa_run(tmp_path / "a2", overrides=["+method=a", "seed=2"], text=lambda i: f"Is {i} a {'prime' if i else 'number'}?")
    qa_run(tmp_path / "b", overrides=["+method=b"])
    dirs = [str(tmp_path / d) for d in ("b", "a1", "a2")]
    with pytest.raises(CompareError, match=re.escape(f"{tmp_path / 'a1'} and {tmp_path / 'a2'} hold 9 question ids")):
        build(dirs)
    comparison = build(dirs, intersect=True, resamples=50)
    assert next(s.test for s in comparison.significance if s.column.key == "em").n == 1  # q0 alone agrees
    assert "--intersect: the seeds of '+method=a' are paired on 1 questions, dropping 0" in comparison.notes[0]


# -- every figure from the run's own records ---------------------------------------------------------------------


def test_a_runs_table_figure_is_its_metrics_json_and_paired_values_are_labelled_shared(tmp_path, capsys):
    a = qa_run(tmp_path / "a", n=50, right=range(40), overrides=["limit=50"])
    b = qa_run(tmp_path / "b", n=30, right=range(10), overrides=["limit=30"])
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--intersect", "--resamples", "50"]) == 0
    printed = re.sub(r" {2,}", " ", capsys.readouterr().out)  # the tables' padding collapsed
    assert (a["em"], b["em"]) == (80.0, 33.3)
    assert "| limit=50 | 50 | 80.0 |" in printed and "| limit=30 | 30 | 33.3 |" in printed  # own questions
    assert "Each row holds its runs' own metrics.json figures, over their own n questions." in printed
    assert "Paired against the baseline `limit=50` over the 30 shared questions" in printed
    assert "| run | metric | shared | baseline on shared | run on shared |" in printed
    assert "| limit=30 | EM | 30 | 100.00 | 33.33 |" in printed  # a's figure over the shared 30, so labelled
    assert "are paired on 30 questions, dropping 20 that not all of them answered and 0" in printed
    same = next(line for line in printed.splitlines() if line.startswith("Not shown, equal to the baseline"))
    assert "limit=30: LLM calls" in same and "| limit=30 | LLM calls |" not in printed  # +0.000 [+0.000, +0.000]


def test_a_paired_micro_recall_divides_by_the_runs_own_gold_count(tmp_path):
    """A token-overlap run may count a question's gold passages apart from a title run's: each side's paired
    value is still its own metrics.json figure, never its hits over the baseline's gold."""
    key = "retrieval/passage_recall"
    own = {}
    for name, match, extra in (("title", "title", []), ("overlap", "token_overlap", ["C"])):
        records = [record(i, ["A", "B"], ["A", "B"], answer="F") for i in range(4)]
        for r in records:
            r["gold_passages"] += [f"{t} {t}1 {t}2 {t}3 story" for t in extra]  # one more gold passage
        metrics = summarize(records, MetricSuite(passage_match=match))
        own[name] = metrics[key]
        retrieval_run(tmp_path / name, records, metrics, [f"+m={name}"], match)
    assert own == {"title": 100.0, "overlap": 66.7}
    tests = build([str(tmp_path / "title"), str(tmp_path / "overlap")], resamples=50).significance
    recall = next(s.test for s in tests if s.column.key == key)
    assert (recall.mean_a, recall.mean_b) == pytest.approx((100.0, 200 / 3))


def test_a_run_resumed_past_its_metrics_json_is_refused(tmp_path):
    for name in ("a", "b"):
        qa_run(tmp_path / name, n=5, overrides=[f"+method={name}"])
        predictions = tmp_path / name / "predictions.jsonl"
        extra = {**json.loads(predictions.read_text().splitlines()[0]), "id": "q99"}  # a rerun with a larger limit
        predictions.write_text(predictions.read_text() + json.dumps(extra) + "\n")
    a = tmp_path / "a"
    expected = f"{a / 'metrics.json'} covers 5 questions but {a / 'predictions.jsonl'} holds 6"
    with pytest.raises(CompareError, match=re.escape(expected)):
        build([str(tmp_path / "a"), str(tmp_path / "b")])


# -- corrupt files -----------------------------------------------------------------------------------------------


@pytest.fixture
def two_runs(tmp_path) -> list[str]:
    for name in ("a", "b"):
        qa_run(tmp_path / name, n=5, overrides=[f"+method={name}"])
    return [str(tmp_path / "a"), str(tmp_path / "b")]


def test_a_truncated_metrics_json_is_named_with_its_line_on_one_line_without_traceback(tmp_path, two_runs, capsys):
    path = tmp_path / "b" / "metrics.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    line = text[: len(text) // 2].count("\n") + 1
    with pytest.raises(SystemExit) as stop:
        main(two_runs)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    (printed,) = err.strip().splitlines()  # the message alone, without the usage
    assert printed.startswith(f"python compare.py: error: {path}, line {line}: not JSON")


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ({"run": {"n": 5}}, "no 'metrics' object"),
        ([1, 2], "no 'run' object"),
        ({"run": {"n": 5}, "metrics": {"n": 5, "em": "high"}}, "metrics['em'] is 'high', not a number"),
    ],
)
def test_a_metrics_json_without_what_compare_reads_is_named_with_the_key(tmp_path, two_runs, content, expected):
    path = tmp_path / "b" / "metrics.json"
    path.write_text(json.dumps(content))
    with pytest.raises(CompareError, match=re.escape(f"{path}: {expected}")):
        build(two_runs)


def _edit_line(path: Path, line: int, edit: Callable[[str], str]) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[line - 1] = edit(lines[line - 1])
    path.write_text("".join(lines))


def _without(key: str) -> Callable[[str], str]:
    return lambda line: json.dumps({k: v for k, v in json.loads(line).items() if k != key}) + "\n"


@pytest.mark.parametrize(
    ("line", "edit", "expected"),
    [
        (2, lambda s: s[:20] + "\n", "line 2: not JSON"),
        (5, lambda s: s[:20], "line 5: truncated"),  # a finished run wrote every line whole
        (3, lambda s: "[1, 2]\n", "line 3: not a prediction record"),
        (2, _without("cost"), "line 2: the record has no 'cost', which compare reads"),
        (4, _without("question"), "line 4: the record has no 'question', which compare reads"),
        (3, lambda s: s.replace('"golds": ["yes"]', '"golds": "yes"'), "line 3: a malformed record"),
    ],
)
def test_a_corrupt_predictions_line_is_named_with_its_path_and_line(tmp_path, two_runs, line, edit, expected):
    path = tmp_path / "b" / "predictions.jsonl"
    _edit_line(path, line, edit)
    with pytest.raises(CompareError, match=re.escape(f"{path}, {expected}")):
        build(two_runs)


def test_resuming_drops_a_last_line_cut_inside_a_character(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_bytes(b'{"id": "q0"}\n' + '{"id": "q1", "question": "caf\u00e9"}'.encode()[:-3])  # é cut in half
    assert [r["id"] for r in PredictionFile(path).records] == ["q0"]
