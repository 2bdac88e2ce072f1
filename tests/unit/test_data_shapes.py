"""A field of the wrong shape, and an id given twice, fail at load time naming key (or id), file and line
(issue 27 §2), instead of being unpacked character by character, truncated, or failing without a name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoprag.data import DataFormatError, QADataset, load_questions, read_corpus

HOTPOT = {"_id": "h1", "question": "Q?", "answer": "A", "type": "bridge",
          "context": [["T", ["One.", " Two."]], ["U", ["Three."]]], "supporting_facts": [["T", 0], ["U", 0]]}  # fmt: skip
TWOWIKI = {**HOTPOT, "_id": "w1", "evidences": [["T", "director", "U"]]}
MUSIQUE = {"id": "2hop__1_2", "question": "Q?", "answer": "A", "answer_aliases": [], "answerable": True,
           "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "text", "is_supporting": True},
                          {"idx": 1, "title": "U", "paragraph_text": "other", "is_supporting": False}],
           "question_decomposition": [{"id": 1, "question": "q1", "answer": "A", "paragraph_support_idx": 0}]}  # fmt: skip
FLASHRAG = {"id": "f1", "question": "Q?", "golden_answers": ["A"],
            "metadata": {"supporting_facts": {"title": ["T"], "sent_id": [0]},
                         "context": {"title": ["T"], "sentences": [["One."]]}}}  # fmt: skip


def changed(record: dict, **fields) -> dict:
    return {**record, **fields}


def meta(**fields) -> dict:
    return changed(FLASHRAG, metadata={**FLASHRAG["metadata"], **fields})


def paragraphs(*changes: dict) -> list[dict]:
    return [{**p, **c} for p, c in zip(MUSIQUE["paragraphs"], changes)]


def write(path: Path, records: list[dict]) -> Path:
    """JSON list for .json (HotpotQA / 2Wiki as they ship), JSONL otherwise."""
    if path.suffix == ".json":
        path.write_text(json.dumps(records), encoding="utf-8")
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "format", "good", "bad", "message"),
    [
        ("hotpot.json", "hotpotqa", HOTPOT, changed(HOTPOT, supporting_facts="T0"),
         "'supporting_facts' must be a list, got str"),
        ("hotpot.json", "hotpotqa", HOTPOT, changed(HOTPOT, supporting_facts=[["T", "0"]]),
         "'supporting_facts\\[0\\]\\[1\\]' must be an integer, got \"0\""),
        ("hotpot.json", "hotpotqa", HOTPOT, changed(HOTPOT, supporting_facts=["T", 0]),
         "'supporting_facts\\[0\\]' must be a \\[title, sentence index\\] list, got \"T\""),
        ("hotpot.json", "hotpotqa", HOTPOT, changed(HOTPOT, context={"T": ["One."]}), "'context' must be a list, got dict"),
        ("hotpot.json", "hotpotqa", HOTPOT, changed(HOTPOT, context=[["T", ["One."], "extra"]]),
         "'context\\[0\\]' must be a \\[title, sentences\\] list"),
        ("2wiki.json", "2wikimultihopqa", TWOWIKI, changed(TWOWIKI, evidences=["T", "director", "U"]),
         "'evidences\\[0\\]' must be a \\[subject, relation, object\\] list, got \"T\""),
        ("2wiki.json", "2wikimultihopqa", TWOWIKI, changed(TWOWIKI, evidences=[["T", "director"]]),
         "'evidences\\[0\\]' must be a \\[subject, relation, object\\] list"),
        ("2wiki.json", "2wikimultihopqa", TWOWIKI, changed(TWOWIKI, evidences=[["T", "born", 1950]]),
         "'evidences\\[0\\]\\[2\\]' must be a string, got 1950"),
        ("musique.jsonl", "musique", MUSIQUE, changed(MUSIQUE, paragraphs=[MUSIQUE["paragraphs"][0],
         {k: v for k, v in MUSIQUE["paragraphs"][1].items() if k != "is_supporting"}]),
         "missing required key 'paragraphs\\[1\\].is_supporting'"),
        ("musique.jsonl", "musique", MUSIQUE, changed(MUSIQUE, paragraphs=paragraphs({}, {"is_supporting": "no"})),
         "'paragraphs\\[1\\].is_supporting' must be true or false, got \"no\""),
        ("musique.jsonl", "musique", MUSIQUE, changed(MUSIQUE, paragraphs=paragraphs({}, {"idx": "1"})),
         "'paragraphs\\[1\\].idx' must be an integer"),
        ("musique.jsonl", "musique", MUSIQUE, changed(MUSIQUE, question_decomposition=[{"id": 1, "question": "q1"}]),
         "missing required key 'question_decomposition\\[0\\].answer'"),
        ("questions.jsonl", "flashrag", FLASHRAG, changed(FLASHRAG, metadata="hotpotqa"),
         "'metadata' must be an object, got \"hotpotqa\""),
        ("questions.jsonl", "flashrag", FLASHRAG, meta(supporting_facts="T"),
         "'metadata.supporting_facts' must be a list, got str"),
        ("questions.jsonl", "flashrag", FLASHRAG, meta(supporting_facts={"title": ["T"], "sent_id": ["0"]}),
         "'metadata.supporting_facts.sent_id\\[0\\]' must be an integer"),
        ("questions.jsonl", "flashrag", FLASHRAG, meta(decomposition=["q1 >> A"]),
         "'metadata.decomposition\\[0\\]' must be an object"),
        ("questions.jsonl", "flashrag", FLASHRAG, meta(evidences="T director U"),
         "'metadata.evidences' must be a list, got str"),
        ("questions.jsonl", "flashrag", FLASHRAG, meta(context={"title": ["T", "U"], "sentences": [["One."]]}),
         "metadata.context: 'title' and 'sentences' differ in length"),
    ],
)
def test_a_field_of_the_wrong_shape_names_key_file_and_line(tmp_path, name, format, good, bad, message):
    path = write(tmp_path / name, [good, changed(bad, **{k: "second" for k in ("_id", "id") if k in bad})])
    where = "record index 1" if name.endswith(".json") else "line 2"
    with pytest.raises(DataFormatError, match=rf"{name.replace('.', '[.]')}, {where}: {message}"):
        load_questions(path, format=format)


def test_a_repeated_passage_id_names_the_id_and_both_lines(tmp_path):
    lines = [{"id": "1", "contents": "A\none"}, {"id": "2", "contents": "B\ntwo"}, {"id": "1", "contents": "C\nthree"}]
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in lines[:2]) + "\n\n" + json.dumps(lines[2]) + "\n", "utf-8")
    expected = r"corpus\.jsonl, line 4: passage id '1' was already given at .*corpus\.jsonl, line 1$"
    with pytest.raises(DataFormatError, match=expected):
        read_corpus(path)
    (tmp_path / "q.jsonl").write_text(json.dumps(FLASHRAG) + "\n", "utf-8")
    with pytest.raises(DataFormatError, match=expected):  # before any retriever is built on it
        QADataset("x", "q.jsonl", corpus="corpus.jsonl", root=str(tmp_path)).corpus()


@pytest.mark.parametrize(
    ("name", "records", "where", "first"),
    [
        ("questions.jsonl", [FLASHRAG, changed(FLASHRAG, id="f2"), FLASHRAG], "line 3", "line 1"),
        ("hotpot.json", [HOTPOT, HOTPOT], "record index 1", "record index 0"),
    ],
)
def test_a_repeated_question_id_names_the_file_and_both_places(tmp_path, name, records, where, first):
    path = write(tmp_path / name, records)
    qid = records[0].get("id", records[0].get("_id"))
    with pytest.raises(DataFormatError, match=rf"{name.replace('.', '[.]')}, {where}: question id '{qid}' was "
                                              rf"already given at .*{name.replace('.', '[.]')}, {first}$"):  # fmt: skip
        load_questions(path)
