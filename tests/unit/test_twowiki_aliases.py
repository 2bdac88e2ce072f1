"""2WikiMultihopQA's answer aliases as the official evaluator (2wikimultihop_evaluate_v1.1.py) uses them: an
`id_aliases.json` beside the questions file (JSON Lines `{Q_id, aliases, demonyms}`) extends the gold answers of
each question whose `answer_id` it names, and EM / F1 take the best gold; without the file nothing changes."""

from __future__ import annotations

import json
import logging

import pytest

from hoprag.data import DataFormatError, load_questions
from hoprag.data.twowiki import add_aliases, read_aliases
from hoprag.metrics.answer import exact_match, f1_score

RECORD = {
    "_id": "q1",
    "type": "compositional",
    "question": "What is the nationality of the director of film Polish-Russian War?",
    "context": [["Polish-Russian War (film)", ["Polish-Russian War is a 2009 Polish film."]]],
    "supporting_facts": [["Polish-Russian War (film)", 0]],
    "evidences": [["Polish-Russian War", "country of origin", "Poland"]],
    "answer": "Poland",
    "answer_id": "Q36",
    "entity_ids": "Q7209530",
}
ALIASES = [
    {"Q_id": "Q36", "aliases": ["Republic of Poland", "POL"], "demonyms": ["Polish", "Poles"]},
    {"Q_id": "Q99", "aliases": [], "demonyms": []},
]


def write(folder, records, aliases=None):
    folder.mkdir(exist_ok=True)
    (folder / "dev.json").write_text(json.dumps(records), encoding="utf-8")
    if aliases is not None:
        lines = "".join(json.dumps(a) + "\n" for a in aliases)
        (folder / "id_aliases.json").write_text(lines, encoding="utf-8")
    return folder / "dev.json"


def loaded(path):
    examples = load_questions(path)
    return examples, add_aliases(examples, path)


def test_aliases_and_demonyms_are_united_per_wikidata_id(tmp_path):
    path = write(tmp_path, [RECORD], ALIASES).with_name("id_aliases.json")
    assert read_aliases(path) == {"Q36": ["POL", "Poles", "Polish", "Republic of Poland"], "Q99": []}


def test_the_aliases_beside_the_questions_extend_the_gold_answers(tmp_path, caplog):
    other = {**RECORD, "_id": "q2", "answer": "yes", "answer_id": "Q99"}  # an id with no names: unchanged
    bare = {k: v for k, v in RECORD.items() if k != "answer_id"} | {"_id": "q3"}  # the release without ids
    with caplog.at_level(logging.INFO, logger="hoprag.data.twowiki"):
        (ex, ex2, ex3), extended = loaded(write(tmp_path, [RECORD, other, bare], ALIASES))
    assert extended == 1 and "1 of 3 questions gained aliases" in caplog.text and "id_aliases.json" in caplog.text
    assert ex.answers == ["Poland", "POL", "Poles", "Polish", "Republic of Poland"]  # the gold answer first
    assert ex.metadata["answer_aliases"] == "id_aliases.json" and "answer_aliases" not in ex2.metadata
    assert ex2.answers == ["yes"] and ex3.answers == ["Poland"]
    # scored as the official evaluator scores: the best over the gold answer and its aliases
    assert exact_match("Polish", ex.answers) == 1.0 and exact_match("Polish", ["Poland"]) == 0.0
    assert f1_score("the Republic of Poland", ex.answers) == 1.0


def test_without_the_file_nothing_changes(tmp_path):
    (ex,), extended = loaded(write(tmp_path, [RECORD]))
    assert extended == 0 and ex.answers == ["Poland"] and "answer_aliases" not in ex.metadata


def test_a_malformed_aliases_file_names_its_line(tmp_path):
    path = write(tmp_path, [RECORD], ALIASES)
    with open(path.with_name("id_aliases.json"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"Q_id": "Q1", "aliases": ["x"]}) + "\n")  # no demonyms
    with pytest.raises(DataFormatError, match=r"id_aliases\.json, line 3"):
        loaded(path)
