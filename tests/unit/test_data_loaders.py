"""Every bundled question file loads with the README's counts, types and example values."""

from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache

import pytest

from hoprag.data import DataFormatError, Hop, QAExample, detect_format, load_questions
from hoprag.data.twowiki import match_title
from hoprag.paths import data_root

HOTPOT_DEV = "hotpotqa/hotpot_dev_distractor_185.json"
HOTPOT_TRAIN = "hotpotqa/hotpot_train_99.json"
WIKI_TRAIN = "2wikimultihopqa/train_500.json"
WIKI_DEV = "2wikimultihopqa/dev_159.json"
MUSIQUE_DEV = "musique/musique_ans_dev_200.jsonl"
MUSIQUE_TRAIN = "musique/musique_ans_train_98.jsonl"
BAMBOOGLE = "bamboogle/test.jsonl"
CRAG = "crag/crag_task1_dev_10.jsonl.bz2"


@lru_cache(maxsize=None)
def load(rel: str) -> tuple[QAExample, ...]:
    return tuple(load_questions(data_root() / rel))


def by_id(rel: str, qid: str) -> QAExample:
    return next(ex for ex in load(rel) if ex.id == qid)


# file, format, dataset name, count, type distribution (README)
FILES = [
    (HOTPOT_DEV, "hotpotqa", "hotpotqa", 185, {"bridge": 130, "comparison": 55}),
    (HOTPOT_TRAIN, "hotpotqa", "hotpotqa", 99, {"bridge": 77, "comparison": 22}),
    (WIKI_TRAIN, "2wikimultihopqa", "2wikimultihopqa", 500,
     {"compositional": 227, "comparison": 162, "bridge_comparison": 92, "inference": 19}),
    (WIKI_DEV, "2wikimultihopqa", "2wikimultihopqa", 159,
     {"compositional": 56, "comparison": 53, "bridge_comparison": 40, "inference": 10}),
    (MUSIQUE_DEV, "musique", "musique", 200,
     {"2hop": 145, "3hop1": 28, "3hop2": 4, "4hop1": 18, "4hop2": 1, "4hop3": 4}),
    (MUSIQUE_TRAIN, "musique", "musique", 98,
     {"2hop": 66, "3hop1": 24, "3hop2": 3, "4hop1": 3, "4hop3": 2}),
    (BAMBOOGLE, "flashrag", "bamboogle", 125, {None: 125}),
    (CRAG, "crag", "crag", 10,
     {"comparison": 3, "multi-hop": 3, "set": 2, "simple": 1, "false_premise": 1}),
]


@pytest.mark.parametrize(("rel", "fmt", "name", "count", "types"), FILES)
def test_counts_types_and_detection(rel, fmt, name, count, types):
    examples = load(rel)
    assert len(examples) == count
    assert Counter(ex.type for ex in examples) == types
    assert {ex.dataset for ex in examples} == {name}
    assert len({ex.id for ex in examples}) == count
    assert all(ex.question and ex.answers and all(ex.answers) for ex in examples)
    assert load_questions(data_root() / rel, format=fmt, limit=3) == list(examples[:3])


@pytest.mark.parametrize("rel", [HOTPOT_DEV, HOTPOT_TRAIN, WIKI_TRAIN, WIKI_DEV, MUSIQUE_DEV, MUSIQUE_TRAIN])
def test_gold_titles_are_in_each_context(rel):
    for ex in load(rel):
        titles = {p.title for p in ex.context}
        assert ex.supporting_titles and set(ex.supporting_titles) <= titles


def test_hotpotqa_readme_example():
    ex = by_id(HOTPOT_DEV, "5a7f6fd75542992e7d278cfa")
    assert ex.answers == ["Rush"]
    assert ex.type == "bridge" and ex.metadata["level"] == "hard"
    assert ex.supporting_facts == [("Nobody's Hero", 0), ("Neil Peart", 1)]
    assert ex.supporting_titles == ["Nobody's Hero", "Neil Peart"]
    porcaro = next(p for p in ex.context if p.title == "Jeff Porcaro")
    sentences = ex.metadata["sentences"]["Jeff Porcaro"]
    assert sentences[1].startswith(" In a career")
    assert porcaro.text == "".join(sentences)
    assert ". In a career that spanned" in porcaro.text


def test_hotpotqa_levels_and_context_sizes():
    assert Counter(ex.metadata["level"] for ex in load(HOTPOT_DEV)) == {"hard": 185}
    assert Counter(ex.metadata["level"] for ex in load(HOTPOT_TRAIN)) == {
        "medium": 68, "easy": 16, "hard": 15,
    }
    assert Counter(len(ex.context) for ex in load(HOTPOT_DEV)) == {10: 184, 2: 1}
    assert Counter(len(ex.context) for ex in load(HOTPOT_TRAIN)) == {10: 98, 4: 1}
    train = by_id(HOTPOT_TRAIN, "5a77ec115542992a6e59dff7")
    assert train.answers == ["a spirit"] and train.supporting_titles == ["Alû", "Lilu (mythology)"]


