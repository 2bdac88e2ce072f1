"""reproduce end to end on the scripted LLM: a small table's rows run as one `eval.py` multirun through the row
sweeper, the table is written with the paper's figures beside hoprag's, and a rerun of the finished table runs
nothing and writes the same files."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from hoprag.reproduce import Table, reproduce, runner
from hoprag.reproduce.plan import RUNS


def small_table(tmp_path) -> Table:
    return Table.parse({
        "name": "small", "title": "A small table", "digest": "spec/none.md", "baseline": "rag",
        "scales": {
            "smoke": {"label": "scripted", "overrides": ["limit=2", "llm=scripted", "retriever=bm25",
                                                         f"paths.cache_dir={tmp_path / 'cache'}"]},
            "paper": {"label": "unused", "overrides": ["aids=none"]},
        },
        "groups": {"hotpotqa": {"label": "HotpotQA", "overrides": ["data=hotpotqa"]},
                   "avg": {"label": "Avg", "mean_of": ["hotpotqa"]}},
        "metrics": {"f1": {"label": "F1", "key": "f1"},
                    "recall": {"label": "R@5", "key": "retrieval/passage_recall@5"}},
        "columns": [["hotpotqa", "f1"], ["hotpotqa", "recall"], ["avg", "f1"]],
        "rows": [
            {"id": "rag", "name": "Standard RAG", "overrides": ["+method=standard_rag"],
             "paper": {"hotpotqa/f1": 55.6, "hotpotqa/recall": 70.0}},
            {"id": "closed", "name": "Closed book", "overrides": ["+method=no_retrieval"],
             "paper": {"hotpotqa/f1": 34.1}},
            {"id": "em", "name": "RAG's EM", "run": "rag", "keys": {"f1": "em"}},
            {"id": "other", "name": "Not in hoprag", "skip": "not implemented", "paper": {"avg/f1": 60.0}},
        ],
    })  # fmt: skip


def test_a_table_runs_as_one_multirun_and_a_rerun_runs_nothing_and_writes_the_same_table(tmp_path, monkeypatch):
    out = tmp_path / "out"
    _, unfinished = reproduce(small_table(tmp_path), "smoke", out, ["show=0", "logger=csv"], resamples=200)
    assert unfinished == []
    jobs = json.loads((out / "jobs.json").read_text())
    assert [job[-1] for job in jobs] == ["hydra.sweep.subdir=rag/hotpotqa", "hydra.sweep.subdir=closed/hotpotqa"]
    rag = out / RUNS / "rag" / "hotpotqa"
    assert "+method=standard_rag" in yaml.safe_load((rag / ".hydra" / "overrides.yaml").read_text())
    assert json.loads((rag / "metrics.json").read_text())["run"]["n"] == 2

    md = (out / "table.md").read_text()
    assert md.startswith("# A small table\n\n**Smoke scale: mechanics, not quality.** scripted")
    rag_row = next(line for line in md.splitlines() if line.startswith("| Standard RAG |"))
    assert rag_row.startswith("| Standard RAG | 55.6 / ") and "–" not in rag_row.split("|")[2]
    assert "| Not in hoprag | – / skipped[" in md and "not implemented" in md
    assert "no figure" in next(line for line in md.splitlines() if line.startswith("| Closed book |"))
    assert "## Paired tests against Standard RAG" in md and "| Closed book | HotpotQA F1 | 2 |" in md
    csv_text = (out / "table.csv").read_text()
    assert csv_text.startswith("row,group,metric,paper,paper_note,hoprag,delta,status,reason,n,")
    assert "<table>" in (out / "table.html").read_text()

    files = {name: (out / name).read_bytes() for name in ("table.md", "table.csv", "paired.csv", "table.html")}
    stamps = {p: p.stat().st_mtime_ns for p in (out / RUNS).rglob("metrics.json")}

    def no_launch(*args, **kwargs):
        raise AssertionError("a finished table launched jobs")

    monkeypatch.setattr(runner, "launch", no_launch)
    _, unfinished = reproduce(small_table(tmp_path), "smoke", out, ["show=3", "logger=csv"], resamples=200)
    assert unfinished == []  # show is run control: the runs are still the finished ones
    assert {name: (out / name).read_bytes() for name in files} == files
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps


def test_the_row_sweeper_refuses_a_sweep_on_the_command_line(tmp_path):
    (tmp_path / "jobs.json").write_text(json.dumps([["+method=no_retrieval"]]))
    command = runner.multirun_command(tmp_path, ["limit=1,2", "llm=scripted"])
    done = subprocess.run(command, check=False, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode != 0 and "would multiply them: ['limit=1,2']" in done.stderr


@pytest.mark.slow
def test_the_launcher_chosen_on_reproduces_command_line_runs_the_rows(tmp_path):
    """joblib runs the rows side by side (two worker processes)."""
    out = tmp_path / "out"
    launcher = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    _, unfinished = reproduce(small_table(tmp_path), "smoke", out, ["show=0", "logger=csv"], launcher, resamples=200)
    assert unfinished == [] and (out / "table.md").is_file()
    assert "joblib" in (out / RUNS / "multirun.yaml").read_text()
