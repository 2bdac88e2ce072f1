"""A trained TreeHop runs where the run's models run: the embedder's device (auto: the GPU when torch sees one),
checked without a GPU through torch's "meta" device and a stand-in for CUDA's presence."""

from __future__ import annotations

import numpy as np
import torch

from hoprag.data.types import Passage
from hoprag.retrieval import DenseRetriever
from hoprag.retrieval.embedders import HashingEmbedder
from hoprag.treehop import TreeHop, TreeHopRetriever, load_treehop
from hoprag.treehop import retriever as retriever_module
from hoprag.treehop.retriever import model_step

CORPUS = [Passage(f"p{i}", f"T{i}", f"passage {i}") for i in range(6)]


def export(tmp_path) -> str:
    model = TreeHop(8)
    meta = {"config": model.config, "embedder": HashingEmbedder(dim=8).describe_encoding()}
    torch.save({**meta, "state_dict": model.state_dict()}, tmp_path / "treehop.pt")
    return str(tmp_path)


class DeviceEmbedder(HashingEmbedder):
    device = "cuda:1"


def test_the_checkpoint_is_moved_to_the_device_asked_for(tmp_path, monkeypatch):
    ckpt = export(tmp_path)
    model, _ = load_treehop(ckpt, device="meta")
    assert {p.device.type for p in model.parameters()} == {"meta"}
    assert {p.device.type for p in load_treehop(ckpt)[0].parameters()} == {"cpu"}  # the default
    moved = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(TreeHop, "to", lambda self, device: moved.append(device) or self)
    load_treehop(ckpt, device="auto")
    assert moved == ["cuda"]


def test_the_retriever_follows_the_embedders_device_unless_told(tmp_path, monkeypatch):
    ckpt = export(tmp_path)
    asked = []

    def load(path, embedder, device):
        asked.append(device)
        return load_treehop(path, embedder)

    monkeypatch.setattr(retriever_module, "load_treehop", load)
    for embedder, device in ((DeviceEmbedder(dim=8), None), (HashingEmbedder(dim=8), None),
                             (DeviceEmbedder(dim=8), "cpu")):  # fmt: skip
        dense = DenseRetriever(CORPUS, embedder, index={"use_gpu": False})
        TreeHopRetriever(CORPUS, dense, ckpt=ckpt, device=device)
    assert asked == ["cuda:1", "auto", "cpu"]


def test_the_step_hands_back_numpy_whatever_the_models_device():
    model = TreeHop(8).eval()
    q, c = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float32)
    with torch.no_grad():
        expected = model(torch.from_numpy(q), torch.from_numpy(c)).numpy()
    np.testing.assert_allclose(model_step(model)(q, c), expected)
