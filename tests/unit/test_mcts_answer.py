"""The generator's JSON answers: parsed from surrounding text, recovered field by field, or the raw-text fallback."""

from __future__ import annotations

from hoprag.data.types import Passage
from hoprag.methods import AnswerExtractor
from hoprag.search.sc_rag_answer import parse_answer, render_snippets

CONTEXT = [Passage("p1", "Paris", "Paris is the capital."), Passage("p2", "Lyon", "Lyon is a city.")]


def fallback(text: str) -> str:
    return AnswerExtractor()(text).answer


def test_json_inside_extra_text_is_parsed():
    raw = 'Sure! ```json\n{"answer": "Paris", "evidence_doc_ids": [1, "p2"], "reasoning": ["A.", "B."]}\n``` done'
    parsed = parse_answer(raw, fallback)
    assert (parsed.answer, parsed.reasoning, parsed.cited, parsed.format) == ("Paris", "A. B.", ("1", "p2"), "json")
    assert not parsed.failed and parsed.raw == raw
    assert [p.id for p in parsed.cited_passages(CONTEXT)] == ["p1", "p2"]


def test_a_cut_off_object_is_read_field_by_field():
    raw = '{"answer": "The \\"City\\" of Light", "evidence_doc_ids": [2], "reasoning": "Snippet 2 says so. It is'
    parsed = parse_answer(raw, fallback)
    assert parsed.format == "fields" and parsed.failed
    assert (parsed.answer, parsed.cited, parsed.reasoning) == ('The "City" of Light', ("2",), "")
    assert [p.id for p in parsed.cited_passages(CONTEXT)] == ["p2"]


def test_plain_text_falls_back_to_the_extractor():
    parsed = parse_answer("**Answer:** Paris. It is the capital.\nMore text", fallback)
    assert (parsed.answer, parsed.format, parsed.cited, parsed.reasoning) == ("Paris.", "text", (), "")
    assert parse_answer('{"reasoning": "no answer key"}', fallback).format == "text"
    assert parse_answer("", fallback).answer == ""
    assert parse_answer('{"answer": null}', fallback).answer == ""
    assert parse_answer('{"answer": "x", "evidence_doc_ids": [9]}', fallback).cited_passages(CONTEXT) == []


def test_snippets_are_numbered_with_titles_and_separated():
    assert render_snippets(CONTEXT) == (
        "[doc_id=1] title=Paris\nParis is the capital.\n---\n[doc_id=2] title=Lyon\nLyon is a city."
    )
