"""Corpus JSONL I/O, wiki-18 title unquoting, the pooled closed corpus, rankings and NLI pairs."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from hoprag.data import (
    DataFormatError,
    NLIPair,
    Passage,
    load_nli,
    load_questions,
    load_ranking,
    passage_id,
    pool_corpus,
    read_corpus,
    unquote_title,
    write_corpus,
)
from hoprag.paths import data_root

WIKI18 = "bamboogle/wiki18_passages.jsonl"


def test_wiki18_passages_titles_unquoted():
    passages = read_corpus(data_root() / WIKI18)
    assert len(passages) == 1190
    assert len({p.id for p in passages}) == 1190
    assert not any(p.title.startswith('"') for p in passages)
    first = passages[0]
    assert first.id == "19282393" and first.title == "Citibank"
    assert first.text.startswith("resulting in a net profit for the U.S. federal government.")
    weill = next(p for p in passages if p.title == "Sanford I. Weill")
    assert 'Sanford I. ""Sandy"" Weill' in weill.text  # text stays verbatim
    raw = read_corpus(data_root() / WIKI18, unquote_titles=False)
    assert sum(p.title.startswith('"') and p.title.endswith('"') for p in raw) == 1039


def test_unquote_title():
    assert unquote_title('"Gary Groth"') == "Gary Groth"
    assert unquote_title('"""The Comics Journal"""') == '"The Comics Journal"'
    assert unquote_title('"""Weird Al"" Yankovic"') == '"Weird Al" Yankovic'
    assert unquote_title("Citibank") == "Citibank"
    assert unquote_title('"') == '"'


def test_corpus_record_fallbacks(tmp_path):
    lines = [
        {"id": 7, "contents": '"Gary Groth"\nGary Groth is editor of ""The Comics Journal"".\nMore.'},
        {"id": "b", "title": "T", "text": "body"},
        {"text": "just text"},
    ]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    groth, titled, bare = read_corpus(path)
    assert groth == Passage("7", "Gary Groth", 'Gary Groth is editor of ""The Comics Journal"".\nMore.')
    assert titled == Passage("b", "T", "body")
    assert bare == Passage(passage_id("", "just text"), "", "just text")


def test_write_corpus_round_trip(tmp_path):
    passages = read_corpus(data_root() / WIKI18)[:50] + [Passage("x", "Ünïcode", "line1\nline2")]
    path = write_corpus(passages, tmp_path / "out" / "corpus.jsonl")
    assert read_corpus(path) == passages
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert first == {"id": "19282393", "contents": passages[0].contents}


def test_passage_ids_are_content_hashes():
    assert passage_id("T", "body") == hashlib.sha1(b"T\nbody").hexdigest()[:16]
    for ex in load_questions(data_root() / "hotpotqa/hotpot_dev_distractor_185.json", limit=5):
        assert all(p.id == passage_id(p.title, p.text) for p in ex.context)


def test_pooled_corpus_hotpot_dev():
    examples = load_questions(data_root() / "hotpotqa/hotpot_dev_distractor_185.json")
    corpus = pool_corpus(examples)
    every = [p for ex in examples for p in ex.context]
    assert len(corpus) == len({(p.title, p.text) for p in every}) == 1828
    assert len(corpus) < len(every)  # paragraphs shared between questions collapse
    assert len({p.id for p in corpus}) == len(corpus)
    titles = {p.title for p in corpus}
    assert all(t in titles for ex in examples for t in ex.supporting_titles)
    # first-seen order and stable ids: a prefix of the questions pools to a prefix of the corpus
    subset = pool_corpus(examples[:40])
    assert corpus[: len(subset)] == subset


@pytest.mark.parametrize(
    ("rel", "unique"),
    [
        ("hotpotqa/hotpot_train_99.json", 984),
        ("2wikimultihopqa/train_500.json", 3112),
        ("2wikimultihopqa/dev_159.json", 1249),
        ("musique/musique_ans_dev_200.jsonl", 3141),
        ("musique/musique_ans_train_98.jsonl", 1854),
        ("crag/crag_task1_dev_10.jsonl.bz2", 38),
    ],
)
def test_pooled_corpus_sizes(rel, unique):
    examples = load_questions(data_root() / rel)
    corpus = pool_corpus(examples)
    assert len(corpus) == unique == len({(p.title, p.text) for ex in examples for p in ex.context})


def test_bamboogle_ranking():
    ranking = load_ranking(data_root() / "bamboogle/retrieved_bge_top10.jsonl")
    assert len(ranking) == 125
    assert ranking["test_0"][:2] == ["19282393", "19282400"]
    assert Counter(len(ids) for ids in ranking.values()) == {10: 116, 9: 9}
    corpus_ids = {p.id for p in read_corpus(data_root() / WIKI18)}
    assert all(set(ids) <= corpus_ids for ids in ranking.values())
    questions = load_questions(data_root() / "bamboogle/test.jsonl")
    assert set(ranking) == {ex.id for ex in questions}


def test_ranking_rejects_repeated_ids(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"id": "a", "doc_ids": ["1"]}\n{"id": "a", "doc_ids": ["2"]}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match="line 2.*twice"):
        load_ranking(path)


@pytest.mark.parametrize(
    ("name", "count", "labels", "source"),
    [
        ("multi_nli_train_20k", 20000, {0: 6709, 1: 6646, 2: 6645}, "multi_nli_train"),
        ("multi_nli_validation_matched_5k", 5000, {0: 1784, 1: 1552, 2: 1664},
         "multi_nli_validation_matched"),
        ("snli_validation", 9842, {0: 3329, 1: 3235, 2: 3278}, "snli_validation"),
    ],
)
def test_nli_files(name, count, labels, source):
    pairs = load_nli(data_root() / "nli" / f"{name}.jsonl")
    assert len(pairs) == count
    assert Counter(p.label for p in pairs) == labels
    assert {p.source for p in pairs} == {source}
    assert all(p.premise and p.hypothesis for p in pairs)


def test_nli_first_snli_pair():
    first = load_nli(data_root() / "nli/snli_validation.jsonl", limit=1)[0]
    assert first == NLIPair(
        premise="Two women are embracing while holding to go packages .",
        hypothesis="The sisters are hugging goodbye while holding to go packages after just eating lunch .",
        label=1,
        source="snli_validation",
    )
    assert first.label_name == "neutral"


@pytest.mark.parametrize("label", [-1, 3, "0", 1.0, True])
def test_nli_bad_label(tmp_path, label):
    path = tmp_path / "nli.jsonl"
    good = {"premise": "p", "hypothesis": "h", "label": 0}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "label": label}) + "\n")
    with pytest.raises(DataFormatError, match="line 2: label must be 0, 1 or 2"):
        load_nli(path)
