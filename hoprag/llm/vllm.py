"""vLLM in-process (the optional `hoprag[vllm]` extra, for GPU machines).

`vllm` is imported by the constructor only, so hoprag works without it; the engine starts on the first
`generate` and is shared per process by every `VLLMLLM` with the same engine arguments (an engine holds
the GPU memory it reserved). Prompts are rendered with the model's chat template
(`get_tokenizer().apply_chat_template`) and passed as token ids, so no second BOS is added; a final
assistant message is continued (`continue_final_message`, an assistant prefill). Sampling
maps one to one (`n`, `temperature`, `top_p`, `max_tokens`, `stop`, `seed`), with no model-specific
extras; `logprobs=0` asks for the chosen token's log-prob only, which vLLM computes from the raw model
distribution by default (`logprobs_mode="raw_logprobs"`, vLLM >= 0.10.2; settable via `engine_kwargs`).
Candidate tokens (`SamplingParams.candidates`) are read from the top `candidate_top_logprobs` log-probs vLLM
returns per position; a candidate outside them is left out of `Generation.candidate_logprobs`, not made up.
vLLM refuses a request for more than its engine's `max_logprobs` (20 by default), so the engine starts with
at least `candidate_top_logprobs`, raised further by a method that needs more (`require_top_logprobs`, e.g.
Self-RAG's 5,000); a need beyond an engine already started, or beyond an explicit
`engine_kwargs.max_logprobs`, is refused before any request, naming both numbers.
`chat_template_kwargs` go to the chat template (e.g. `{enable_thinking: false}`). vLLM looks for stop
strings in the whole reply, a reasoning model's thinking included: one met while thinking ends the reply
there, counted as `reasoning_cut` (the in-process `HFLLM` waits for the thinking to close).
A peft LoRA `adapter` folder is served as vLLM serves adapters: the engine starts with `enable_lora` (and
`max_lora_rank` = the adapter's rank), and every request carries a `LoRARequest` whose id is taken from the
adapter's content hash, which `identity()` also holds (tuned and base answers are cached apart).
"""

from __future__ import annotations

import gc
import json
import logging
import threading
from collections.abc import Hashable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from hoprag.llm.base import LLM, Prompt, covering_tokens, cut_at_stop
from hoprag.llm.hf_loading import adapter_digest
from hoprag.llm.reasoning import opens_block
from hoprag.llm.types import Generation, SamplingParams
from hoprag.utils.bundled import resolve_model_ref

log = logging.getLogger(__name__)
_ENGINES: dict[Hashable, Any] = {}
VLLM_MAX_LOGPROBS = 20  # vLLM's default engine `max_logprobs`
_LOCK = threading.Lock()


