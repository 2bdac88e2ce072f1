"""BM25 at wiki-18 scale: a corpus file streamed into the build once, the saved index memory-mapped on load."""

from __future__ import annotations

import numpy as np

from hoprag.data.corpus import read_corpus, write_corpus
from hoprag.data.types import Passage
from hoprag.retrieval import BM25Index, BM25Retriever, corpus_fingerprint
from hoprag.retrieval.shards import CorpusFile, build_bm25

PASSAGES = [
    Passage("a", "Seattle", "Seattle is a seaport city on the West Coast."),
    Passage("b", "Kraken", "The kraken is a legendary sea monster."),
    Passage("c", "Fantagraphics", "Fantagraphics publishes comics in Seattle."),
]


def test_a_stream_is_read_once_and_indexed_like_a_list():
    reads = []

    def stream():
        for p in PASSAGES:
            reads.append(p.id)
            yield p

    streamed = BM25Index.build(stream(), corpus_fingerprint=corpus_fingerprint(PASSAGES))
    listed = BM25Index.build(PASSAGES)
    assert reads == ["a", "b", "c"] and streamed.ids == listed.ids
    assert streamed.manifest["num_passages"] == 3
    assert streamed.manifest["corpus_fingerprint"] == listed.manifest["corpus_fingerprint"]
    (s1, i1), (s2, i2) = streamed.search(["comics seattle"], 3), listed.search(["comics seattle"], 3)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_allclose(s1, s2)


def test_a_corpus_file_is_built_once_where_the_retriever_loads_it_memory_mapped(tmp_path):
    path = write_corpus(PASSAGES, tmp_path / "corpus.jsonl")
    first = build_bm25(CorpusFile(path), tmp_path / "cache")
    assert first.state == "built"
    assert build_bm25(CorpusFile(path), tmp_path / "cache").state == "cached"
    retriever = BM25Retriever(read_corpus(path), cache_dir=str(tmp_path / "cache"))
    assert retriever.from_cache and retriever.index_dir == first.index_dir
    assert isinstance(retriever.index.model.scores["data"], np.memmap)
    assert retriever.search(["sea monster"], 1)[0][0].passage.id == "b"
