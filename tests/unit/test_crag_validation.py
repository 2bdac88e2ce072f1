"""CRAG records are checked at load time like every other format (issue 27 §1.3): each field a method or metric
reads is there and of its type, or the error names file, line and key; what CRAG may legitimately lack (a
page's HTML) is accepted, and the web source counts, per question, every page it reads from its snippet alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoprag.cost import Cost
from hoprag.data import DataFormatError, load_questions
from hoprag.data.crag import parse_crag
from hoprag.llm import ScriptedLLM
from hoprag.methods.pruningrag import PruningRAG
from hoprag.sources import WebSource
from tests.fakes import HashEmbedder

BODY = "<html><body><article><h1>Paris</h1><p>" + "Paris is the capital of France. " * 8 + "</p></article></body></html>"


def page(i: int, html: str | None = BODY, **fields) -> dict:
    return {"page_name": f"Page {i}", "page_url": f"https://example.org/{i}", "page_snippet": f"Paris snippet {i}",
            "page_result": html, "page_last_modified": "", **fields}  # fmt: skip


def record(i: int = 0, **fields) -> dict:
    """A CRAG Task 1/2 record with every official field."""
    return {"interaction_id": f"id{i}", "query_time": "03/05/2024, 23:18:31 PT", "domain": "movie",
            "question_type": "simple", "static_or_dynamic": "static", "query": "what is the capital of france?",
            "answer": "paris", "alternative_answers": "[]", "split": 0,
            "search_results": [page(0), page(1)], **fields}  # fmt: skip


def without(mapping: dict, key: str) -> dict:
    return {k: v for k, v in mapping.items() if k != key}


def crag_file(path: Path, bad: dict) -> Path:
    """A good first line, then `bad` on line 2."""
    path.write_text(json.dumps(record()) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (without(record(1), "search_results"), "missing required key 'search_results'"),
        (record(1, search_results="none"), "'search_results' must be a list of objects"),
        (record(1, search_results=[page(0), "https://example.org"]), "'search_results\\[1\\]' must be an object"),
        (record(1, search_results=[page(0), without(page(1), "page_snippet")]),
         "missing required key 'search_results\\[1\\].page_snippet'"),
        (record(1, search_results=[without(page(0), "page_url")]), "missing required key 'search_results\\[0\\].page_url'"),
        (record(1, search_results=[without(page(0), "page_result")]),
         "missing required key 'search_results\\[0\\].page_result'"),
        (record(1, search_results=[page(0, page_url=None)]), "'search_results\\[0\\].page_url' must be a string, got null"),
        (record(1, search_results=[page(0, html=["<p>"])]), "'search_results\\[0\\].page_result' must be a string"),
        (without(record(1), "query_time"), "missing required key 'query_time'"),
        (record(1, query_time=1709704711), "'query_time' must be a string, got 1709704711"),
        (record(1, query_time="2024-03-05"), "query_time '2024-03-05' is not CRAG's 'mm/dd/yyyy, hh:mm:ss PT'"),
        (without(record(1), "domain"), "missing required key 'domain'"),
        (record(1, domain=None), "'domain' must be a string, got null"),
        (without(record(1), "static_or_dynamic"), "missing required key 'static_or_dynamic'"),
        (without(record(1), "question_type"), "missing required key 'question_type'"),
        (record(1, split="0"), "'split' must be an integer, got \"0\""),
        (record(1, alternative_answers="[b"), "'alternative_answers' is a string but not a JSON-encoded list"),
    ],
)
def test_a_bad_crag_line_names_file_line_and_key(tmp_path, bad, message):
    path = crag_file(tmp_path / "crag_dev.jsonl", bad)
    with pytest.raises(DataFormatError, match=rf"crag_dev\.jsonl, line 2: {message}"):
        load_questions(path, format="crag")


def test_a_repeated_interaction_id_names_the_file_and_both_lines(tmp_path):
    path = tmp_path / "crag_dev.jsonl"
    path.write_text("".join(json.dumps(record(i % 2)) + "\n" for i in range(3)), encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"crag_dev\.jsonl, line 3: question id 'id0' was already given at "
                                              r".*crag_dev\.jsonl, line 1$"):  # fmt: skip
        load_questions(path)


# -- the web source counts its fallbacks per question ----------------------------------------------------


@pytest.fixture
def source():
    return WebSource(HashEmbedder(), cache=False)


def test_pages_read_from_their_snippet_alone_are_counted_per_question(source):
    """What CRAG may lack loads (a page's HTML, null or blank, its `page_last_modified`, a question's search
    results or `split`), and each page whose snippet stands alone is counted for its question."""
    pages = [page(0), page(1, html=None), without(page(2, html=" "), "page_last_modified"), page(0)]
    empty = parse_crag(record(0, search_results=pages))
    boilerplate = parse_crag(record(1, search_results=[page(0, html="<html><body></body></html>")]))
    nothing = parse_crag(without(record(2, search_results=[]), "split"))
    source.fetch([empty, boilerplate, nothing], [Cost() for _ in range(3)])
    stats = source.question_stats
    assert [c.text for c in source.chunks(empty.metadata["search_results"]) if c.id.startswith("1:")] == [
        "Paris snippet 1"
    ]  # the snippet stands for the page
    assert stats == [
        {"pages_without_html": 2.0, "pages_without_content": 0.0, "repeated_pages": 1.0, "no_pages": 0.0,
         "bm25_empty": 0.0},
        {"pages_without_html": 0.0, "pages_without_content": 1.0, "repeated_pages": 0.0, "no_pages": 0.0,
         "bm25_empty": 0.0},
        {"pages_without_html": 0.0, "pages_without_content": 0.0, "repeated_pages": 0.0, "no_pages": 1.0,
         "bm25_empty": 0.0},
    ]  # fmt: skip


def test_pruningrag_reports_the_web_sources_counts_in_each_questions_stats(source):
    ex = parse_crag(record(search_results=[page(0), page(1, html=None)]))
    llm = ScriptedLLM(rules=[(r"### Answer", "paris")])
    (out,) = PruningRAG(llm, {"web": source}, strategy="fixed", fixed=["web"]).answer([ex], [Cost()])
    assert out.stats["web/pages_without_html"] == 1.0 and out.stats["web/no_pages"] == 0.0


def test_bm25_keeps_only_chunks_sharing_a_word_with_the_question_and_counts_an_empty_search(source):
    """Over `bm25_above_pages` pages BM25 pre-filters; a chunk scoring 0 shares no word with the question and
    is no hit (the retrievers' rule, `lexical_hits`), so a question matching nothing keeps nothing."""
    pages = [page(i, html="", page_snippet=f"{word} facts") for i, word in enumerate(["paris"] + ["tokyo"] * 6)]
    assert [c.text for c in source.candidates("paris", pages)] == ["paris facts"]
    assert source.retrieve(["which river crosses berlin?"], [pages]) == [[]]
    assert source.question_stats[0]["bm25_empty"] == 1.0
