"""CRAG's rates carry their judge's name in everything a run writes (issue 30, item 3): eval.py on the bundled
CRAG questions with the scripted LLM writes `crag/acc@exact` (no judge) or `crag/acc@rule` (the offline aid),
never a plain `crag/acc`, in metrics.json, in each record's scores and in what it prints; `optimized_metric`
resolves `crag/score@*` to the run's one judge and refuses a plain `crag/score`; a comparison shows each judge's
rates in columns of their own."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hoprag.compare import main as compare_main

PLAIN = re.compile(r"^crag/(.+/)?(acc|hall|miss|score)$")  # a CRAG rate without its judge
RULE = "metrics.crag_judge={_target_:hoprag.evaluation.judges.NormalizedMatchJudge}"



def evaluate(eval_main, compose_cfg, run_dir: Path, *overrides: str) -> tuple[float, dict, list[dict]]:
    """eval.py's main on the 10 bundled CRAG questions, the scripted LLM answering (`yes` to each)."""
    cfg = compose_cfg("eval", ["+method=no_retrieval", "data=crag", "llm=scripted", "~logger", "show=0", *overrides])
    cfg.paths.output_dir = str(run_dir)
    value = eval_main(cfg)
    report = json.loads((run_dir / "metrics.json").read_text())
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    return value, report["metrics"], records


def assert_named(metrics: dict, records: list[dict], judge: str) -> None:
    rates = [k for k in metrics if k.startswith("crag/") and "@" in k]
    assert not [k for k in metrics if PLAIN.match(k)] and all(k.endswith(f"@{judge}") for k in rates)
    assert {f"crag/{rate}@{judge}" for rate in ("acc", "hall", "miss", "score")} <= set(metrics)
    assert all(r["crag"]["judge"] == judge for r in records)
    assert not [k for r in records for k in r["scores"] if PLAIN.match(k)]


def test_without_a_judge_every_crag_rate_is_named_exact(eval_main, compose_cfg, tmp_path, capsys):
    value, metrics, records = evaluate(eval_main, compose_cfg, tmp_path / "exact", "optimized_metric=crag/score@*")
    assert_named(metrics, records, "exact")
    assert metrics["n"] == 10 and metrics["crag/acc@exact"] == 10.0  # "yes" matches the one yes/no question
    assert metrics["crag/unjudged"] == 9 and metrics["crag/domain/open/acc@exact"] == 33.3
    assert value == metrics["crag/score@exact"] == -80.0  # @* resolved to the run's one judged Score, and said so
    printed = capsys.readouterr().out
    assert "objective: crag/score@* is crag/score@exact" in printed and "crag/acc@exact" in printed
    assert not [line for line in printed.splitlines() if re.match(r"^\s+crag/(acc|hall|miss|score)\s", line)]


def test_a_plain_crag_objective_is_refused_naming_the_judged_ones(eval_main, compose_cfg, tmp_path):
    with pytest.raises(KeyError, match=r"'crag/score'.*crag/score@exact"):
        evaluate(eval_main, compose_cfg, tmp_path, "optimized_metric=crag/score")
    assert "crag/acc@exact" in json.loads((tmp_path / "metrics.json").read_text())["metrics"]  # the run is kept


def test_the_rule_judge_names_every_rate_rule_and_a_comparison_keeps_judges_apart(eval_main, compose_cfg, tmp_path):
    value, metrics, records = evaluate(eval_main, compose_cfg, tmp_path / "rule", RULE,
                                       "optimized_metric=crag/score@rule")  # fmt: skip
    assert_named(metrics, records, "rule")
    assert metrics["crag/rule_judged"] == 9 and metrics["crag/unjudged"] == 0 and value == metrics["crag/score@rule"]
    evaluate(eval_main, compose_cfg, tmp_path / "exact")
    out = tmp_path / "report"
    assert compare_main([str(tmp_path / "exact"), str(tmp_path / "rule"), "--out", str(out), "--resamples", "50"]) == 0
    report = (out / "report.md").read_text()
    for judge in ("exact", "rule"):
        assert all(f"CRAG {rate}@{judge}" in report for rate in ("acc", "hall", "score"))
    assert "CRAG acc |" not in report and "CRAG score |" not in report  # no column without its judge
