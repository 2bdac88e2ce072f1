"""A stand-in for vLLM's offline engine, for rehearsing GPU code paths on a CPU (issue 42's `scale=rehearsal`).

It implements the surface hoprag calls (`LLM(...)`, `LLM.generate`, `LLM.get_tokenizer`, `SamplingParams`,
`RequestOutput` / `CompletionOutput` / `Logprob`, `lora.request.LoRARequest`) with vLLM's own rules, and runs a
real small model with transformers underneath, so everything hoprag does with the outputs is exercised:

- the engine reserves `gpu_memory_utilization` of a simulated GPU (`HOPRAG_STANDIN_GPU_GIB`, default 80) and
  refuses to start, as vLLM does, when other live engines of the process left less free; the model's weights
  (the real model's size, from `hoprag_standin.json` in the model folder) must fit in what it reserves;
- `max_model_len` may not exceed the model's `max_position_embeddings`; a request asking for more top
  log-probs than the engine's `max_logprobs` (20 by default) is refused;
- log-probs are the raw model distribution's, with the sampled token and the top `logprobs` per position;
  `token_ids` hold the end-of-sequence token when generation ended there (finish "stop", stop_reason None);
  a stop string ends the text before it (stop_reason = the string);
- a model whose `hoprag_standin.json` says `thinks` writes a short `<think>…</think>` block first whenever the
  prompt opens the assistant's turn without one (Qwen3's template adds an empty block when `enable_thinking`
  is false), so a reasoning model's parsing and counting run for real;
- `HOPRAG_STANDIN_MAX_TOKENS` caps what the CPU generates per request (a reply cut there ends with
  finish_reason "length", as a real budget would, and hoprag counts it).

Model references resolve as in transformers (a folder, or a hub id read from the local Hugging Face cache,
where the rehearsal lays the bundled weights under the paper's ids). Not vLLM's code: our own, for tests."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__version__ = "0.0.0+hoprag.standin"

STANDIN_FILE = "hoprag_standin.json"
THINKING = "<think>\nI read the question and what I was given, and answer in the form asked.\n</think>\n\n"
_RESERVED: dict[int, float] = {}  # live engine id -> GiB it holds on the simulated GPU
_LOCK = threading.Lock()


def gpu_gib() -> float:
    return float(os.environ.get("HOPRAG_STANDIN_GPU_GIB", "80"))


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int | None = 16
    stop: str | list[str] | None = None
    seed: int | None = None
    logprobs: int | None = None
    skip_special_tokens: bool = True

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}.")
        if self.temperature < 0:
            raise ValueError(f"temperature must be non-negative, got {self.temperature}.")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}.")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.logprobs is not None and self.logprobs < -1:
            raise ValueError(f"logprobs must be non-negative or -1, got {self.logprobs}.")
        if self.n > 1 and self.temperature == 0:
            raise ValueError("n must be 1 when using greedy sampling, got n > 1.")
        self.stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or [])


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    cumulative_logprob: float | None
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None = None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    request_id: str
    prompt: str | None
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)
    finished: bool = True


class LLM:
    """The offline engine: `LLM(model=..., gpu_memory_utilization=..., max_logprobs=...)`."""

    def __init__(
        self,
        model: str,
        tokenizer: str | None = None,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        seed: int | None = 0,
        trust_remote_code: bool = False,
        max_logprobs: int = 20,
        enable_lora: bool = False,
        max_lora_rank: int = 16,
        **engine_kwargs: Any,
    ) -> None:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        if not 0 < gpu_memory_utilization <= 1:
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
        self.model_ref, self.max_logprobs, self.seed = model, max_logprobs, seed
        config = AutoConfig.from_pretrained(model, trust_remote_code=trust_remote_code)
        limit = int(getattr(config, "max_position_embeddings", 0) or 0)
        if max_model_len is not None and limit and max_model_len > limit:
            raise ValueError(
                f"User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len "
                f"(max_position_embeddings={limit} in model's config.json)."
            )
        self.meta = _standin_meta(model)
        self._reserve(gpu_memory_utilization, tensor_parallel_size)
        self.tokenizer = AutoTokenizer.from_pretrained(tokenizer or model, trust_remote_code=trust_remote_code)
        self.model = AutoModelForCausalLM.from_pretrained(model, trust_remote_code=trust_remote_code).eval()
        self.enable_lora, self._adapters = enable_lora, {}
        self.engine_kwargs = dict(engine_kwargs)

    def _reserve(self, utilization: float, gpus: int) -> None:
        total = gpu_gib()
        want = utilization * total
        with _LOCK:
            free = total - sum(_RESERVED.values())
            if want > free:
                raise ValueError(
                    f"Free memory on device ({free:.2f}/{total:.2f} GiB) on startup is less than desired GPU "
                    f"memory utilization ({utilization}, {want:.2f} GiB). Decrease GPU memory utilization or "
                    "reduce GPU memory used by other processes."
                )
            weights = float(self.meta.get("weights_gib", 0.0)) / gpus
            if weights >= want:
                raise ValueError(
                    f"Model weights take {weights:.2f} GiB per GPU, more than the {want:.2f} GiB this engine may "
                    "use: no memory is left for the KV cache. Raise gpu_memory_utilization or tensor_parallel_size."
                )
            _RESERVED[id(self)] = want

    def __del__(self) -> None:
        with _LOCK:
            _RESERVED.pop(id(self), None)

    def get_tokenizer(self) -> Any:
        return self.tokenizer

    def generate(
        self,
        prompts: Any,
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        use_tqdm: bool = True,
        lora_request: Any = None,
    ) -> list[RequestOutput]:
        items = prompts if isinstance(prompts, list) else [prompts]
        params = sampling_params if isinstance(sampling_params, (list, tuple)) else [sampling_params] * len(items)
        if len(params) != len(items):
            raise ValueError("The lengths of prompts and sampling_params must be the same.")
        for p in params:
            wanted = (p or SamplingParams()).logprobs
            if wanted is not None and self.max_logprobs != -1 and wanted > self.max_logprobs:
                raise ValueError(f"Requested sample logprobs of {wanted}, which is greater than max allowed: "
                                 f"{self.max_logprobs}")  # fmt: skip
        model = self._model_for(lora_request)
        return [self._one(str(i), item, p or SamplingParams(), model) for i, (item, p) in enumerate(zip(items, params))]

    def _model_for(self, lora_request: Any) -> Any:
        if lora_request is None:
            return self.model
        if not self.enable_lora:
            raise ValueError(f"LoRA is not enabled! Got lora_request {lora_request}")
        path = lora_request.lora_path
        if path not in self._adapters:
            from peft import PeftModel

            self._adapters[path] = PeftModel.from_pretrained(self.model, path).eval()
        return self._adapters[path]

    def _one(self, request_id: str, item: Any, params: SamplingParams, model: Any) -> RequestOutput:
        import torch

        if isinstance(item, dict) and "prompt_token_ids" in item:
            prompt_ids, prompt = list(item["prompt_token_ids"]), None
        else:
            prompt = item["prompt"] if isinstance(item, dict) else str(item)
            prompt_ids = list(self.tokenizer(prompt)["input_ids"])
        budget = int(params.max_tokens or 16)
        cap = int(os.environ.get("HOPRAG_STANDIN_MAX_TOKENS", "0") or 0)
        thinking = self._thinking_ids(prompt_ids)
        outputs = []
        for index in range(params.n):
            seed = None if params.seed is None and self.seed is None else (params.seed or self.seed or 0) + index
            generator = torch.Generator().manual_seed(seed) if seed is not None else None
            ids, logprobs = self._decode(model, prompt_ids, thinking, params, min(budget, cap) if cap else budget,
                                         generator)  # fmt: skip
            outputs.append(self._completion(index, ids, logprobs, params, budget))
        return RequestOutput(request_id, prompt, prompt_ids, outputs)

    def _thinking_ids(self, prompt_ids: list[int]) -> list[int]:
        """The reasoning block a thinking model writes first (none after a prefill or an empty block)."""
        if not self.meta.get("thinks"):
            return []
        opened = self.tokenizer.decode(prompt_ids[-8:])
        if not opened.endswith(str(self.meta.get("assistant_opens", "<|im_start|>assistant\n"))):
            return []
        return list(self.tokenizer(THINKING, add_special_tokens=False)["input_ids"])

    def _decode(self, model, prompt_ids, forced, params, budget, generator) -> tuple[list[int], list[dict[int, Logprob]]]:
        """Token by token from the raw distribution: `forced` tokens first (scored, not sampled), then sampled
        (greedy at temperature 0, else temperature and top-p), until EOS or `budget` tokens."""
        import torch

        eos = self.tokenizer.eos_token_id
        ids: list[int] = []
        logprobs: list[dict[int, Logprob]] = []
        past, inputs = None, torch.tensor([prompt_ids])
        with torch.no_grad():
            while len(ids) < budget:
                out = model(input_ids=inputs, past_key_values=past, use_cache=True)
                past = out.past_key_values
                raw = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
                if len(ids) < len(forced):
                    token = forced[len(ids)]
                elif params.temperature == 0:
                    token = int(torch.argmax(raw))
                else:
                    token = _sample(raw, params.temperature, params.top_p, generator)
                logprobs.append(self._position(raw, token, params.logprobs))
                ids.append(token)
                if token == eos and len(ids) > len(forced):
                    break
                if params.stop and len(ids) > len(forced) and _stop_in(self.tokenizer.decode(ids), params.stop):
                    break
                inputs = torch.tensor([[token]])
        return ids, logprobs

    def _position(self, raw, token: int, top: int | None) -> dict[int, Logprob]:
        import torch

        k = raw.shape[0] if top == -1 else int(top or 0)
        entries = {token: Logprob(float(raw[token]), int((raw > raw[token]).sum()) + 1, self.tokenizer.decode([token]))}
        if k:
            values, indices = torch.topk(raw, min(k, raw.shape[0]))
            for rank, (value, index) in enumerate(zip(values.tolist(), indices.tolist()), 1):
                entries.setdefault(index, Logprob(value, rank, self.tokenizer.decode([index])))
        return entries

    def _completion(self, index, ids, logprobs, params, budget) -> CompletionOutput:
        eos = self.tokenizer.eos_token_id
        text = self.tokenizer.decode(ids, skip_special_tokens=params.skip_special_tokens)
        finish, reason = "length", None
        if ids and ids[-1] == eos:
            finish = "stop"
        hit = _stop_in(text, params.stop)
        if hit is not None:
            text, finish, reason = text[: text.find(hit)], "stop", hit
        wanted = params.logprobs is not None
        cumulative = sum(p[t].logprob for p, t in zip(logprobs, ids))
        return CompletionOutput(index, text, ids, cumulative if wanted else None, logprobs if wanted else None,
                                finish, reason)  # fmt: skip


def _sample(raw, temperature: float, top_p: float, generator) -> int:
    import torch

    probs = torch.softmax(raw / temperature, dim=-1)
    if top_p < 1.0:
        ordered, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(ordered, dim=-1) - ordered < top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], ordered[keep])
    return int(torch.multinomial(probs / probs.sum(), 1, generator=generator))


def _stop_in(text: str, stop: Sequence[str]) -> str | None:
    """The stop string that occurs first in `text`, if any."""
    found = [(text.find(s), s) for s in stop if s and s in text]
    return min(found)[1] if found else None


def _standin_meta(model: str) -> dict[str, Any]:
    """What the rehearsal recorded about the real model a folder stands in for (`hoprag_standin.json`)."""
    folder = Path(model)
    if not folder.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache

            found = try_to_load_from_cache(model, STANDIN_FILE)
        except Exception:  # noqa: BLE001 - not a hub id: no record
            found = None
        return json.loads(Path(found).read_text(encoding="utf-8")) if isinstance(found, str) else {}
    file = folder / STANDIN_FILE
    return json.loads(file.read_text(encoding="utf-8")) if file.is_file() else {}
