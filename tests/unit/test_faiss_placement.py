"""Where a FAISS index searches (`index.use_gpu`: auto, cpu, gpu, gpu:<n>, shard), checked without a GPU: a
stand-in for FAISS's GPU surface records how it was called and hands back CPU indexes, so searches still run."""

from __future__ import annotations

import faiss
import numpy as np
import pytest

from hoprag.data.types import Passage
from hoprag.retrieval import DenseRetriever
from hoprag.retrieval import faiss_placement
from hoprag.retrieval.dense import DenseIndex
from hoprag.retrieval.faiss_placement import Placement, _gpu_builder, placement
from tests.fakes import HashEmbedder

CORPUS = [Passage(f"p{i}", f"Title {i}", f"passage number {i} about topic {i % 5}") for i in range(60)]


class Options:
    """GpuClonerOptions / GpuMultipleClonerOptions: plain fields FAISS reads."""

    useFloat16 = False
    shard = False


class FakeGpus:
    """FAISS's GPU calls on `n` stand-in GPUs: each placement is recorded, and the "GPU" index is a CPU copy."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, n: int) -> None:
        self.calls: list[tuple] = []
        monkeypatch.setattr(faiss_placement, "_gpu_resources", None)
        for name, value in {
            "StandardGpuResources": object,
            "get_num_gpus": lambda: n,
            "GpuClonerOptions": Options,
            "GpuMultipleClonerOptions": Options,
            "GpuParameterSpace": faiss.ParameterSpace,
            "index_cpu_to_gpu": self.to_gpu,
            "index_cpu_to_all_gpus": self.to_all_gpus,
            "index_gpu_to_cpu": self.to_cpu,
        }.items():
            monkeypatch.setattr(faiss, name, value, raising=False)

    def _copy(self, index: faiss.Index) -> faiss.Index:
        if isinstance(faiss.downcast_index(index), faiss.IndexHNSW):
            raise RuntimeError("This index type is not implemented on GPU")
        return faiss.clone_index(index)

    def to_gpu(self, resources, device: int, index: faiss.Index, options: Options) -> faiss.Index:
        self.calls.append(("gpu", device, options.useFloat16))
        return self._copy(index)

    def to_all_gpus(self, index: faiss.Index, options: Options) -> faiss.Index:
        self.calls.append(("all", options.shard, options.useFloat16))
        return self._copy(index)

    def to_cpu(self, index: faiss.Index) -> faiss.Index:
        self.calls.append(("cpu",))
        return faiss.clone_index(index)


def faiss_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """FAISS as faiss-cpu installs it: no GPU classes at all."""
    monkeypatch.delattr(faiss, "StandardGpuResources", raising=False)


@pytest.mark.parametrize(
    ("use_gpu", "expected"),
    [("auto", "gpu:0"), ("auto:shard", "shard"), (True, "gpu:0"), ("gpu", "gpu:0"), ("gpu:1", "gpu:1"),
     ("shard", "shard"), (False, "cpu"), ("cpu", "cpu")],
)  # fmt: skip
def test_each_setting_names_a_placement(monkeypatch, use_gpu, expected):
    FakeGpus(monkeypatch, n=2)
    assert str(placement(use_gpu)) == expected


@pytest.mark.parametrize("use_gpu", ["cuda", "gpu:x", "yes", "shards"])
def test_an_unknown_setting_is_refused_naming_the_choices(use_gpu):
    with pytest.raises(ValueError, match="choose auto, auto:shard, cpu, gpu, gpu:<n> or shard"):
        placement(use_gpu)


@pytest.mark.parametrize("use_gpu", [True, "gpu", "gpu:1", "shard"])
def test_a_gpu_placement_with_faiss_cpu_is_refused_and_auto_falls_back(monkeypatch, use_gpu):
    faiss_cpu(monkeypatch)
    with pytest.raises(RuntimeError, match=r"no GPU support \(faiss-cpu\).*set index.use_gpu=cpu or auto"):
        placement(use_gpu)
    assert placement("auto") == Placement("cpu")


def test_a_gpu_placement_without_a_visible_gpu_or_past_the_last_one_is_refused(monkeypatch):
    FakeGpus(monkeypatch, n=0)
    with pytest.raises(RuntimeError, match="FAISS sees no GPU"):
        placement("shard")
    assert placement("auto") == Placement("cpu")
    FakeGpus(monkeypatch, n=2)
    with pytest.raises(RuntimeError, match=r"FAISS sees 2 GPU\(s\), numbered 0 to 1"):
        placement("gpu:2")


def test_shard_splits_the_index_over_every_gpu_and_searches_and_saves_as_on_the_cpu(monkeypatch, tmp_path):
    cpu = DenseRetriever(CORPUS, HashEmbedder(), {"use_gpu": "cpu"})
    gpus = FakeGpus(monkeypatch, n=2)
    sharded = DenseRetriever(CORPUS, HashEmbedder(), {"use_gpu": "shard"})
    assert gpus.calls == [("all", True, False)] and sharded.index.placement == Placement("shard")
    queries = ["topic 3", "passage number 7"]
    assert [[h.passage.id for h in hits] for hits in sharded.search(queries, 5)] == [
        [h.passage.id for h in hits] for hits in cpu.search(queries, 5)
    ]
    sharded.index.save(tmp_path)
    assert gpus.calls[-1] == ("cpu",)  # written from a CPU copy, shards merged
    assert DenseIndex.load(tmp_path, use_gpu="cpu").ntotal == len(CORPUS)


def test_gpu_n_places_the_index_on_that_gpu_in_float16_for_pq(monkeypatch):
    gpus = FakeGpus(monkeypatch, n=2)
    DenseRetriever(CORPUS, HashEmbedder(), {"use_gpu": "gpu:1"})
    DenseRetriever(CORPUS, HashEmbedder(dim=16), {"use_gpu": "gpu", "factory": "IVF2,PQ4", "train_size": 60})
    assert gpus.calls == [("gpu", 1, False), ("gpu", 0, True)]


def test_a_gpu_placement_is_refused_before_any_passage_is_encoded(monkeypatch):
    faiss_cpu(monkeypatch)
    embedder = HashEmbedder()
    with pytest.raises(RuntimeError, match="index.use_gpu=shard"):
        DenseRetriever(CORPUS, embedder, {"use_gpu": "shard"})
    assert embedder.calls == []


def test_hnsw_stays_on_the_cpu_under_auto_and_is_refused_on_an_explicit_gpu(monkeypatch, caplog):
    gpus = FakeGpus(monkeypatch, n=1)
    kept = DenseRetriever(CORPUS, HashEmbedder(), {"use_gpu": "auto", "factory": "HNSW8"})
    assert not kept.index.on_gpu and "keeping the HNSW8 index on CPU" in caplog.text
    with pytest.raises(RuntimeError, match="index.use_gpu=gpu: FAISS cannot put the HNSW8 index there"):
        DenseRetriever(CORPUS, HashEmbedder(), {"use_gpu": "gpu", "factory": "HNSW8"})
    assert [c[0] for c in gpus.calls] == ["gpu", "gpu"]


def test_ivf_trains_on_the_placements_gpu_and_on_gpu_0_for_shard(monkeypatch):
    gpus = FakeGpus(monkeypatch, n=2)
    untrained = faiss.index_factory(8, "IVF2,PQ2", faiss.METRIC_INNER_PRODUCT)
    assert _gpu_builder(untrained, "IVF2,PQ2", Placement("gpu", 1)) is not None
    assert _gpu_builder(untrained, "IVF2,PQ2", Placement("shard")) is not None
    assert _gpu_builder(untrained, "IVF2,PQ2", Placement("cpu")) is None
    assert gpus.calls == [("gpu", 1, True), ("gpu", 0, True)]
    flat = faiss.IndexFlatIP(8)
    flat.add(np.eye(8, dtype=np.float32))
    assert _gpu_builder(flat, "Flat", Placement("gpu")) is None  # nothing to train
