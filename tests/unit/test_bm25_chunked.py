"""BM25 built in chunks (memory bounded by a chunk and the vocabulary) scores exactly as bm25s's own index."""

from __future__ import annotations

import bm25s
import numpy as np
import pytest
import Stemmer

from hoprag.data import Passage, load_questions, read_corpus
from hoprag.paths import data_root
from hoprag.retrieval import bm25_build
from hoprag.retrieval.sparse import STOPWORDS, BM25Index


@pytest.mark.parametrize(("method", "stemmer"), [("lucene", "english"), ("bm25l", None), ("bm25+", "english")])
def test_chunks_score_as_one_bm25s_index(tmp_path, monkeypatch, method, stemmer):
    monkeypatch.setattr(bm25_build, "RANGE_ENTRIES", 500)  # the columns merged in many ranges, as at scale
    passages = read_corpus(data_root() / "bamboogle" / "wiki18_passages.jsonl")
    passages += [Passage("empty", "", ""), Passage("stop words", "the", "of a an the")]  # no token: bm25s's ""
    queries = [ex.question for ex in load_questions(data_root() / "bamboogle" / "test.jsonl")] + ["the of", "qqqz"]
    stem = Stemmer.Stemmer(stemmer) if stemmer else None
    whole = bm25s.BM25(method=method)
    whole.index(bm25s.tokenize([p.contents for p in passages], stopwords=STOPWORDS, stemmer=stem, show_progress=False),
                show_progress=False)  # fmt: skip
    chunked = BM25Index.build(passages, method=method, stemmer=stemmer, chunk_size=97, workdir=tmp_path)
    tokens = bm25s.tokenize(queries, stopwords=STOPWORDS, stemmer=stem, return_ids=False, show_progress=False)
    rows, scores = whole.retrieve(tokens, k=20, show_progress=False)
    got_scores, got_rows = chunked.search(queries, 20)
    np.testing.assert_array_equal(got_rows, rows)
    np.testing.assert_array_equal(got_scores, scores)
    assert chunked.model.scores["num_docs"] == len(passages) == chunked.manifest["num_passages"]
    chunked.save(tmp_path / "saved")
    loaded = BM25Index.load(tmp_path / "saved")
    assert isinstance(loaded.model.scores["data"], np.memmap)
    np.testing.assert_array_equal(loaded.search(queries, 20)[1], rows)
    scratch = list(tmp_path.glob("bm25-build-*"))
    del chunked
    assert scratch and not any(p.exists() for p in scratch)  # the scratch arrays go with the model
