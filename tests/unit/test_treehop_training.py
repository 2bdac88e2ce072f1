"""TreeHop training plumbing: batches of trees, negatives, gradients through the hop chain, export/load."""

from __future__ import annotations

import functools
import zlib

import numpy as np
import pytest
import torch

from hoprag.data.twowiki import parse_2wiki
from hoprag.retrieval.embedders import Embedder
from hoprag.treehop import TreeHop, load_treehop
from hoprag.treehop.data import TreeCollator, TreeHopDataModule
from hoprag.treehop.module import TreeHopModule, info_nce


class HashEmbedder(Embedder):
    """Deterministic random unit vectors per text: no model, so data plumbing tests stay fast."""

    dim = 16

    def __init__(self):
        super().__init__("hash", "hash")

    def _encode(self, texts, batch_size):
        return np.stack([np.random.default_rng(zlib.crc32(t.encode())).normal(size=self.dim) for t in texts])


class Records:
    """A QADataset stand-in holding hand-written 2Wiki records."""

    name = "records"
    root = None  # the tests' corpus files are absolute paths

    def __init__(self, n: int):
        self.examples = [chain(i) for i in range(n)]

    def __len__(self):
        return len(self.examples)


def chain(i: int):
    a, b = f"Film {i}", f"Studio {i}"
    titles = [a, b, *(f"Other {i}-{j}" for j in range(8))]
    return parse_2wiki({
        "_id": f"q{i}", "type": "compositional", "question": f"Who founded the studio of Film {i}?", "answer": "x",
        "context": [[t, [f"{t} is about {t}."]] for t in titles], "supporting_facts": [[a, 0], [b, 0]],
        "evidences": [[a, "distributor", b], [b, "founded by", "Somebody"]],
    })  # fmt: skip


@pytest.fixture
def data(tmp_path):
    dm = TreeHopDataModule(Records(12), HashEmbedder(), cache_dir=str(tmp_path), batch_size=4, dev_fraction=0.25)
    dm.setup("fit")
    return dm


def test_datamodule_splits_trees_and_caches_embeddings(data, tmp_path):
    assert len(data.train_trees) == 9 and len(data.dev_trees) == 3
    assert not {t.qid for t in data.train_trees} & {t.qid for t in data.dev_trees}
    assert data.embedded.passages.shape == (120, 16) and data.dim == 16
    assert len(list(tmp_path.glob("hash-*.npz"))) == 1


def test_negatives_come_from_the_question_and_are_resampled(data):
    collate = TreeCollator(data, seed=0)
    trees = data.train_trees[:2]
    first, second = collate(trees), collate(trees)
    assert first.negatives.shape == (4, 5) and (first.negatives >= 0).all()
    for i, t in enumerate(first.tree.tolist()):
        pool = {data.row_of[p] for p in trees[t].nodes[i % 2].negatives}
        assert set(first.negatives[i].tolist()) <= pool
        assert first.positive[i].item() not in set(first.negatives[i].tolist())
    assert not torch.equal(first.negatives, second.negatives)
    assert first.parent.tolist() == [-1, 0, -1, 2]


def module_on(data: TreeHopDataModule, cls: type[TreeHopModule] = TreeHopModule, **kwargs) -> TreeHopModule:
    module = cls(functools.partial(TreeHop), **kwargs)
    module.model = TreeHop(data.dim)
    module.register_buffer("questions", torch.from_numpy(data.embedded.questions), persistent=False)
    module.register_buffer("passages", torch.from_numpy(data.embedded.passages), persistent=False)
    return module


def test_hop1_tuples_carry_no_gradient_and_hop2_flows_through_hop1(data):
    module = module_on(data, output_dropout=0.0)
    batch = TreeCollator(data, seed=0)(data.train_trees[:2])
    queries, _ = module.tree_queries(batch)
    assert torch.equal(queries[0], module.questions[batch.root[0]])  # the question itself at hop 1
    hop1 = batch.depth == 1

    def grad_norm(rows):
        module.zero_grad()
        q, _ = module.tree_queries(batch)
        p, n = module.passages[batch.positive], module.passages[batch.negatives]
        info_nce(q[rows], p[rows], n[rows]).backward()
        return sum(float(x.grad.abs().sum()) for x in module.model.parameters() if x.grad is not None)

    assert grad_norm(hop1) == 0.0
    assert grad_norm(~hop1) > 0.0


def test_training_step_runs_with_in_batch_negatives(data):
    module = module_on(data, in_batch_negatives=True)
    module.log = lambda *a, **k: None
    loss = module.training_step(TreeCollator(data, seed=0)(data.train_trees[:4]), 0)
    assert loss.ndim == 0 and torch.isfinite(loss) and loss.requires_grad


def test_export_round_trips_through_load_treehop(tmp_path):
    module = TreeHopModule(functools.partial(TreeHop))
    module.model = TreeHop(16, gate_scale=0.5)
    module.embedder_info = HashEmbedder().describe()
    module.export(tmp_path / "export")
    loaded, meta = load_treehop(tmp_path / "export")
    assert meta["embedder"]["embedder"] == "hash" and loaded.gate_scale == 0.5
    q, c = torch.randn(2, 16), torch.randn(2, 16)
    assert torch.equal(loaded(q, c), module.model.eval()(q, c))
    with pytest.raises(FileNotFoundError, match="no TreeHop checkpoint"):
        load_treehop(tmp_path / "missing")


def test_corpus_and_mined_negatives_come_from_the_whole_pool_but_never_from_the_tree(tmp_path):
    dm = TreeHopDataModule(Records(12), HashEmbedder(), cache_dir=str(tmp_path), corpus_negatives=3, mined_negatives=2)
    dm.setup("fit")
    batch = TreeCollator(dm, seed=0)(dm.train_trees[:3])
    assert batch.negatives.shape == (6, 10) and (batch.negatives >= 0).all()
    for i, t in enumerate(batch.tree.tolist()):  # (an earlier hop's positive may be a question negative)
        assert not set(batch.negatives[i, 5:].tolist()) & batch.gold[t]
    assert {m.shape for m in dm.mined.values()} == {(2, 20)}
