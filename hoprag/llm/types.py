"""The values the LLM interface passes around: sampling options, one completion and a backend's usage totals.

They sit below both the backends (`hoprag.llm.base`) and the generation cache (`hoprag.llm.cache`), which
keys requests by `SamplingParams` and stores `Generation`s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SamplingParams:
    """Decoding options; temperature 0 means greedy. `stop` strings end a generation and are cut off.

    `candidates` asks, at every generated position, for the log-probs of these tokens of the model's
    vocabulary (`Generation.candidate_logprobs`), e.g. Self-RAG's reflection tokens; `keep_special_tokens`
    keeps special tokens (such as those added reflection tokens) in the text. Only backends that read the
    model's distribution offer them (`LLM.candidate_logprobs`)."""

    max_new_tokens: int = 64
    temperature: float = 0.0
    top_p: float = 1.0
    n: int = 1
    stop: tuple[str, ...] = ()
    seed: int | None = None
    candidates: tuple[str, ...] = ()
    keep_special_tokens: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "candidates", tuple(self.candidates))
        if self.n < 1 or self.max_new_tokens < 1:
            raise ValueError(f"n and max_new_tokens must be positive: {self}")
        if self.n > 1 and self.temperature == 0:
            raise ValueError("n > 1 samples need temperature > 0 (greedy decoding gives n identical answers)")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class Generation:
    """One completion. `tokens`/`logprobs` cover the generated text up to (not including) a stop string;
    a reasoning model's thinking is held apart (`reasoning`), so `text` is the answer content only.

    Token rule, the same in every backend: `completion_tokens` counts the tokens the model generated for
    the sample, up to the one completing a stop string, *without* the end-of-sequence token (what
    llama.cpp's and the OpenAI API's `usage` report, so in-process and served runs agree). `prompt_tokens`
    counts every prompt token processed for the prompt's samples: once per request, so a server that
    ignores `n` and is asked once per sample is charged once per sample."""

    text: str
    tokens: tuple[str, ...] = ()
    logprobs: tuple[float, ...] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"  # "stop" (EOS or a stop string) or "length"
    # with `SamplingParams.candidates`: per kept token, each candidate's log-prob at that position; a
    # candidate the backend could not score (not one token of the vocabulary, or not among a server's
    # returned top log-probs) is absent, never made up
    candidate_logprobs: tuple[dict[str, float], ...] | None = None
    # a reasoning model's thinking (hoprag.llm.reasoning), None when the reply had no reasoning block: `text`,
    # `tokens`, `logprobs` and `candidate_logprobs` then cover only the content after it, `reasoning_tokens`
    # counts the block's tokens (within `completion_tokens`), and `reasoning_cut` marks a reply that ended
    # inside an unfinished block (the token limit, a server's stop string met while thinking, or an end of
    # sequence before the closing tag): it has no content
    reasoning: str | None = None
    reasoning_tokens: int = 0
    reasoning_cut: bool = False

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
    cache_hits: int = 0  # prompts answered from the generation cache
