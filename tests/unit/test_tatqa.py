"""TAT-QA: the bundled official dev file loads whole (one example per question, its table and paragraphs as
origin-named passages), one context record yields several examples, and malformed records fail with the
file, the record index and the field."""

from __future__ import annotations

import copy
import json
from collections import Counter

import pytest

from hoprag.data import DataFormatError, QADataset, detect_format, load_questions, pool_corpus
from hoprag.data.tatqa import render_table
from hoprag.paths import data_root

DEV = data_root() / "tatqa" / "tatqa_dataset_dev.json"

CONTEXT = {
    "table": {"uid": "t1", "table": [["", "2019", "2018"], ["Revenue", "$ 1,000", "900"], ["", "", ""],
                                     ["Net\nincome", "10", "(5)"]]},
    "paragraphs": [{"uid": "p2", "order": 2, "text": "Second."}, {"uid": "p1", "order": 1, "text": "First."}],
    "questions": [
        {"uid": "q1", "order": 1, "question": "What was revenue in 2019?", "answer": ["$ 1,000"], "derivation": "",
         "answer_type": "span", "answer_from": "table", "rel_paragraphs": [], "req_comparison": False,
         "scale": "thousand"},
        {"uid": "q2", "order": 2, "question": "What is the change?", "answer": 11.11, "derivation": "(1000-900)/900",
         "answer_type": "arithmetic", "answer_from": "table-text", "rel_paragraphs": ["1"], "req_comparison": False,
         "scale": "percent"},
        {"uid": "q3", "order": 3, "question": "How many?", "answer": 2, "derivation": "", "answer_type": "count",
         "answer_from": "text", "rel_paragraphs": ["1", "2"], "req_comparison": False, "scale": ""},
    ],
}  # fmt: skip


def write(tmp_path, records):
    path = tmp_path / "tatqa_small.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def test_the_bundled_dev_file_loads_every_question_with_its_gold_source():
    examples = load_questions(DEV)  # the format is told by the record's keys
    assert len(examples) == 1668
    assert len({ex.metadata["context_uid"] for ex in examples}) == 278
    assert Counter(ex.metadata["answer_from"] for ex in examples) == {"table": 772, "table-text": 507, "text": 389}
    assert len({ex.id for ex in examples}) == 1668
    assert {ex.dataset for ex in examples} == {"tatqa"}
    assert Counter(ex.type for ex in examples) == {"arithmetic": 718, "span": 701, "multi-span": 217, "count": 32}
    for ex in examples:
        assert ex.answers and all(isinstance(a, str) for a in ex.answers)
        assert ex.context[0].origin == "table" and ex.context[0].id == ex.metadata["context_uid"]
        assert {p.origin for p in ex.context[1:]} == {"text"}
    first = examples[0]
    assert first.question == "What is the company paid on a cost-plus type contract?"
    assert first.context[0].text.splitlines()[2] == "Fixed Price | $ 1,452.4 | $ 1,146.2 | $ 1,036.9"
    assert first.metadata["scale"] == "" and first.metadata["rel_paragraphs"] == ["2"]
    multi = next(ex for ex in examples if ex.type == "multi-span")
    assert len(multi.answers) > 1
    corpus = pool_corpus(examples)
    assert Counter(p.origin for p in corpus)["table"] == 278


def test_detect_format_tells_a_tatqa_context():
    assert detect_format(CONTEXT) == "tatqa"
    assert detect_format({"paragraphs": [], "question_decomposition": []}) == "musique"


def test_one_context_gives_one_example_per_question(tmp_path):
    examples = load_questions(write(tmp_path, [CONTEXT]))
    assert [ex.id for ex in examples] == ["q1", "q2", "q3"]
    q1, q2, q3 = examples
    assert q1.answers == ["$ 1,000"] and q2.answers == ["11.11"] and q3.answers == ["2"]
    assert (q1.type, q2.metadata["answer_type"]) == ("span", "arithmetic")
    assert q2.metadata == {"context_uid": "t1", "answer_from": "table-text", "answer_type": "arithmetic",
                           "scale": "percent", "rel_paragraphs": ["1"], "order": 2, "derivation": "(1000-900)/900",
                           "req_comparison": False}  # fmt: skip
    table, *paragraphs = q1.context
    assert (table.id, table.origin) == ("t1", "table")
    assert table.text == " | 2019 | 2018\nRevenue | $ 1,000 | 900\nNet income | 10 | (5)"
    assert [(p.id, p.text, p.origin) for p in paragraphs] == [("p1", "First.", "text"), ("p2", "Second.", "text")]


def test_limit_counts_questions_not_contexts(tmp_path):
    second = copy.deepcopy(CONTEXT)
    second["table"]["uid"] = "t2"
    for q in second["questions"]:
        q["uid"] += "b"
    examples = load_questions(write(tmp_path, [CONTEXT, second]), limit=4)
    assert [ex.id for ex in examples] == ["q1", "q2", "q3", "q1b"]


def test_render_table_keeps_columns_and_rows_apart():
    rows = [["", "a  b", ""], ["", "", ""], ["x\ny", "1", "2"]]
    text = render_table(rows)
    assert text == " | a b | \nx y | 1 | 2"
    assert [line.split(" | ") for line in text.splitlines()] == [["", "a b", ""], ["x y", "1", "2"]]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["questions"][1].pop("answer_from"), r"missing required key 'questions\[1\]\.answer_from'"),
        (lambda r: r["questions"][2].update(answer_from="image"), r"'questions\[2\].answer_from' must be one of"),
        (lambda r: r["questions"][0].update(answer=None), r"'questions\[0\].answer' must be a string or a number"),
        (lambda r: r["questions"][0].update(answer=[]), r"'questions\[0\].answer' is empty"),
        (lambda r: r["questions"][0].update(question=" "), r"'questions\[0\].question' must be a non-empty string"),
        (lambda r: r["table"]["table"][1].__setitem__(2, 900), r"'table.table\[1\]\[2\]' must be a string"),
        (lambda r: r["table"].pop("uid"), "missing required key 'table.uid'"),
        (lambda r: r["paragraphs"][0].update(text=None), r"'paragraphs\[0\].text' must be a string"),
        (lambda r: r.update(questions=[]), "'questions' must be a non-empty list of objects"),
    ],
)
def test_a_malformed_context_names_file_record_and_field(tmp_path, edit, message):
    bad = copy.deepcopy(CONTEXT)
    edit(bad)
    with pytest.raises(DataFormatError, match=message) as err:
        load_questions(write(tmp_path, [CONTEXT, bad]), format="tatqa")
    assert "tatqa_small.json, record index 1" in str(err.value)


def test_the_dataset_config_pools_tables_and_paragraphs(compose_cfg):
    from hydra.utils import instantiate

    dataset = instantiate(compose_cfg("eval_retrieval", ["data=tatqa", "limit=5"]).data)
    assert isinstance(dataset, QADataset) and len(dataset) == 5
    assert len([p for p in dataset.corpus() if p.origin == "table"]) == 278  # the corpus pools every context
