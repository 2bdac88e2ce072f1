"""The index cache keeps one directory per setting and never replaces an index unasked (issue 12, item 9)."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import pytest

from hoprag.data.types import Passage
from hoprag.retrieval import BM25Retriever, DenseRetriever, IndexMismatchError, corpus_fingerprint
from hoprag.retrieval.manifest import settings_digest
from tests.fakes import HashEmbedder

CORPUS = [Passage(f"p{i}", f"Title {i}", f"word{i} shared text number {i % 7}") for i in range(40)]


def snapshot(directory: Path) -> dict[str, tuple[int, str]]:
    """Every file's mtime and content hash: equal snapshots mean nothing was rewritten."""
    return {
        str(f.relative_to(directory)): (f.stat().st_mtime_ns, hashlib.sha256(f.read_bytes()).hexdigest())
        for f in sorted(directory.rglob("*"))
        if f.is_file()
    }


def dense_dir(cache: Path, embedder: HashEmbedder, factory: str = "Flat") -> Path:
    fp = corpus_fingerprint(CORPUS)
    identity = {**embedder.describe(), "corpus_fingerprint": fp, "factory": factory}
    return cache / "dense" / f"{fp[:16]}-hash-bow-{factory.lower()}-{settings_digest(identity)}"


def test_two_passage_templates_live_side_by_side(tmp_path):
    a = DenseRetriever(corpus=CORPUS, embedder=HashEmbedder(), cache_dir=str(tmp_path))
    before = snapshot(a.index_dir)

    template_b = HashEmbedder(passage_template="{text}")
    b = DenseRetriever(corpus=CORPUS, embedder=template_b, cache_dir=str(tmp_path))
    assert not b.from_cache and template_b.calls  # built, in its own directory
    assert b.index_dir != a.index_dir and b.index_dir.parent == a.index_dir.parent
    assert snapshot(a.index_dir) == before  # the first index was not touched

    again = HashEmbedder()
    reloaded = DenseRetriever(corpus=CORPUS, embedder=again, cache_dir=str(tmp_path))
    assert reloaded.from_cache and again.calls == [] and reloaded.index_dir == a.index_dir
    assert DenseRetriever(corpus=CORPUS, embedder=HashEmbedder(passage_template="{text}"),
                          cache_dir=str(tmp_path)).from_cache
    # any field of the embedder's description separates indexes, not only its name
    unnormalised = DenseRetriever(corpus=CORPUS, embedder=HashEmbedder(normalize=False), cache_dir=str(tmp_path))
    assert not unnormalised.from_cache and len(list((tmp_path / "dense").iterdir())) == 3
    assert snapshot(a.index_dir) == before


def test_query_prefix_does_not_split_the_cache(tmp_path):
    """Queries are not in the index: an embedder differing only in its query prefix reuses it."""
    a = DenseRetriever(corpus=CORPUS, embedder=HashEmbedder(), cache_dir=str(tmp_path))
    prefixed = DenseRetriever(corpus=CORPUS, embedder=HashEmbedder(query_prefix="query: "), cache_dir=str(tmp_path))
    assert prefixed.from_cache and prefixed.index_dir == a.index_dir


def test_a_hand_copied_index_is_refused_loudly_and_left_alone(tmp_path):
    a = DenseRetriever(corpus=CORPUS, embedder=HashEmbedder(), cache_dir=str(tmp_path))
    template_b = HashEmbedder(passage_template="{text}")
    forged = dense_dir(tmp_path, template_b)
    shutil.copytree(a.index_dir, forged)  # template A's index where template B's belongs
    before = snapshot(forged)

    with pytest.raises(IndexMismatchError) as err:
        DenseRetriever(corpus=CORPUS, embedder=template_b, cache_dir=str(tmp_path))
    message = str(err.value)
    assert str(forged) in message and "passage_template: saved '{title}\\n{text}', requested '{text}'" in message
    assert "force=true" in message and "cache_dir" in message
    assert template_b.calls == [] and snapshot(forged) == before

    rebuilt = DenseRetriever(corpus=CORPUS, embedder=template_b, cache_dir=str(tmp_path), force=True)
    assert not rebuilt.from_cache and rebuilt.index_dir == forged
    manifest = json.loads((forged / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["passage_template"] == "{text}"


def test_force_rebuilds_in_place_with_a_warning(tmp_path, caplog):
    a = DenseRetriever(corpus=CORPUS, embedder=HashEmbedder(), cache_dir=str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="hoprag.retrieval.retrievers"):
        forced = DenseRetriever(corpus=CORPUS, embedder=HashEmbedder(), cache_dir=str(tmp_path), force=True)
    assert not forced.from_cache and forced.index_dir == a.index_dir
    assert f"force=true: replacing the index in {a.index_dir}" in caplog.text


def test_an_unfinished_build_is_cleared_and_built(tmp_path):
    directory = dense_dir(tmp_path, HashEmbedder())
    directory.mkdir(parents=True)
    (directory / "index.faiss").write_bytes(b"half written")  # no manifest: the build never finished
    retriever = DenseRetriever(corpus=CORPUS, embedder=HashEmbedder(), cache_dir=str(tmp_path))
    assert not retriever.from_cache and retriever.index_dir == directory
    assert (directory / "manifest.json").is_file()


def test_bm25_settings_live_side_by_side_and_a_copied_index_is_refused(tmp_path):
    first = BM25Retriever(corpus=CORPUS, cache_dir=str(tmp_path))
    before = snapshot(first.index_dir)
    other = BM25Retriever(corpus=CORPUS, cache_dir=str(tmp_path), k1=1.2)
    assert not other.from_cache and other.index_dir != first.index_dir
    assert snapshot(first.index_dir) == before
    assert BM25Retriever(corpus=CORPUS, cache_dir=str(tmp_path)).from_cache

    shutil.rmtree(other.index_dir)
    shutil.copytree(first.index_dir, other.index_dir)
    copied = snapshot(other.index_dir)
    with pytest.raises(IndexMismatchError, match="k1: saved 1.5, requested 1.2.*force=true"):
        BM25Retriever(corpus=CORPUS, cache_dir=str(tmp_path), k1=1.2)
    assert snapshot(other.index_dir) == copied
