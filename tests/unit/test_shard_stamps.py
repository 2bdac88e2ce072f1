"""Index shards are stamped (embedder digest, template, corpus, rows, dtype, byte lengths, checksums): a resumed
build rebuilds a short shard instead of counting it done, and a merge refuses a foreign, truncated, corrupt or
overlapping shard, naming it and the differing key."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pytest

from hoprag.retrieval import IndexMismatchError
from hoprag.retrieval.embedders import HashingEmbedder
from tests.unit.test_shards import CountingEmbedder, build, vectors_and_ids


def shard_dir(cache):
    return next((cache / "dense-shards").iterdir())


def truncate(path, keep: int = 100) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def copy_shard(source, target, shard: int) -> None:
    """A shard's three files (vectors, ids, stamp) from one store into another, as a careless copy would."""
    for name in (f"shard-{shard:05d}.npy", f"shard-{shard:05d}.json", f"shard-{shard:05d}.stamp.json"):
        shutil.copy(source / name, target / name)


def test_each_shard_carries_a_stamp_of_what_made_it(tmp_path):
    build(tmp_path)
    stamp = json.loads((shard_dir(tmp_path) / "shard-00001.stamp.json").read_text())
    assert stamp["rows"] == [10, 20] and stamp["dtype"] == "float32" and stamp["passage_template"] == "{title}\n{text}"
    assert len(stamp["embedder"]) == 8 and len(stamp["corpus_fingerprint"]) >= 16
    vectors = shard_dir(tmp_path) / "shard-00001.npy"
    assert stamp["files"]["shard-00001.npy"]["bytes"] == vectors.stat().st_size
    assert len(stamp["files"]["shard-00001.npy"]["sha256"]) == 64 and "shard-00001.json" in stamp["files"]


def test_a_resumed_build_rebuilds_a_short_shard_instead_of_counting_it_done(tmp_path, caplog):
    reference = build(tmp_path / "whole")
    build(tmp_path / "cut", worker=(0, 2))  # shards 0 and 1 of 5
    truncate(shard_dir(tmp_path / "cut") / "shard-00001.npy")
    resumed = CountingEmbedder()
    with caplog.at_level(logging.WARNING, logger="hoprag.retrieval.shards"):
        result = build(tmp_path / "cut", resumed)
    assert resumed.encoded == 45 - 10  # shard 0 kept, shard 1 rebuilt, shards 2-4 new
    assert "rebuilding shard 1: shard-00001.npy bytes: stamped" in caplog.text and "on disk 100" in caplog.text
    np.testing.assert_array_equal(vectors_and_ids(result.index_dir)[0], vectors_and_ids(reference.index_dir)[0])


def test_merge_refuses_a_truncated_or_corrupt_shard_naming_it(tmp_path):
    build(tmp_path, worker=(0, 1))
    store = shard_dir(tmp_path)
    vectors = store / "shard-00002.npy"
    intact = vectors.read_bytes()
    truncate(vectors)
    with pytest.raises(IndexMismatchError, match=r"shard 2: shard-00002.npy bytes: stamped \d+, on disk 100"):
        build(tmp_path, merge=True)
    vectors.write_bytes(intact[:-4] + b"\x00\x00\x80\x7f")  # same length, one value changed
    with pytest.raises(IndexMismatchError, match="shard 2: shard-00002.npy sha256: stamped [0-9a-f]{64}, on disk"):
        build(tmp_path, merge=True)
    vectors.write_bytes(intact)
    assert build(tmp_path, merge=True).state == "built"


def test_merge_refuses_a_foreign_shard_naming_the_key(tmp_path):
    build(tmp_path / "ours", worker=(0, 1))
    build(tmp_path / "theirs", HashingEmbedder(dim=16, passage_template="{text}"), worker=(0, 1))
    copy_shard(shard_dir(tmp_path / "theirs"), shard_dir(tmp_path / "ours"), 3)
    with pytest.raises(IndexMismatchError, match=r"shard 3: shard-00003.stamp.json embedder: stamped '\w{8}', "
                                                 r"planned '\w{8}'.*passage_template: stamped '\{text\}'"):
        build(tmp_path / "ours", merge=True)


def test_merge_refuses_an_overlapping_shard_naming_its_rows(tmp_path):
    build(tmp_path / "ours", worker=(0, 1))  # shards of 10
    build(tmp_path / "theirs", worker=(0, 1), shard_size=15)
    copy_shard(shard_dir(tmp_path / "theirs"), shard_dir(tmp_path / "ours"), 1)  # rows 15-30 where 10-20 belong
    with pytest.raises(IndexMismatchError, match=r"shard 1: shard-00001.stamp.json rows: stamped \[15, 30\], "
                                                 r"planned \[10, 20\]"):
        build(tmp_path / "ours", merge=True)
