"""ASQA (official split-keyed ASQA.json) and AmbigDocs (official JSON list) load into `QAExample`s with the
gold structure their metrics need, from hand-written fixtures in the official formats."""

from __future__ import annotations

import json

import pytest
from hydra.utils import instantiate

from hoprag.data import DataFormatError, QADataset, detect_format, load_questions
from hoprag.metrics import EvalRow
from hoprag.paths import PROJECT_ROOT

FIXTURES = PROJECT_ROOT / "tests" / "fixtures"
ASQA = FIXTURES / "asqa" / "ASQA.json"
AMBIGDOCS = FIXTURES / "ambigdocs" / "test.json"
DEV_IDS = ["-6497998034447212269", "8542165436721873340", "-2712356048127931120"]


def release() -> dict:
    return json.loads(ASQA.read_text(encoding="utf-8"))


def write(path, data) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_asqa_reads_the_dev_split_of_the_release_by_default():
    examples = load_questions(ASQA)
    assert [ex.id for ex in examples] == DEV_IDS
    dumbledore = examples[0]
    assert dumbledore.dataset == "asqa"
    assert dumbledore.question == "Who played Dumbledore in the Harry Potter movies?"
    assert dumbledore.answers == ["Richard Harris", "Michael Gambon", "Sir Michael Gambon"]  # flattened
    assert dumbledore.supporting_titles == ["Albus Dumbledore", "Richard Harris", "Michael Gambon"]
    assert dumbledore.context == []  # open-domain
    assert dumbledore.metadata["ambiguity"] == {"qa_pairs": [
        {"question": "Who played Dumbledore in the first two Harry Potter movies?",
         "short_answers": ["Richard Harris"]},
        {"question": "Who played Dumbledore in the Harry Potter movies after Prisoner of Azkaban?",
         "short_answers": ["Michael Gambon", "Sir Michael Gambon"]},
    ]}  # fmt: skip
    # the official fields stay as they are: pair contexts, wikipages, the annotators' long answers
    official = release()["dev"][DEV_IDS[0]]
    for key in ("qa_pairs", "wikipages", "annotations"):
        assert dumbledore.metadata[key] == official[key]
    assert len(examples[2].metadata["ambiguity"]["qa_pairs"]) == 3


def test_asqa_split_selection():
    assert [ex.id for ex in load_questions(ASQA, split="train")] == ["-3370342766466404035"]
    assert load_questions(ASQA, format="asqa", split="dev", limit=2) == load_questions(ASQA)[:2]
    with pytest.raises(DataFormatError, match=r"ASQA\.json has no split 'test'; it has \['dev', 'train'\]"):
        load_questions(ASQA, split="test")
    with pytest.raises(ValueError, match="holds one split"):
        load_questions(AMBIGDOCS, split="dev")


def test_asqa_records_as_a_list_load_like_the_release(tmp_path):
    """TreeRare's own asqa.json is a list of the same records."""
    records = list(release()["dev"].values())
    assert detect_format(records[0]) == "asqa"
    as_list = load_questions(write(tmp_path / "asqa.json", records))
    assert as_list == load_questions(ASQA)


def test_a_pretty_printed_release_is_recognised(tmp_path):
    path = tmp_path / "ASQA.json"
    path.write_text(json.dumps(release(), indent=2), encoding="utf-8")
    assert load_questions(path) == load_questions(ASQA)


def test_ambigdocs_documents_become_context_titles_answers_and_the_ambiguity():
    examples = load_questions(AMBIGDOCS)
    assert [ex.id for ex in examples] == ["1045", "2210", "377", "5123"]
    assert {ex.dataset for ex in examples} == {"ambigdocs"}
    griswold = examples[0]
    assert griswold.question == "What is the location of the Griswold House?"
    assert griswold.answers == ["east of Guilford Center", "76 Bellevue Avenue in Newport, Rhode Island"]
    assert griswold.supporting_titles == ["Griswold House (Guilford, Connecticut)", "John N. A. Griswold House"]
    assert [p.title for p in griswold.context] == griswold.supporting_titles
    assert griswold.context[1].text.startswith("John N. A. Griswold House The John N. A. Griswold House is")
    assert griswold.metadata == {
        "pids": ["11873902", "5377116"],
        "ambiguity": {
            "ambiguous_entity": "Griswold House",
            "documents": [
                {"title": "Griswold House (Guilford, Connecticut)", "answer": "east of Guilford Center"},
                {"title": "John N. A. Griswold House", "answer": "76 Bellevue Avenue in Newport, Rhode Island"},
            ],
        },
    }
    assert examples[2].metadata["ambiguity"]["ambiguous_entity"] == "Michael Jordan (disambiguation)"
    assert len(examples[3].metadata["ambiguity"]["documents"]) == 6  # all kept; the metrics take the first 5
    assert detect_format(json.loads(AMBIGDOCS.read_text())[0]) == "ambigdocs"
    assert load_questions(AMBIGDOCS, format="ambigdocs", limit=2) == examples[:2]


