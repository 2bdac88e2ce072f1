"""Convert a GGUF checkpoint once into a plain transformers folder, so later loads take a second, not ~20.

transformers reads a `.gguf` file (`from_pretrained(folder, gguf_file=name)`) by de-quantizing every
tensor to float32, which for SmolLM2-135M takes ~20 s on a small CPU. `converted_gguf` does that once
and saves model and tokenizer under `cache_root()/models/<stem>-<key>/`, where the key hashes the
GGUF's resolved path, size and mtime (a changed file gets a new folder). The folder is written to a
temporary sibling and renamed into place, so a killed conversion never leaves a half folder behind (its
temporary folder is removed by the next conversion once an hour old), and two processes converting at
once both end up with one complete folder. The weights are float32 (what
de-quantization yields); load them in any dtype.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from hoprag.paths import cache_root

log = logging.getLogger(__name__)

SOURCE_FILE = "hoprag_gguf_source.json"


def converted_dir(gguf_path: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the converted folder of `gguf_path` lives (whether or not it exists yet)."""
    path = Path(gguf_path).expanduser().resolve()
    st = path.stat()
    key = hashlib.sha256(f"{path}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", path.stem)
    return cache_root(cache_dir) / "models" / f"{stem}-{key}"


def share_conversions(cache: str | os.PathLike) -> Path:
    """`cache`, a cache root of its own (a rehearsal's, a test's), reading and writing the checkout cache's
    conversions (`models/`, linked): a GGUF's conversion depends on the file alone, and takes 20-40 s."""
    cache = Path(cache)
    link, target = cache / "models", cache_root() / "models"
    if not link.is_symlink() and not link.exists() and link != target:
        target.mkdir(parents=True, exist_ok=True)
        cache.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
    return cache


def is_converted(folder: Path) -> bool:
    return (folder / SOURCE_FILE).is_file() and (folder / "config.json").is_file()


def converted_gguf(
    gguf_path: str | os.PathLike, cache_dir: str | os.PathLike | None = None, force: bool = False
) -> Path:
    """The converted folder of `gguf_path`, converting it first when it is not in the cache."""
    gguf_path = Path(gguf_path).expanduser().resolve()
    if not gguf_path.is_file():
        raise FileNotFoundError(f"GGUF file {gguf_path} does not exist")
    target = converted_dir(gguf_path, cache_dir)
    if is_converted(target) and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{target.name}-", dir=target.parent))
    try:
        started = time.perf_counter()
        log.info("converting %s into %s (once; later loads reuse it)", gguf_path, target)
        model, tokenizer = load_gguf(gguf_path)
        strip_gguf_quantization(model)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        seconds = time.perf_counter() - started
        source = {"gguf": str(gguf_path), "size": gguf_path.stat().st_size, "seconds": round(seconds, 2)}
        (tmp / SOURCE_FILE).write_text(json.dumps(source, indent=2) + "\n")
        os.chmod(tmp, 0o755)  # mkdtemp's folder is private; the cache is not
        if force and target.exists():
            shutil.rmtree(target)
        try:
            os.rename(tmp, target)
        except OSError:
            if not is_converted(target):  # not a concurrent conversion that won the race
                raise
            log.info("%s was converted concurrently; keeping that copy", target)
        log.info("converted %s in %.1f s", gguf_path.name, seconds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _remove_stale_temporaries(target: Path, older_than_s: float = 3600.0) -> None:
    """Temporary folders of conversions killed (SIGKILL) long ago; a young one may be a live conversion."""
    for tmp in target.parent.glob(f".tmp-{target.name}-*"):
        try:
            if time.time() - tmp.stat().st_mtime > older_than_s:
                shutil.rmtree(tmp, ignore_errors=True)
        except FileNotFoundError:
            pass


def load_gguf(gguf_path: Path):
    """Model (float32, de-quantized) and tokenizer read straight from the GGUF file (slow)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    with reader_bar_follows_transformers():
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    return model, tokenizer


@contextlib.contextmanager
def reader_bar_follows_transformers():
    """transformers' GGUF reader draws a plain tqdm bar that its own progress-bar switch does not reach (in a log
    it is 15 lines); here it is off whenever transformers' bars are (`hoprag.utils.quiet`, unless verbose=true)."""
    from transformers import modeling_gguf_pytorch_utils as reader
    from transformers.utils import logging as hf_logging

    bar = reader.tqdm
    if not hf_logging.is_progress_bar_enabled():
        reader.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        reader.tqdm = bar


def strip_gguf_quantization(model) -> None:
    """Forget that the weights came from a quantized file: they are plain de-quantized tensors now, and
    transformers refuses `save_pretrained` on a model that still carries its GGUF quantizer."""
    model.hf_quantizer = None
    for attr in ("is_quantized", "quantization_method"):
        if hasattr(model, attr):
            try:
                setattr(model, attr, False if attr == "is_quantized" else None)
            except AttributeError:  # a read-only property in some versions
                pass
    if hasattr(model.config, "quantization_config"):
        try:
            delattr(model.config, "quantization_config")
        except AttributeError:
            model.config.quantization_config = None
