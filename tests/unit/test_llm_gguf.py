"""The GGUF conversion cache, with a fake loader (the real conversion is covered by the slow HF tests)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from hoprag.llm import gguf


class FakeModel:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.hf_quantizer = object()
        self.is_quantized = True
        self.quantization_method = "gguf"
        self.config = SimpleNamespace(quantization_config={"quant_method": "gguf"})

    def save_pretrained(self, folder: Path) -> None:
        if self.hf_quantizer is not None:
            raise ValueError("refusing to save a quantized model")
        (Path(folder) / "model.safetensors").write_bytes(b"weights")
        if self.fail:
            raise KeyboardInterrupt("killed mid-conversion")
        (Path(folder) / "config.json").write_text("{}")


class FakeTokenizer:
    def save_pretrained(self, folder: Path) -> None:
        (Path(folder) / "tokenizer.json").write_text("{}")


@pytest.fixture
def gguf_file(tmp_path):
    path = tmp_path / "pkg" / "Tiny-Model.Q4_1.gguf"
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + b"\0" * 100)
    return path


@pytest.fixture
def loads(monkeypatch):
    calls = []

    def fake_load(path, fail=False):
        calls.append(path)
        return FakeModel(fail=getattr(fake_load, "fail", False)), FakeTokenizer()

    monkeypatch.setattr(gguf, "load_gguf", fake_load)
    return fake_load, calls


def test_converts_once_into_the_cache_and_reuses_it(tmp_path, gguf_file, loads):
    _, calls = loads
    folder = gguf.converted_gguf(gguf_file, cache_dir=tmp_path / "cache")
    assert folder.parent == tmp_path / "cache" / "models"
    assert folder.name.startswith("Tiny-Model.Q4_1-")
    assert {p.name for p in folder.iterdir()} == {"model.safetensors", "config.json", "tokenizer.json",
                                                  gguf.SOURCE_FILE}
    assert json.loads((folder / gguf.SOURCE_FILE).read_text())["gguf"] == str(gguf_file)
    assert gguf.converted_gguf(gguf_file, cache_dir=tmp_path / "cache") == folder
    assert len(calls) == 1


def test_cache_env_var_and_changed_file_gets_a_new_folder(tmp_path, gguf_file, loads, monkeypatch):
    monkeypatch.setenv("HOPRAG_CACHE", str(tmp_path / "envcache"))
    first = gguf.converted_gguf(gguf_file)
    assert first.parent == tmp_path / "envcache" / "models"
    os.utime(gguf_file, ns=(1, 1))
    second = gguf.converted_gguf(gguf_file)
    assert second != first and gguf.is_converted(second)


def test_a_killed_conversion_leaves_nothing_behind(tmp_path, gguf_file, loads):
    fake_load, calls = loads
    fake_load.fail = True
    with pytest.raises(KeyboardInterrupt):
        gguf.converted_gguf(gguf_file, cache_dir=tmp_path)
    assert list((tmp_path / "models").iterdir()) == []  # no half folder, no temporary one
    fake_load.fail = False
    folder = gguf.converted_gguf(gguf_file, cache_dir=tmp_path)
    assert gguf.is_converted(folder) and len(calls) == 2


def test_stale_temporaries_of_killed_conversions_are_removed(tmp_path, gguf_file, loads):
    target = gguf.converted_dir(gguf_file, tmp_path)
    target.parent.mkdir(parents=True)
    stale, fresh = target.parent / f".tmp-{target.name}-old", target.parent / f".tmp-{target.name}-live"
    stale.mkdir(), fresh.mkdir()
    os.utime(stale, (1, 1))
    gguf.converted_gguf(gguf_file, cache_dir=tmp_path)
    assert not stale.exists() and fresh.exists()


def test_concurrent_conversion_keeps_the_first_complete_folder(tmp_path, gguf_file, loads, monkeypatch):
    target = gguf.converted_dir(gguf_file, tmp_path)
    real_rename = os.rename

    def racing_rename(src, dst):  # another process finishes first
        Path(dst).mkdir(parents=True)
        (Path(dst) / "config.json").write_text("{}")
        (Path(dst) / gguf.SOURCE_FILE).write_text("{}")
        real_rename(src, dst)

    monkeypatch.setattr(gguf.os, "rename", racing_rename)
    assert gguf.converted_gguf(gguf_file, cache_dir=tmp_path) == target
    assert [p.name for p in (tmp_path / "models").iterdir()] == [target.name]


def test_strip_gguf_quantization_clears_the_quantizer():
    model = FakeModel()
    gguf.strip_gguf_quantization(model)
    assert model.hf_quantizer is None and model.is_quantized is False and model.quantization_method is None
    assert not hasattr(model.config, "quantization_config")


def test_missing_gguf_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        gguf.converted_gguf(tmp_path / "nope.gguf", cache_dir=tmp_path)


def test_the_readers_own_bar_is_off_exactly_when_transformers_bars_are():
    from transformers import modeling_gguf_pytorch_utils as reader
    from transformers.utils import logging as hf_logging

    bar = reader.tqdm
    was_enabled = hf_logging.is_progress_bar_enabled()
    try:
        hf_logging.disable_progress_bar()
        with gguf.reader_bar_follows_transformers():
            assert reader.tqdm([1, 2]).disable is True
        assert reader.tqdm is bar  # restored
        hf_logging.enable_progress_bar()
        with gguf.reader_bar_follows_transformers():
            assert reader.tqdm is bar
    finally:
        (hf_logging.enable_progress_bar if was_enabled else hf_logging.disable_progress_bar)()


def test_a_cache_of_its_own_shares_the_checkouts_conversions(tmp_path, gguf_file, loads, monkeypatch):
    monkeypatch.setenv("HOPRAG_CACHE", str(tmp_path / "checkout"))
    own = gguf.share_conversions(tmp_path / "run" / "cache")
    assert gguf.share_conversions(own) == own  # a second call keeps the link
    folder = gguf.converted_gguf(gguf_file, cache_dir=own)
    assert (tmp_path / "checkout" / "models" / folder.name).is_dir()  # converted once, where every cache reads it
    assert gguf.converted_gguf(gguf_file) == tmp_path / "checkout" / "models" / folder.name
    assert len(loads[1]) == 1
    gguf.share_conversions(tmp_path / "checkout")  # the checkout's own cache is not linked to itself
    assert not (tmp_path / "checkout" / "models").is_symlink()
