"""GPU memory: each in-process vLLM engine of a job (engines with the same arguments are one, as
`hoprag.llm.vllm` shares them) against the GPUs torch sees. vLLM takes `gpu_memory_utilization` of each of its
`tensor_parallel_size` GPUs and must fit the weights, one `max_model_len` sequence of KV cache and its own
working memory there; the engines of one process share the GPUs, so their fractions must sum to at most 1.
Without a GPU the estimate is only shown (unknown: vLLM's CPU backend, or a stand-in, may still run it).

The estimate: weights = parameters × the run's dtype bytes, the parameters read from the cached weight files'
size and the checkpoint's dtype (config.json), else from the size the hub id states (`Qwen3-8B`: 8×10⁹), a rough
figure; KV = 2 × layers × KV heads × head size × dtype bytes per token, from config.json (0 without it);
plus OVERHEAD for CUDA graphs, activations and the sampler."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hoprag.reproduce.preflight.host import Host
from hoprag.reproduce.preflight.models import model_weights
from hoprag.reproduce.preflight.need import MISSING, OK, UNKNOWN, Need

VLLM = "hoprag.llm.VLLMLLM"
GIB = 2**30
OVERHEAD = 2 * GIB
BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}
SIZE_IN_NAME = re.compile(r"(?:^|[-_/])(\d+(?:\.\d+)?)[bB](?![a-zA-Z0-9])")  # Qwen3-8B, selfrag_llama2_7b
ENGINE_KEYS = ("model", "dtype", "tensor_parallel_size", "gpu_memory_utilization", "seed", "trust_remote_code",
               "max_model_len")  # fmt: skip


def gpu_needs(objects: list[dict[str, Any]], host: Host) -> Iterator[Need]:
    engines = list({_engine_args(e): e for e in objects if e["_target_"] == VLLM}.values())
    for engine in engines:
        yield _fits(engine, host)
    share = sum(float(e.get("gpu_memory_utilization", 0.9)) for e in engines)
    if len(engines) > 1:
        what = f"{len(engines)} vLLM engines in one process ({' + '.join(_util(e) for e in engines)} of the GPU)"
        state = OK if share <= 1.0 else MISSING
        yield Need("gpu", what, "lower their gpu_memory_utilization to sum to 1 at most", state,
                   "" if state == OK else f"together {share:.2f} of the GPU memory")  # fmt: skip


def estimate(engine: Mapping[str, Any], host: Host) -> tuple[int | None, str]:
    """The engine's bytes on each GPU (weights shared out over tensor parallelism, KV cache, overhead), or None,
    and how the weights were sized."""
    weights = model_weights(str(engine["model"]), host)
    config = (weights.config if weights else None) or {}
    dtype = _dtype(engine.get("dtype"), config)
    stored = BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or ""), None)
    if weights is not None and weights.size and stored:
        size, how = weights.size // stored * BYTES[dtype], "from the cached weights"
    elif (match := SIZE_IN_NAME.search(str(engine["model"]))) is not None:
        size, how = int(float(match.group(1)) * 1e9) * BYTES[dtype], "rough: from the size in its name"
    else:
        return None, "no cached weights and no size in its name"
    kv = _kv_per_token(config, BYTES[dtype]) * int(engine.get("max_model_len") or 0)
    if not config:
        how += "; KV cache not counted (no config.json)"
    return size // int(engine.get("tensor_parallel_size") or 1) + kv + OVERHEAD, how


def _fits(engine: Mapping[str, Any], host: Host) -> Need:
    need, how = estimate(engine, host)
    util, tp = float(engine.get("gpu_memory_utilization", 0.9)), int(engine.get("tensor_parallel_size") or 1)
    what = f"vLLM {engine['model']} ({engine.get('max_model_len')} tokens, {_util(engine)} of {tp} GPU)"
    if need is None:
        return Need("gpu", what, "a GPU", UNKNOWN, how)
    command = f"{tp} GPU(s) with {need / util / GIB:.0f} GiB or more"
    gpus = host.gpu_memory()
    if not gpus:  # vLLM also runs on its CPU backend (or a stand-in): nothing here to size it against
        return Need("gpu", what, command, UNKNOWN, f"≈{need / GIB:.1f} GiB ({how}); no GPU here")
    if len(gpus) < tp:
        return Need("gpu", what, command, MISSING, f"≈{need / GIB:.1f} GiB ({how}); torch sees {len(gpus)} GPUs")
    have = min(gpus[:tp]) * util
    state = OK if need <= have else MISSING
    return Need("gpu", what, command, state, f"≈{need / GIB:.1f} GiB of {have / GIB:.1f} GiB ({how})")


def _engine_args(engine: Mapping[str, Any]) -> str:
    """What decides whether two VLLMLLMs share one engine (`VLLMLLM.engine_args`): an adapter's LoRA settings,
    its rank read from the adapter when it is there, then `engine_kwargs` over them."""
    lora: dict[str, Any] = {}
    if engine.get("adapter"):
        config = Path(str(engine["adapter"])) / "adapter_config.json"
        lora = {"enable_lora": True, "max_lora_rank": json.loads(config.read_text())["r"] if config.is_file() else None}
    args = {**{k: engine.get(k) for k in ENGINE_KEYS}, **lora, **dict(engine.get("engine_kwargs") or {})}
    return json.dumps(args, sort_keys=True, default=str)


def _dtype(dtype: Any, config: Mapping[str, Any]) -> str:
    """The run's dtype: vLLM's `auto` is the checkpoint's, a float32 checkpoint's run in 16 bits (bfloat16 where
    the checkpoint does not say)."""
    if dtype not in (None, "auto"):
        return str(dtype) if str(dtype) in BYTES else "bfloat16"
    stored = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    return stored if stored in BYTES and BYTES[stored] == 2 else "bfloat16"


def _kv_per_token(config: Mapping[str, Any], dtype_bytes: int) -> int:
    layers, heads = config.get("num_hidden_layers"), config.get("num_attention_heads")
    if not layers or not heads:
        return 0
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return 2 * layers * (config.get("num_key_value_heads") or heads) * head_dim * dtype_bytes


def _util(engine: Mapping[str, Any]) -> str:
    return f"{float(engine.get('gpu_memory_utilization', 0.9)):g}"