def test_eval_rows_carry_the_ambiguity():
    asqa, ambigdocs = load_questions(ASQA)[0], load_questions(AMBIGDOCS)[0]
    assert EvalRow.from_example(asqa, "x").ambiguity == asqa.metadata["ambiguity"]
    row = EvalRow.from_example(ambigdocs, "x")
    assert row.ambiguity == ambigdocs.metadata["ambiguity"]
    assert row.gold_titles == ambigdocs.supporting_titles and len(row.gold_passages) == 2


def _bad_asqa(field: str, value) -> dict:
    data = release()
    sample = data["dev"][DEV_IDS[1]]
    if field == "ambiguous_question" and value is KeyError:
        del sample[field]
    elif field.startswith("qa_pairs[1]."):
        sample["qa_pairs"][1][field.removeprefix("qa_pairs[1].")] = value
    else:
        sample[field] = value
    return data


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("qa_pairs", [], "'qa_pairs' must be a non-empty list of objects, got \\[\\]"),
        ("qa_pairs", ["Who?"], "'qa_pairs\\[0\\]' must be an object"),
        ("qa_pairs[1].short_answers", None, "'qa_pairs\\[1\\].short_answers' must be a list of strings"),
        ("qa_pairs[1].short_answers", [], "'qa_pairs\\[1\\].short_answers' is empty"),
        ("qa_pairs[1].question", "", "'qa_pairs\\[1\\].question' must be a non-empty string"),
        ("ambiguous_question", KeyError, "missing required key 'ambiguous_question'"),
        ("ambiguous_question", None, "'ambiguous_question' must be a non-empty string, got null"),
    ],
)
def test_a_malformed_asqa_sample_is_named_with_its_file_split_and_id(tmp_path, field, value, message):
    path = write(tmp_path / "ASQA.json", _bad_asqa(field, value))
    with pytest.raises(DataFormatError, match=f"^{path}, dev sample '{DEV_IDS[1]}': {message}"):
        load_questions(path)


def test_a_broken_asqa_file_names_its_line(tmp_path):
    path = tmp_path / "ASQA.json"
    path.write_text(json.dumps(release(), indent=1)[:-40], encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"^{path}, line \d+: invalid JSON"):
        load_questions(path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["documents"][1].update(answer=None), "'documents\\[1\\].answer' must be a string or a number"),
        (lambda r: r["documents"][0].pop("title"), "missing required key 'title'"),
        (lambda r: r.update(documents=[]), "'documents' must be a non-empty list of objects"),
        (lambda r: r.update(ambiguous_entity=" "), "'ambiguous_entity' must be a non-empty string"),
        (lambda r: r.update(qid=None), "'qid' must be a string or an integer, got null"),
    ],
)
def test_a_malformed_ambigdocs_record_is_named_with_its_file_and_index(tmp_path, edit, message):
    records = json.loads(AMBIGDOCS.read_text(encoding="utf-8"))
    edit(records[1])
    path = write(tmp_path / "test.json", records)
    with pytest.raises(DataFormatError, match=f"^{path}, record index 1: {message}"):
        load_questions(path)


# the AmbigDocs fixture holds 4 questions, 2 of them the few-shot exemplars', which the config leaves out
@pytest.mark.parametrize(("data", "count"), [("asqa", 3), ("ambigdocs", 2)])
def test_the_data_configs_read_the_official_files_and_name_an_open_corpus(compose_cfg, data, count):
    cfg = compose_cfg("eval", [f"data={data}", f"paths.data_dir={FIXTURES}"])
    dataset = instantiate(cfg.data)
    assert isinstance(dataset, QADataset) and dataset.name == data and len(dataset) == count
    assert {ex.dataset for ex in dataset} == {data}
    assert cfg.data.corpus == "retrieval-corpus/wiki18_100w.jsonl"
