"""Loading a transformers causal LM once per process: GGUF files converted once (`hoprag.llm.gguf`), weights
shared by every backend object naming the same model, dtype, device and adapter.

A peft LoRA adapter (`adapter`: the folder `save_pretrained` wrote) is loaded onto its own copy of the base, so
the un-tuned model stays shared and untouched. In float32 the adapter is merged into the weights (one matmul per
layer instead of three; the same outputs up to float32 rounding); in lower precisions it stays a separate
branch, since merging would round the small update into bf16 weights.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoprag.utils.bundled import resolve_model_ref
from hoprag.utils.device import resolve_device

log = logging.getLogger(__name__)

DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16", "half": "float16", "auto": "auto"}


@dataclass
class LoadedModel:
    model: Any
    tokenizer: Any
    source: str  # what from_pretrained read: a folder or hub id
    device: str
    seconds: float  # wall time of this load (conversion included when it happened)


_MODELS: dict[Hashable, LoadedModel] = {}
_LOCK = threading.Lock()


def load_causal_lm(
    model: str,
    dtype: str = "float32",
    device: str = "auto",
    cache_dir: str | None = None,
    convert_gguf: bool = True,
    trust_remote_code: bool = False,
    shared: bool = True,
    adapter: str | None = None,
) -> LoadedModel:
    """Model and tokenizer for `model` (with the LoRA `adapter` applied, when given), from the process-wide
    cache when `shared` (the default)."""
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; one of {sorted(DTYPES)}")
    ref, device = resolve_model_ref(model), resolve_device(device)
    adapter = resolve_model_ref(adapter) if adapter else None
    key = (ref, DTYPES[dtype], device, convert_gguf, trust_remote_code, adapter and adapter_digest(adapter))
    if not shared:
        return _load(ref, DTYPES[dtype], device, cache_dir, convert_gguf, trust_remote_code, adapter)
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = _load(ref, DTYPES[dtype], device, cache_dir, convert_gguf, trust_remote_code, adapter)
        return _MODELS[key]


def adapter_digest(adapter: str) -> str:
    """A short hash of a peft adapter folder's config and weights: what a tuned model's outputs depend on, so
    caches keyed by it miss when the adapter is retrained in place."""
    folder = Path(adapter)
    files = sorted(p for p in folder.glob("adapter_*") if p.is_file())
    if not (folder / "adapter_config.json").is_file():
        raise FileNotFoundError(f"{folder} is not a peft adapter folder (no adapter_config.json)")
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()[:16]


def loaded_models() -> dict[Hashable, LoadedModel]:
    """The models loaded in this process so far (a copy), by (model, dtype, device, conversion, trust)."""
    with _LOCK:
        return dict(_MODELS)


def clear_model_cache() -> None:
    """Forget the process-wide models (the next use loads again)."""
    with _LOCK:
        _MODELS.clear()


def _load(
    ref: str, dtype: str, device: str, cache_dir: str | None, convert: bool, trust: bool, adapter: str | None = None
) -> LoadedModel:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    source, gguf_kw = ref, {}
    if ref.lower().endswith(".gguf"):
        if convert:
            from hoprag.llm.gguf import converted_gguf

            source = str(converted_gguf(ref, cache_dir))
        else:
            source, gguf_kw = str(Path(ref).parent), {"gguf_file": Path(ref).name}
    torch_dtype = dtype if dtype == "auto" else getattr(torch, dtype)
    log.debug("loading LLM %s (%s, %s)", source, dtype, device)
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust, **gguf_kw)
    kwargs: dict[str, Any] = {"dtype": torch_dtype, "trust_remote_code": trust, **gguf_kw}
    if device != "cpu":
        kwargs["device_map"] = device
    lm = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    if device == "cpu":
        lm = lm.to("cpu")
    if adapter:
        lm = _with_adapter(lm, adapter)
    lm.eval()
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    seconds = time.perf_counter() - started
    log.info("loaded LLM %s (%s, %s) in %.1f s", source, dtype, device, seconds)  # one line: after, with the time
    return LoadedModel(lm, tokenizer, source, device, seconds)


def _with_adapter(lm: Any, adapter: str) -> Any:
    """The base with the LoRA adapter: merged into float32 weights, a separate branch otherwise."""
    import torch
    from peft import PeftModel

    log.info("loading LoRA adapter %s", adapter)
    tuned = PeftModel.from_pretrained(lm, adapter)
    return tuned.merge_and_unload() if lm.dtype == torch.float32 else tuned