def test_2wiki_readme_example_decomposition():
    ex = by_id(WIKI_TRAIN, "93402dbc0bdb11eba7f7acde48001122")
    assert ex.answers == ["October 5, 1987"]
    assert ex.evidences == [
        ("Get Low", "performer", "Dillon Francis"),
        ("Dillon Francis", "date of birth", "October 5, 1987"),
    ]
    assert ex.decomposition == [
        Hop("Get Low >> performer", "Dillon Francis", "Get Low (Dillon Francis and DJ Snake song)"),
        Hop("Dillon Francis >> date of birth", "October 5, 1987", "Dillon Francis"),
    ]
    assert ex.supporting_titles == ["Get Low (Dillon Francis and DJ Snake song)", "Dillon Francis"]
    assert ex.metadata["entity_ids"] == "Q18160687_Q5276931"
    theodred = next(p for p in ex.context if p.title == "Theodred II (Bishop of Elmham)")
    assert theodred.text.startswith(
        "Theodred II was a medieval Bishop of Elmham. The date of Theodred's consecration"
    )


def test_2wiki_dev_example():
    ex = by_id(WIKI_DEV, "b088d3ca08e211ebbda4ac1f6bf848b6")
    assert ex.type == "bridge_comparison" and ex.answers == ["Free Guy"]
    assert ex.evidences[:2] == [
        ("Forbidden Ground", "director", "Pál Gábor"),
        ("Free Guy", "director", "Shawn Levy"),
    ]
    assert [h.support_title for h in ex.decomposition[:2]] == ["Forbidden Ground", "Free Guy"]


def test_2wiki_quirks_out_of_range_facts_and_duplicate_paragraphs():
    invalid = [ex.metadata["invalid_supporting_facts"] for ex in load(WIKI_TRAIN)]
    assert sum(invalid) == 6
    assert sum(ex.metadata["invalid_supporting_facts"] for ex in load(WIKI_DEV)) == 0
    # the out-of-range facts are kept, not dropped
    assert sum(len(ex.supporting_facts) for ex in load(WIKI_TRAIN)) == sum(
        len(r["supporting_facts"])
        for r in json.loads((data_root() / WIKI_TRAIN).read_text(encoding="utf-8"))
    )
    # 23 (train) / 6 (dev) questions repeat a distractor (4 of them two distractors): deduplicated
    assert Counter(len(ex.context) for ex in load(WIKI_TRAIN)) == {10: 477, 9: 19, 8: 4}
    assert sum(len(ex.context) < 10 for ex in load(WIKI_DEV)) == 6


def test_2wiki_decomposition_support_titles_mostly_resolved():
    hops = [h for ex in load(WIKI_TRAIN) for h in ex.decomposition]
    assert len(hops) == sum(len(ex.evidences) for ex in load(WIKI_TRAIN))
    resolved = [h for h in hops if h.support_title is not None]
    assert len(resolved) / len(hops) > 0.99
    for ex in load(WIKI_TRAIN):
        titles = {p.title for p in ex.context}
        assert all(h.support_title in titles for h in ex.decomposition if h.support_title)


def test_match_title():
    titles = ["Get Low (Lil Jon song)", "Get Low (Dillon Francis and DJ Snake song)", "Mills Godwin"]
    gold = ["Get Low (Dillon Francis and DJ Snake song)", "Mills Godwin"]
    assert match_title("Mills Godwin", titles, gold) == "Mills Godwin"
    assert match_title("Get Low", titles, gold) == "Get Low (Dillon Francis and DJ Snake song)"
    assert match_title("get low", titles, []) == "Get Low (Lil Jon song)"
    assert match_title("Mills Edwin Godwin", titles, gold) == "Mills Godwin"
    assert match_title("Shirvanshah Ali", titles, gold) is None


def test_2wiki_tolerates_data_ids_fields(tmp_path):
    record = {
        "_id": "x1", "type": "comparison", "question": "Q?", "answer": "A",
        "context": [["T1", ["First.", "Second."]], ["T2", ["Other."]], ["T1", ["First.", "Second."]]],
        "supporting_facts": [["T1", 1], ["T2", 5]],
        "evidences": [["T1", "rel", "A"]], "evidences_id": [["Q1", "P1", "Q2"]], "answer_id": "Q2",
        "entity_ids": "Q1_Q2",
    }
    path = tmp_path / "dev.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    (ex,) = load_questions(path)
    assert ex.dataset == "2wikimultihopqa"
    assert [p.text for p in ex.context] == ["First. Second.", "Other."]
    assert ex.metadata["evidences_id"] == [["Q1", "P1", "Q2"]] and ex.metadata["answer_id"] == "Q2"
    assert ex.supporting_facts == [("T1", 1), ("T2", 5)]
    assert ex.metadata["invalid_supporting_facts"] == 1
    assert ex.decomposition == [Hop("T1 >> rel", "A", "T1")]


