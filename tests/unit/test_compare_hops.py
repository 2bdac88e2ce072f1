"""Hop-level attribution (hoprag/compare/hops.py): each failure label from a constructed record, per-hop reading
steps, intermediate answers of the methods that record them scored against the gold sub-answers ("not produced"
otherwise), gold chains read through a run's config when its records predate them, and compare.py's section over
real runs of the runner (a normal run and one with hop 1's gold withheld by the oracle retriever); the same with
eval.py and the bundled SmolLM2 is marked slow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from hoprag.compare import main
from hoprag.compare.hops import attribute, config_chains, hop_report, reading_steps, run_attributions, sub_answers
from hoprag.data import QADataset
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.llm.gguf import share_conversions
from hoprag.methods import ChatPrompt, StandardRAG
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import BM25Retriever
from hoprag.retrieval.oracle import OracleRetriever

CHAIN = [{"question": "Who wrote X?", "answer": "Ann Lee", "title": "X"},
         {"question": "Where was #1 born?", "answer": "Paris", "title": "Ann Lee"}]  # fmt: skip


def record(prediction="Rome", em=0.0, read=("X", "Ann Lee"), method="standard_rag", trace=None, **extra) -> dict:
    """A prediction record (gold "Paris") that read passages with the titles `read`, in order."""
    retrieved = [{"id": f"p{i}", "title": t, "text": "..."} for i, t in enumerate(read)]
    return {"id": "q1", "method": method, "question": "Where was the author of X born?", "prediction": prediction,
            "golds": ["Paris"], "retrieved": retrieved, "parse_failed": False, "scores": {"em": em},
            "trace": trace or {}, "gold_hops": CHAIN, **extra}  # fmt: skip


def self_ask(*answers: str) -> dict:
    return {"turns": [{"turn": i, "follow_up": "q", "intermediate_answer": a} for i, a in enumerate(answers)]}


@pytest.mark.parametrize(
    ("made", "expected"),
    [
        (record("Paris", em=1.0), "correct"),
        (record("He was born in Paris"), "answer-format"),  # the gold is in the output, the extraction wrong
        (record("", trace={"output": "blah. Paris"}, parse_failed=True), "answer-format"),  # found in the raw output
        (record(gold_hops=[]), "no-chain"),
        (record(gold_hops=[{**CHAIN[0], "title": None}]), "no-chain"),  # no hop with a known passage
        (record(read=("Ann Lee",)), "first-missed-hop-1"),
        (record(read=("X", "Other")), "first-missed-hop-2"),
        (record(read=()), "first-missed-hop-1"),  # the first missed hop, not every one
        (record(method="self_ask", trace=self_ask("Bob Day", "Rome")), "bridge-wrong"),
        (record(method="self_ask", trace=self_ask("Ann Lee", "Rome")), "reasoning"),  # hop 1's answer right
        (record(method="self_ask", trace=self_ask()), "reasoning"),  # no intermediate answer recorded
        (record(), "reasoning"),  # the method records no intermediate answers
        (record(generated=False), None),  # retrieval only: no label
    ],
)
def test_each_failure_label_from_a_constructed_record(made, expected):
    assert attribute(made).label == expected


def test_unknown_hops_are_skipped_by_the_missed_rule():
    made = record(read=("Ann Lee",), gold_hops=[{**CHAIN[0], "title": None}, CHAIN[1]])
    found = attribute(made)
    assert found.label == "reasoning" and [(h.known, h.step) for h in found.hops] == [(False, None), (True, 1)]


def test_reading_steps_count_distinct_passages_in_reading_order():
    made = record(read=("A", "X", "A", "B", "Ann Lee"))
    made["retrieved"][2]["id"] = "p0"  # the same passage read again: it takes no new step
    assert reading_steps(made) == {"A": 1, "X": 2, "B": 3, "Ann Lee": 4}
    assert [h.step for h in attribute(made).hops] == [2, 4]


def test_intermediate_answers_are_scored_against_the_gold_sub_answers():
    found = attribute(record(method="self_ask", trace=self_ask("the writer Ann Lee", "Paris, France")))
    hop1, hop2 = found.hops
    assert found.produced and (hop1.contains, hop1.em) == (1.0, 0.0) and hop1.f1 == pytest.approx(0.8)
    assert (hop2.contains, hop2.em) == (1.0, 0.0) and hop2.f1 == pytest.approx(2 / 3)  # the best answer each
    none = attribute(record())
    assert not none.produced and all(h.contains is None and h.em is None for h in none.hops)  # not produced


def test_each_methods_trace_gives_its_intermediate_answers():
    prunerag = {"tree": {"query": "Q", "answer": "Paris", "children": [
        {"query": "Who wrote X?", "kind": "query", "answer": "Ann Lee", "children": []},
        {"query": "X", "kind": "entity", "answer": "", "children": []}]}}  # fmt: skip
    probtree = {"tree": {"question": "Q", "chosen": "cb", "candidates": [{"kind": "cb", "answer": "Rome"}],
                         "children": [{"question": "Who wrote X?", "chosen": "ob", "children": [],
                                       "candidates": [{"kind": "cb", "answer": "Bob"},
                                                      {"kind": "ob", "answer": "Ann Lee"}]}]}}  # fmt: skip
    treerare = {"tree": {"nodes": [{"phrase": "X", "sag_output": "X was written by Ann Lee."},
                                   {"phrase": "Q", "sag_output": None}]}}  # fmt: skip
    assert sub_answers(record(method="prunerag", trace=prunerag)) == ["Ann Lee"]  # the root's is the final one
    assert sub_answers(record(method="probtree", trace=probtree)) == ["Ann Lee"]  # each node's chosen answer
    assert sub_answers(record(method="treerare", trace=treerare)) == ["X was written by Ann Lee."]
    assert sub_answers(record(method="self_ask", trace=self_ask("Ann Lee"))) == ["Ann Lee"]
    assert sub_answers(record(method="ircot")) is None


def musique_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Two runs of the runner over 10 MuSiQue questions (BM25, a scripted LLM answering with the top passage's
    title): a normal one, and one whose retriever withholds hop 1's gold passage."""
    dataset = QADataset("musique", "musique/musique_ans_dev_200.jsonl", format="musique", limit=10)
    bm25 = BM25Retriever(dataset.corpus())
    prompt = ChatPrompt("Use the passages.", "{passages}\n\nQuestion: {question}\nAnswer:")
    dirs = []
    for name, retriever in (("normal", bm25), ("withheld", OracleRetriever(bm25, mode="withhold", hops=[1]))):
        llm = ScriptedLLM(rules=[(r"\[1\] ([^\n]*)", r"Answer: \1", -0.5)])
        run(StandardRAG(llm, retriever, prompt=prompt, k=5), dataset.examples, tmp_path / name, batch_size=4)
        (tmp_path / name / ".hydra").mkdir()
        overrides = ["data=musique", *(["+oracle=withhold"] if name == "withheld" else [])]
        (tmp_path / name / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
        dirs.append(tmp_path / name)
    return dirs[0], dirs[1]


def group(name: str, *paths: Path) -> SimpleNamespace:
    """What hop_report reads of a compare group: its name and its runs' directories."""
    return SimpleNamespace(name=name, runs=[SimpleNamespace(path=p) for p in paths])


def test_compare_prints_the_failure_labels_and_per_hop_recall(tmp_path, capsys):
    normal, withheld = musique_runs(tmp_path)
    assert main([str(normal), str(withheld), "--resamples", "200", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "Failure labels per run" in printed and "Per-hop gold-passage recall" in printed
    report = hop_report([group("normal", normal), group("withheld", withheld)])
    by_name = {r.name: r for r in report.rows}
    assert by_name["withheld"].read[1] == 0 < by_name["normal"].read[1]  # hop 1's gold never read when withheld
    assert by_name["withheld"].labelled == by_name["normal"].labelled == 10
    assert sum(by_name["withheld"].labels.values()) == 10 and report.hops >= 2
    section = printed.split("Hop attribution over the gold chains")[1].split("\nRuns:")[0]
    lines = [line for line in section.splitlines() if line.startswith("| +oracle=withhold")]
    assert len(lines) == 3 and lines[1].split("|")[2].strip().startswith("0.0 (0/10")  # labels, recall, sub-answers
    assert "not produced" in lines[2]
    rows = (tmp_path / "out" / "hops.csv").read_text().splitlines()
    assert rows[0].startswith("run,id,label,hop1_step,hop2_step") and len(rows) == 21
    assert "Hop attribution" in (tmp_path / "out" / "report.html").read_text()
    page = (tmp_path / "out" / "explorer.html").read_text()  # the explorer filters by each run's label and hop missed
    data = json.loads(page.split('<script type="application/json" id="data">')[1].split("</script>")[0])
    filters = {f["key"]: f["values"] for f in data["filters"]}
    assert 1 in filters["hop missed"] and set(filters["failure"]) <= {a.label for _, a in report.per_question}


def test_chains_come_from_the_runs_config_when_its_records_predate_them(tmp_path):
    normal, _ = musique_runs(tmp_path)
    path = normal / "predictions.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "gold_hops"}) + "\n" for r in records))
    (normal / ".hydra" / "config.yaml").write_text(
        "data:\n  questions: musique/musique_ans_dev_200.jsonl\n  format: musique\n  root: null\n")
    found, notes = run_attributions(normal)
    assert [a.hops for a in found] == [attribute(r).hops for r in records]
    assert len(notes) == 1 and notes[0].startswith("normal: gold chains read from ")
    assert notes[0].endswith("musique_ans_dev_200.jsonl (its records predate `gold_hops`)")
    (normal / ".hydra" / "config.yaml").write_text("data:\n  questions: nowhere/missing.jsonl\n  format: musique\n")
    found, notes = run_attributions(normal)
    assert all(a.label in ("correct", "answer-format", "no-chain") for a in found) and "is not here" in notes[0]
    for said in ("data: {}\n", "data:\n  questions: hotpotqa/x.json\n  format: hotpotqa\n"):  # nothing to look for
        (normal / ".hydra" / "config.yaml").write_text(said)
        assert config_chains(normal) == (None, "")


def test_a_run_whose_records_cannot_be_read_is_noted_and_left_out(tmp_path):
    normal, withheld = musique_runs(tmp_path)
    (withheld / "predictions.jsonl").unlink()
    report = hop_report([group("normal", normal), group("withheld", withheld)])
    assert [r.labelled for r in report.rows] == [10, 0]
    assert report.notes[0].startswith("withheld: left out of the hop attribution, its records could not be read")
    assert hop_report([group("withheld", withheld)]) is None  # no chain anywhere: no section, no note


@pytest.mark.slow
def test_eval_py_with_smollm2_normal_and_hop1_withheld_then_compare(tmp_path):
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")),
           "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    common = ["+method=standard_rag", "data=musique", "data.limit=5", "llm=smollm2", "retriever=bm25", "~logger",
              "show=0"]  # fmt: skip
    for name, extra in (("normal", []), ("withheld", ["+oracle=withhold", "oracle.hops=[1]"])):
        proc = subprocess.run([sys.executable, "eval.py", *common, *extra, f"hydra.run.dir={tmp_path / name}"],
                              cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((tmp_path / "withheld" / "metrics.json").read_text())["metrics"]
    assert metrics["oracle/questions"] == 5 and metrics["oracle/withheld"] >= 0
    shown = subprocess.run([sys.executable, "compare.py", str(tmp_path / "normal"), str(tmp_path / "withheld"),
                            "--resamples", "200"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                           timeout=300)  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "Failure labels per run" in shown.stdout and "0.0 (0/5" in shown.stdout
