"""One interface for every LLM backend: batched generation with per-token log-probs and token counts.

Methods only see `LLM.generate`: a batch of prompts (plain strings, or chat messages rendered with the
model's chat template; when the last message is the assistant's, the model continues it: an assistant
prefill, see `continues_reply`), sampling options, and optionally one `Cost` record per prompt to charge. Each
prompt gets `n` `Generation`s carrying the text, the generated tokens with their log-probs (from the raw
model distribution, which confidence-based methods such as PruneRAG need) and token counts. A reasoning
model's thinking is split off here, once for every backend (`hoprag.llm.reasoning`): methods see the answer
content only.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from hoprag.cost import Cost, charge_evenly
from hoprag.llm.cache import GenerationCache, request_key
from hoprag.llm.prompts import (
    ContextPrompt,
    Fit,
    Message,
    Prompt,
    PromptTooLongError,
    chat_template_flags,
    continues_reply,
    fit_prompt,
    is_prompt_batch,
)
from hoprag.llm.reasoning import content_start, limit_content, split_reasoning
from hoprag.llm.tokenizer import count_texts, prompt_ids
from hoprag.llm.types import Generation, SamplingParams, Usage

__all__ = ["LLM", "Message", "Prompt", "chat_template_flags", "continues_reply", "covering_tokens", "cut_at_stop"]


class LLM:
    """Base class: subclasses implement `_generate` for a batch of already-fitted prompts, and say how
    they count tokens (`count_tokens`, `prompt_token_count`)."""

    name: str = "llm"
    # whether `SamplingParams.candidates` and `keep_special_tokens` are honoured: backends that read the
    # model's own distribution and tokens (in process); a served model's API does not expose them
    candidate_logprobs: bool = False

    def __init__(
        self,
        default: SamplingParams | Mapping[str, Any] | None = None,
        generation_cache: str | None = None,
        max_input_tokens: int | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        reasoning_budget: int = 0,
    ) -> None:
        if max_input_tokens is not None and max_input_tokens < 1:
            raise ValueError(f"max_input_tokens must be positive or null, got {max_input_tokens}")
        if reasoning_budget < 0:
            raise ValueError(f"reasoning_budget must be non-negative, got {reasoning_budget}")
        self.default = default if isinstance(default, SamplingParams) else SamplingParams(**dict(default or {}))
        self.max_input_tokens = max_input_tokens
        # passed to the chat template (e.g. {enable_thinking: false}); {} keeps the template's own defaults
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        # tokens a reasoning model may think beyond every request's max_new_tokens, which then limits the
        # content alone (hoprag.llm.reasoning.limit_content); 0: the thinking counts against the limit
        self.reasoning_budget = reasoning_budget
        self.usage = Usage()
        self.cache = None
        if generation_cache:  # greedy generations on disk, keyed by the full request (hoprag.llm.cache)
            self.cache = GenerationCache(generation_cache)

    def missing_capabilities(self, needs: Iterable[str]) -> list[str]:
        """Which of `needs` ("logprobs", "n", "prefill", "candidate_logprobs") this backend cannot provide:
        in process, only candidate log-probs where the backend lacks them; a served model's backend asks its
        server (see `OpenAICompatLLM.capabilities`)."""
        return [need for need in needs if need == "candidate_logprobs" and not self.candidate_logprobs]

    def require_top_logprobs(self, n: int) -> None:
        """A method that reads candidate tokens (`SamplingParams.candidates`) among the top `n` log-probs per
        position says so before its first call: a backend that returns only so many (vLLM's engine
        `max_logprobs`) starts with at least `n`, or refuses; in process with transformers every candidate is
        scored from the whole distribution, so nothing is needed."""

    def identity(self) -> str:
        """What, besides the prompt and the sampling parameters, decides the output: the generation
        cache's key. Backends name every such setting in their repr."""
        return repr(self)

    # -- token counting: with the model's own tokenizer, which a backend provides ------------------------

    chat_template: bool = True  # plain-string prompts are read as one user message of the chat template

    @property
    def tokenizer(self) -> Any:
        raise NotImplementedError(f"{type(self).__name__} has no tokenizer to count tokens with")

    @property
    def token_counting(self) -> str:
        """How this backend counts tokens (recorded with every run), e.g. "tokenizer:<model>"."""
        return f"tokenizer:{self.name}"

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens of each text on its own (a passage as a prompt renders it), without special tokens."""
        return count_texts(self.tokenizer, texts)

    def prompt_token_count(self, prompt: Prompt) -> int:
        """Tokens of the whole prompt as the model reads it (chat template included)."""
        return len(prompt_ids(self.tokenizer, prompt, self.chat_template, self.chat_template_kwargs))

    def reasoning_opened(self, prompt: Prompt) -> bool:
        """Whether the prompt as the model reads it leaves a reasoning block open, so the reply starts
        inside it (`hoprag.llm.reasoning`); backends that render the chat template themselves can tell."""
        return False

    def fit(self, prompt: Prompt | ContextPrompt) -> Fit:
        """The prompt to send: a `ContextPrompt` shortened to `max_input_tokens` by the rule of
        `hoprag.llm.prompts`; a plain prompt as it is (counted and refused when over the budget)."""
        limit = self.max_input_tokens
        if isinstance(prompt, ContextPrompt):
            if limit is None:
                return Fit(0, 0, prompt=prompt.render())
            return fit_prompt(prompt, self.prompt_token_count, limit)
        if limit is not None:
            tokens = self.prompt_token_count(prompt)
            if tokens > limit:
                raise PromptTooLongError(
                    f"a prompt of {tokens} tokens exceeds {self.name}'s max_input_tokens ({limit}) and has no "
                    "marked context to shorten: build it as a ContextPrompt (hoprag.llm.prompts)", tokens, limit
                )
        return Fit(0, 0, prompt=prompt)

    # -- generation ---------------------------------------------------------------------------------

    def generate(
        self,
        prompts: Sequence[Prompt | ContextPrompt],
        params: SamplingParams | None = None,
        costs: Sequence[Cost | None] | None = None,
        stage: str = "llm",
        seeds: Sequence[int] | None = None,
        **overrides: Any,
    ) -> list[list[Generation]]:
        """`n` generations per prompt, in prompt order. `overrides` replace fields of `params` (or of the
        backend's default), e.g. `generate(prompts, max_new_tokens=16, stop=["\\n"])`. `seeds` gives
        each prompt its own sampling seed (replacing `params.seed`), so a prompt's samples do not depend
        on which other prompts share its batch. `ContextPrompt`s are fitted to `max_input_tokens` first
        (see `fit`) and what was cut is charged to their cost records."""
        if not is_prompt_batch(prompts):
            raise TypeError("generate() takes a batch of prompts: wrap a single prompt in a list")
        if costs is not None and len(costs) != len(prompts):
            raise ValueError(f"{len(costs)} cost records for {len(prompts)} prompts")
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        params = replace(params or self.default, **overrides)
        if (params.candidates or params.keep_special_tokens) and not self.candidate_logprobs:
            raise ValueError(
                f"{self.name} ({type(self).__name__}) cannot score candidate tokens or keep special tokens "
                "(SamplingParams.candidates / keep_special_tokens): use an in-process backend (llm=hf or llm=vllm)"
            )
        if not prompts:
            return []
        fits = [self.fit(p) for p in prompts]
        sent = [f.prompt for f in fits]
        seeds = None if seeds is None or params.greedy else [int(s) for s in seeds]
        asked = replace(params, max_new_tokens=params.max_new_tokens + self.reasoning_budget)
        started = time.perf_counter()
        if self.cache is not None and params.greedy:
            outputs, cached = self._generate_cached(sent, asked)
        else:
            outputs, cached = self._generate_split(sent, asked, seeds), [False] * len(prompts)
        if self.reasoning_budget:
            outputs = [[limit_content(g, params.max_new_tokens) for g in samples] for samples in outputs]
        seconds = time.perf_counter() - started
        self._account(outputs, costs, seconds, stage, cached, fits)
        return outputs

    def _generate_cached(self, prompts: list[Prompt], params: SamplingParams) -> tuple[list[list[Generation]], list[bool]]:
        identity = self.identity()
        keys = [request_key(identity, p, params) for p in prompts]
        found = self.cache.get(keys)
        todo = list(dict.fromkeys(k for k in keys if k not in found))
        if todo:
            first = {k: i for i, k in reversed(list(enumerate(keys)))}
            fresh = dict(zip(todo, self._generate_split([prompts[first[k]] for k in todo], params, None)))
            self.cache.put(fresh)
            found |= fresh
        return [found[k] for k in keys], [k not in todo for k in keys]

    def _generate_split(
        self, prompts: list[Prompt], params: SamplingParams, seeds: list[int] | None
    ) -> list[list[Generation]]:
        """The backend's generations with their reasoning split off (what the cache stores, so a cached reply
        reads back as a fresh one); whether a prompt opened the block is asked only of a reply without tags."""
        outputs = self._generate(prompts, params, seeds)
        split = []
        for prompt, samples in zip(prompts, outputs):
            opened = any(content_start(g.text) == 0 for g in samples) and self.reasoning_opened(prompt)
            split.append([split_reasoning(g, opened) for g in samples])
        return split

    def _account(
        self,
        outputs: list[list[Generation]],
        costs: Sequence[Cost | None] | None,
        seconds: float,
        stage: str,
        cached: Sequence[bool],
        fits: Sequence[Fit],
    ) -> None:
        """Tokens are charged as generated even on a cache hit (they are the method's cost, whatever
        served them); the hit is counted, and the seconds are what the call really took. A shortened
        prompt, a sample without log-probs, a reasoning model's thinking tokens and a reply cut inside its
        thinking are counted too."""
        self.usage.calls += 1
        self.usage.prompts += len(outputs)
        self.usage.seconds += seconds
        self.usage.cache_hits += sum(cached)
        share = charge_evenly(costs, seconds)
        for i, samples in enumerate(outputs):
            prompt_tokens = samples[0].prompt_tokens if samples else 0
            completion_tokens = sum(g.completion_tokens for g in samples)
            self.usage.prompt_tokens += prompt_tokens
            self.usage.completion_tokens += completion_tokens
            if costs is not None and costs[i] is not None:
                cost, fit = costs[i], fits[i]
                cost.add_llm(prompt_tokens, completion_tokens, share, stage, cached=cached[i])
                cost.missing_logprobs += sum(g.logprobs is None for g in samples)
                cost.add_reasoning(sum(g.reasoning_tokens for g in samples), sum(g.reasoning_cut for g in samples))
                if fit.truncated:
                    cost.add_truncation(fit.tokens - fit.sent_tokens, fit.units_dropped, fit.cut)

    def _generate(
        self, prompts: list[Prompt], params: SamplingParams, seeds: list[int] | None = None
    ) -> list[list[Generation]]:
        """`n` generations per prompt; `seeds` (sampling only) holds one seed per prompt, else `params.seed`."""
        raise NotImplementedError


def cut_at_stop(text: str, stop: Sequence[str], opened: bool = False) -> tuple[str, bool]:
    """`text` up to the earliest stop string, and whether one was found. Stop strings are looked for in the
    content only, after a reasoning block (none while the block is open; `opened`: the prompt opened it)."""
    start = content_start(text, opened)
    if start is None:
        return text, False
    cut = min((i for i in (text.find(s, start) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def covering_tokens(tokens: list[str], length: int) -> int:
    """How many leading tokens it takes to cover `length` characters of text (a straddling token counts)."""
    if length == 0:
        return 0
    covered = 0
    for k, token in enumerate(tokens, 1):
        covered += len(token)
        if covered >= length:
            return k
    return len(tokens)