class VLLMLLM(LLM):
    """A model served by an in-process vLLM engine."""

    candidate_logprobs = True

    def __init__(
        self,
        model: str,
        name: str | None = None,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        chat_template: bool = True,
        logprobs: bool = True,
        seed: int = 0,
        trust_remote_code: bool = False,
        engine_kwargs: Mapping[str, Any] | None = None,
        default: SamplingParams | Mapping[str, Any] | None = None,
        generation_cache: str | None = None,
        max_input_tokens: int | None = None,
        adapter: str | None = None,
        candidate_top_logprobs: int = 20,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        reasoning_budget: int = 0,
    ) -> None:
        super().__init__(default, generation_cache, max_input_tokens, chat_template_kwargs, reasoning_budget)
        if candidate_top_logprobs < 1:
            raise ValueError(f"candidate_top_logprobs must be positive, got {candidate_top_logprobs}")
        self.candidate_top_logprobs = candidate_top_logprobs
        try:
            import vllm
        except ImportError as err:
            raise ImportError(
                "VLLMLLM needs vLLM, an optional extra for GPU machines: make GPU=1 install, or "
                "pip install -c constraints-gpu.txt -e '.[vllm,faiss-gpu]' "
                "(or use llm=hf for transformers, or llm=openai for a running vLLM server)"
            ) from err
        self._vllm = vllm
        self.model = model
        self.adapter = adapter
        self.name = name or (f"{model}+{Path(adapter).name}" if adapter else model)
        self.chat_template = chat_template
        self.logprobs = logprobs
        self.lora_request: Any = None
        self.adapter_sha: str | None = None
        lora_args: dict[str, Any] = {}
        if adapter:
            from vllm.lora.request import LoRARequest

            path = resolve_model_ref(adapter)
            self.adapter_sha = adapter_digest(path)
            rank = json.loads((Path(path) / "adapter_config.json").read_text())["r"]
            lora_args = {"enable_lora": True, "max_lora_rank": rank}
            self.lora_request = LoRARequest(self.adapter_sha, int(self.adapter_sha[:7], 16) + 1, path)
        self.engine_args: dict[str, Any] = {
            "model": resolve_model_ref(model),
            "dtype": dtype,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed,
            "trust_remote_code": trust_remote_code,
            **({"max_model_len": max_model_len} if max_model_len else {}),
            **lora_args,
            **dict(engine_kwargs or {}),
        }
        self._fixed_max_logprobs = "max_logprobs" in self.engine_args  # set by the config: never raised
        self.require_top_logprobs(candidate_top_logprobs)

    @property
    def max_logprobs(self) -> int:
        """The engine's limit on the top log-probs a request may ask for (vLLM's `max_logprobs`, 20 by
        default; -1 means the whole vocabulary)."""
        return int(self.engine_args.get("max_logprobs", VLLM_MAX_LOGPROBS))

    def require_top_logprobs(self, n: int) -> None:
        """Candidate tokens are to be read among the top `n` log-probs per position: the engine starts with
        `max_logprobs` >= n and candidate requests ask for n; refused when the engine already runs with less,
        or `engine_kwargs.max_logprobs` says less."""
        limit = self.max_logprobs
        if limit != -1 and n > limit and (self._fixed_max_logprobs or self._started):
            why = "engine_kwargs.max_logprobs" if self._fixed_max_logprobs else "its running engine's max_logprobs"
            raise ValueError(
                f"{self.name}: candidate tokens are to be read among the top {n} log-probs per position, but "
                f"vLLM refuses more than {why} = {limit}: raise llm.engine_kwargs.max_logprobs to at least {n}"
            )
        if limit != -1 and n > limit:
            self.engine_args["max_logprobs"] = n
        self.candidate_top_logprobs = max(self.candidate_top_logprobs, n)

    @property
    def _started(self) -> bool:
        return self._engine_key() in _ENGINES

    def _engine_key(self) -> Hashable:
        return tuple(sorted((k, repr(v)) for k, v in self.engine_args.items()))

    @property
    def engine(self) -> Any:
        """The process-wide `vllm.LLM` for these engine arguments (started on first use)."""
        key = self._engine_key()
        with _LOCK:
            if key not in _ENGINES:
                log.info("starting a vLLM engine for %s (gpu_memory_utilization %s)", self.model,
                         self.engine_args["gpu_memory_utilization"])  # fmt: skip
                _ENGINES[key] = self._vllm.LLM(**self.engine_args)
            return _ENGINES[key]

    @property
    def tokenizer(self) -> Any:
        """The engine's tokenizer once it runs; before, the model's tokenizer alone (no GPU memory taken)."""
        key = self._engine_key()
        if key in _ENGINES:
            return _ENGINES[key].get_tokenizer()
        from hoprag.llm.tokenizer import load_tokenizer

        return load_tokenizer(self.engine_args["model"], trust_remote_code=self.engine_args["trust_remote_code"])

    def sampling_params(self, params: SamplingParams) -> Any:
        """The `vllm.SamplingParams` for ours."""
        return self._vllm.SamplingParams(
            n=params.n,
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=params.max_new_tokens,
            stop=list(params.stop) or None,
            seed=params.seed,
            logprobs=self.candidate_top_logprobs if params.candidates else 0 if self.logprobs else None,
            **({"skip_special_tokens": False} if params.keep_special_tokens else {}),
        )

    def engine_prompt(self, prompt: Prompt) -> dict[str, Any]:
        """What vLLM is given: the chat-templated token ids, or the raw string when chat_template is off."""
        if isinstance(prompt, str) and not self.chat_template:
            return {"prompt": prompt}
        return {"prompt_token_ids": self._prompt_ids(prompt, self.engine.get_tokenizer())}

    def _prompt_ids(self, prompt: Prompt, tokenizer: Any) -> list[int]:
        from hoprag.llm.tokenizer import prompt_ids

        return prompt_ids(tokenizer, prompt, self.chat_template, self.chat_template_kwargs)

    def reasoning_opened(self, prompt: Prompt) -> bool:
        if isinstance(prompt, str) and not self.chat_template:
            return False
        from hoprag.llm.tokenizer import render_prompt

        return opens_block(render_prompt(self.tokenizer, prompt, self.chat_template, self.chat_template_kwargs)[0])

    def _generate(
        self, prompts: list[Prompt], params: SamplingParams, seeds: list[int] | None = None
    ) -> list[list[Generation]]:
        inputs = [self.engine_prompt(p) for p in prompts]
        if seeds is None:
            sampling: Any = self.sampling_params(params)
        else:  # one SamplingParams per prompt: vLLM seeds each request's own generator
            sampling = [self.sampling_params(replace(params, seed=s)) for s in seeds]
        lora = {"lora_request": self.lora_request} if self.lora_request is not None else {}
        outputs = self.engine.generate(inputs, sampling, use_tqdm=False, **lora)
        return [self.convert(out, params, self.reasoning_opened(p)) for out, p in zip(outputs, prompts)]

    def convert(self, output: Any, params: SamplingParams, opened: bool = False) -> list[Generation]:
        """Our Generations from one `vllm.RequestOutput`, the reasoning block still in the text (`opened`: the
        prompt opened it; `LLM.generate` splits it off)."""
        prompt_tokens = len(output.prompt_token_ids or ())
        gens = []
        for completion in sorted(output.outputs, key=lambda c: c.index):
            ids = list(completion.token_ids)
            kept, stopped = cut_at_stop(completion.text, params.stop, opened)
            tokens, logprobs, candidates = None, None, None
            if completion.logprobs is not None:
                entries = [completion.logprobs[i][t] for i, t in enumerate(ids)]
                tokens = [self._token_text(e, t) for e, t in zip(entries, ids)]
                logprobs = [float(e.logprob) for e in entries]
                candidates = self._candidates(completion.logprobs, params.candidates)
            else:
                tokens = [self._token_text(None, t) for t in ids]
            keep = covering_tokens(tokens, len(kept))
            finish = "length" if completion.finish_reason == "length" and not stopped else "stop"
            gens.append(
                Generation(
                    text=kept,
                    tokens=tuple(tokens[:keep]),
                    logprobs=None if logprobs is None else tuple(logprobs[:keep]),
                    prompt_tokens=prompt_tokens,
                    completion_tokens=len(ids) - _ended_at_eos(completion),
                    finish_reason=finish,
                    candidate_logprobs=None if candidates is None else tuple(candidates[:keep]),
                )
            )
        return gens

    def _candidates(self, positions: list[dict[int, Any]], names: tuple[str, ...]) -> list[dict[str, float]] | None:
        """Per position, the log-probs of the candidates (one vocabulary token each) among those vLLM returned."""
        if not names:
            return None
        ids = {c: self.engine.get_tokenizer().convert_tokens_to_ids(c) for c in names}
        return [{c: float(top[i].logprob) for c, i in ids.items() if i in top} for top in positions]

    def _token_text(self, entry: Any, token_id: int) -> str:
        decoded = getattr(entry, "decoded_token", None)
        if decoded is not None:
            return decoded
        return self.engine.get_tokenizer().decode([token_id])

    def __repr__(self) -> str:
        adapter = f", adapter={self.adapter!r}" if self.adapter else ""
        return f"VLLMLLM(name={self.name!r}, model={self.model!r}{adapter})"

    def identity(self) -> str:
        tuned = f" adapter_sha={self.adapter_sha}" if self.adapter else ""
        template = f" chat_template_kwargs={self.chat_template_kwargs!r}" if self.chat_template_kwargs else ""
        return f"{self!r}{tuned} dtype={self.engine_args['dtype']!r} chat_template={self.chat_template}{template}"


