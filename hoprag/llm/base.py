"""One interface for every LLM backend: batched generation with per-token log-probs and token counts.

Methods only see `LLM.generate`: a batch of prompts (plain strings, or chat messages rendered with the
model's chat template), sampling options, and optionally one `Cost` record per prompt to charge. Each
prompt gets `n` `Generation`s carrying the text, the generated tokens with their log-probs (from the raw
model distribution, which confidence-based methods such as PruneRAG need) and token counts.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Union

from hoprag.evaluation.cost import Cost, charge_evenly

Message = Mapping[str, str]
Prompt = Union[str, Sequence[Message]]


@dataclass(frozen=True)
class SamplingParams:
    """Decoding options; temperature 0 means greedy. `stop` strings end a generation and are cut off."""

    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    stop: tuple[str, ...] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop))
        if self.n < 1 or self.max_new_tokens < 1:
            raise ValueError(f"n and max_new_tokens must be positive: {self}")
        if self.n > 1 and self.temperature == 0:
            raise ValueError("n > 1 samples need temperature > 0 (greedy decoding gives n identical answers)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Generation:
    """One completion. `tokens`/`logprobs` cover the generated text up to (not including) a stop string."""

    text: str
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float, ...] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"  # "stop" (EOS or a stop string) or "length"

    @property
    def mean_logprob(self) -> float | None:
        if not self.logprobs:
            return None
        return sum(self.logprobs) / len(self.logprobs)


@dataclass
class Usage:
    """Totals over the life of a backend object."""

    calls: int = 0
    prompts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class LLM:
    """Base class: subclasses implement `_generate` for a batch of already-validated prompts."""

    name: str = "llm"

    def __init__(self, default: SamplingParams | Mapping[str, Any] | None = None) -> None:
        self.default = default if isinstance(default, SamplingParams) else SamplingParams(**dict(default or {}))
        self.usage = Usage()

    def generate(
        self,
        prompts: Sequence[Prompt],
        params: SamplingParams | None = None,
        costs: Sequence[Cost | None] | None = None,
        stage: str = "llm",
        **overrides: Any,
    ) -> list[list[Generation]]:
        """`n` generations per prompt, in prompt order. `overrides` replace fields of `params` (or of the
        backend's default), e.g. `generate(prompts, max_new_tokens=16, stop=["\\n"])`."""
        if isinstance(prompts, str) or (prompts and isinstance(prompts[0], Mapping)):
            raise TypeError("generate() takes a batch of prompts: wrap a single prompt in a list")
        if costs is not None and len(costs) != len(prompts):
            raise ValueError(f"{len(costs)} cost records for {len(prompts)} prompts")
        params = replace(params or self.default, **overrides)
        if not prompts:
            return []
        started = time.perf_counter()
        outputs = self._generate(list(prompts), params)
        seconds = time.perf_counter() - started
        self._account(outputs, costs, seconds, stage)
        return outputs

    def _account(
        self, outputs: list[list[Generation]], costs: Sequence[Cost | None] | None, seconds: float, stage: str
    ) -> None:
        self.usage.calls += 1
        self.usage.prompts += len(outputs)
        self.usage.seconds += seconds
        share = charge_evenly(costs, seconds)
        for i, samples in enumerate(outputs):
            prompt_tokens = samples[0].prompt_tokens if samples else 0
            completion_tokens = sum(g.completion_tokens for g in samples)
            self.usage.prompt_tokens += prompt_tokens
            self.usage.completion_tokens += completion_tokens
            if costs is not None and costs[i] is not None:
                costs[i].add_llm(prompt_tokens, completion_tokens, share, stage)

    def _generate(self, prompts: list[Prompt], params: SamplingParams) -> list[list[Generation]]:
        raise NotImplementedError


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """`text` up to the earliest stop string, and whether one was found."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)
