"""The benchmark corpus: bundled paragraphs repeated with new ids to any size."""

from __future__ import annotations

from hoprag.data.bench_corpus import bench_corpus, repeated
from hoprag.data.types import Passage


def test_repeats_keep_title_and_text_under_new_ids():
    pool = [Passage("a", "A", "x"), Passage("b", "B", "y")]
    out = list(repeated(pool, 5))
    assert [p.id for p in out] == ["a", "b", "a#copy1", "b#copy1", "a#copy2"]
    assert (out[4].title, out[4].text) == ("A", "x") and list(repeated(pool, 1)) == pool[:1]


def test_the_bench_corpus_is_the_bundled_paragraphs_and_questions():
    corpus, questions = bench_corpus(20_000)
    assert len(corpus) == 20_000 and len({p.id for p in corpus}) == 20_000
    assert len(questions) == 185 + 99 + 159 + 500 + 200 + 98
    distinct = next(i for i, p in enumerate(corpus) if "#copy" in p.id)  # the pooled paragraphs, then copies
    assert corpus[distinct].text == corpus[0].text