def test_musique_readme_example():
    ex = by_id(MUSIQUE_DEV, "2hop__574419_270105")
    assert ex.type == "2hop" and ex.answers == ["Stanley"]
    assert ex.supporting_titles == [
        "Mountrail County Courthouse",
        "Van Hook Township, Mountrail County, North Dakota",
    ]
    assert ex.decomposition == [
        Hop(
            "Van Hook Township >> located in the administrative territorial entity",
            "Mountrail County",
            "Van Hook Township, Mountrail County, North Dakota",
        ),
        Hop("#1 >> capital", "Stanley", "Mountrail County Courthouse"),
    ]
    assert ex.context[0].title == "Port Blair" and len(ex.context) == 20
    assert ex.metadata == {"answerable": True}


def test_musique_aliases_and_sizes():
    ex = by_id(MUSIQUE_TRAIN, "2hop__150763_14904")
    assert ex.answers == ["G. Stanley Hall", "Stanley Hall"]
    assert [h.support_title for h in ex.decomposition] == ex.supporting_titles
    for rel in (MUSIQUE_DEV, MUSIQUE_TRAIN):
        assert {len(ex.context) for ex in load(rel)} == {20}
        for ex in load(rel):
            assert len(ex.decomposition) == int(ex.type[0])
            assert all(h.support_title in ex.supporting_titles for h in ex.decomposition)


def test_bamboogle_flashrag():
    ex = by_id(BAMBOOGLE, "test_0")
    assert ex.question == "Who was president of the United States in the year that Citibank was founded?"
    assert ex.answers == ["james madison"] and ex.context == [] and ex.supporting_titles == []
    assert by_id(BAMBOOGLE, "test_1").answers == ["Titan IIIE"]


def test_crag():
    examples = load(CRAG)
    ex = by_id(CRAG, "3dbed55e-66a3-4dcd-907d-096f49387e41")
    assert ex.type == "comparison" and ex.answers == ["yes"]
    assert ex.question.startswith("is microsoft office 2019 available in a greater number of languages")
    assert ex.metadata["domain"] == "open" and ex.metadata["static_or_dynamic"] == "static"
    assert ex.metadata["query_time"] == "02/28/2024, 10:04:54 PT"
    raw = ex.metadata["search_results"]
    assert len(raw) == 5 and raw[0]["page_result"].startswith("<!doctype html>")
    assert ex.context[0].title == raw[0]["page_name"] and ex.context[0].text == raw[0]["page_snippet"]
    assert Counter(e.metadata["domain"] for e in examples) == {
        "open": 3, "finance": 3, "movie": 3, "sports": 1,
    }
    assert all(1 <= len(e.context) <= 5 and len(e.metadata["search_results"]) == 5 for e in examples)


@pytest.mark.parametrize(
    "alternatives",
    [{"alternative_answers": '["b", "c"]'}, {"alternative_answers": ["b", "c"]}, {"alt_ans": ["b", "c"]}],
)
def test_crag_alternative_answer_forms(tmp_path, alternatives):
    record = {"interaction_id": "i", "query": "q?", "answer": "a", "question_type": "simple",
              "query_time": "03/05/2024, 23:18:31 PT", "domain": "movie", "static_or_dynamic": "static",
              "search_results": [], **alternatives}
    path = tmp_path / "crag.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    (ex,) = load_questions(path)
    assert ex.answers == ["a", "b", "c"] and ex.dataset == "crag"


def test_detect_format_and_override(tmp_path):
    # a 2Wiki-style record without evidences looks like HotpotQA; format= forces the 2Wiki reading
    record = {"_id": "1", "question": "Q?", "answer": "A", "type": "comparison",
              "context": [["T", ["One.", "Two."]]], "supporting_facts": [["T", 0]]}
    assert detect_format(record) == "hotpotqa"
    path = tmp_path / "x.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    assert load_questions(path)[0].context[0].text == "One.Two."
    forced = load_questions(path, format="2wikimultihopqa", dataset="mine")[0]
    assert forced.context[0].text == "One. Two." and forced.dataset == "mine"
    with pytest.raises(ValueError, match="unknown format"):
        load_questions(path, format="nope")
    path.write_text(json.dumps([{"q": 1}]), encoding="utf-8")
    with pytest.raises(DataFormatError, match="record index 0.*format="):
        load_questions(path)


def test_limit_and_empty_file(tmp_path):
    assert [ex.id for ex in load_questions(data_root() / MUSIQUE_DEV, limit=5)] == [
        ex.id for ex in load(MUSIQUE_DEV)[:5]
    ]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="holds no records"):
        load_questions(empty)