def release_engines() -> list[str]:
    """Shut down every in-process engine of this process and give its GPU memory back, as vLLM's own tests do
    between models (`del` + `cleanup_dist_env_and_memory`): an engine lives as long as the job that started it,
    so the next job of a multirun (another model, or Self-RAG's checkpoint) finds the GPU free. The models
    released, each logged."""
    with _LOCK:
        engines = list(_ENGINES.items())
        _ENGINES.clear()
    if not engines:
        return []
    names = [dict(key).get("model", "?").strip("'") for key, _ in engines]
    for _, engine in engines:
        shutdown = getattr(getattr(engine, "llm_engine", None), "shutdown", None)
        if callable(shutdown):  # the V1 engine's background process
            shutdown()
    del engines, engine
    gc.collect()
    try:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory
    except ImportError:  # a release without it: the collection above is what is left to do
        pass
    else:
        cleanup_dist_env_and_memory()
    for name in names:
        log.info("released the vLLM engine of %s and its GPU memory", name)
    return names


def _ended_at_eos(completion: Any) -> int:
    """1 when vLLM stopped at the end-of-sequence token (finish "stop" without a stop string or stop id),
    which its `token_ids` hold but `Generation.completion_tokens` does not count; else 0."""
    ended = completion.finish_reason == "stop" and getattr(completion, "stop_reason", None) is None
    return int(ended and bool(completion.token_ids))
