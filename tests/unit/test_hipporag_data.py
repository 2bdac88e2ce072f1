"""HippoRAG 2's NQ and PopQA subsets: the loader on files in the official layout, their configs, and the
Self-Correcting RAG tables' NQ / PopQA columns that read them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hoprag.data import DataFormatError, QADataset, detect_format, load_questions
from hoprag.reproduce import plan
from tests.tables import load

PARAGRAPHS = [
    {"title": "George Rankin", "text": "George James Rankin was an Australian politician.", "is_supporting": True},
    {"title": "George Rankin", "text": "Rankin was born in Bamawm, Victoria.", "is_supporting": False},
    {"title": "Thomas Marwick", "text": "Thomas Marwick was a politician.", "is_supporting": False},
]
POPQA = {"id": 4222362, "prop": "occupation", "obj": "politician", "question": "What is George Rankin's occupation?",
         "possible_answers": '["politician", "political leader", "political figure"]', "paragraphs": PARAGRAPHS}
NQ = {"question": "who was george rankin", "answer": ["Australian politician"], "paragraphs": PARAGRAPHS}


def write(path: Path, records: list) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def test_popqa_answers_are_parsed_from_their_json_string(tmp_path):
    [ex] = load_questions(write(tmp_path / "popqa.json", [POPQA]), dataset="popqa")
    assert detect_format(POPQA) == "hipporag"
    assert ex.id == "4222362" and ex.type == "occupation" and ex.dataset == "popqa"
    assert ex.answers == ["politician", "political leader", "political figure"]


def test_gold_is_the_supporting_paragraphs_and_the_corpus_file_holds_their_ids(tmp_path):
    write(tmp_path / "hipporag2/nq.json", [NQ])
    corpus = [{"title": p["title"], "text": p["text"]} for p in PARAGRAPHS]
    write(tmp_path / "hipporag2/nq_corpus.json", corpus)
    data = QADataset(name="nq", questions="hipporag2/nq.json", format="hipporag",
                     corpus="hipporag2/nq_corpus.json", root=str(tmp_path))  # fmt: skip
    [ex] = data.examples
    assert ex.answers == ["Australian politician"]
    assert ex.supporting_titles == ["George Rankin"]
    assert len(data.corpus()) == 3  # two passages under one title stay two
    assert {p.id for p in ex.context} == {p.id for p in data.corpus()}


@pytest.mark.parametrize(("broken", "message"), [
    ({**POPQA, "possible_answers": "[politician"}, "'possible_answers' is not a JSON list"),
    ({**NQ, "paragraphs": [{"title": "T", "text": "x"}]}, "missing required key 'paragraphs[0].is_supporting'"),
])  # fmt: skip
def test_a_malformed_record_is_named_by_file_and_index(tmp_path, broken, message):
    path = write(tmp_path / "subset.json", [NQ, broken])
    with pytest.raises(DataFormatError, match=rf"subset\.json, record index 1: .*{re.escape(message)}"):
        load_questions(path, format="hipporag")


@pytest.mark.parametrize("name", ["nq", "popqa"])
def test_the_configs_compose_with_the_official_files(compose_cfg, name):
    cfg = compose_cfg("eval", ["+method=standard_rag", f"data={name}"])
    assert (cfg.data.questions, cfg.data.corpus) == (f"hipporag2/{name}.json", f"hipporag2/{name}_corpus.json")
    assert cfg.data.format == "hipporag"


@pytest.mark.parametrize("table", ["sc_rag_t3", "sc_rag_t5"])
def test_the_sc_rag_tables_run_nq_and_popqa_at_paper_scale_only(compose_cfg, tmp_path, table):
    for scale, runs in (("paper", True), ("smoke", False)):
        jobs = [j for j in plan(load(compose_cfg, table, scale), scale, tmp_path) if j.group in ("nq", "popqa")]
        assert jobs and all((not j.skip) == runs for j in jobs), (table, scale)
        assert all(f"data={j.group}" in j.overrides for j in jobs)
