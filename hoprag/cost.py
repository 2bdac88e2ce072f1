"""Per-question cost records: cost is a first-class metric of every evaluation.

Methods batch work across questions, so each LLM or retrieval call is charged to the questions whose
prompts or queries it carried: tokens exactly, wall time split evenly over the batch (an amortised,
batched latency, as PruneRAG reports it).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Cost:
    """What answering one question cost: LLM calls and tokens, retrieval calls, passages read, seconds per stage."""

    llm_calls: int = 0
    llm_cache_hits: int = 0  # of those calls, answered from the generation cache (tokens still charged)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retrieval_calls: int = 0
    empty_results: int = 0  # of those calls, searches that found no hit (e.g. no query term in the corpus)
    passage_ids: set[str] = field(default_factory=set)
    truncated_prompts: int = 0  # prompts whose context was shortened to fit the LLM's input budget
    prompt_tokens_dropped: int = 0  # tokens those prompts lost (whole prompt minus what was sent)
    context_units_dropped: int = 0  # passages (context units) dropped from them
    context_units_cut: int = 0  # passages kept but cut short (the rule's last resort)
    missing_logprobs: int = 0  # generations returned without token log-probs
    reasoning_tokens: int = 0  # of the completion tokens, a reasoning model's thinking (hoprag.llm.reasoning)
    reasoning_cut: int = 0  # generations that ended inside an unfinished reasoning block: no answer content
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add_llm(
        self, prompt_tokens: int, completion_tokens: int, seconds: float, stage: str = "llm", cached: bool = False
    ) -> None:
        self.llm_calls += 1
        self.llm_cache_hits += cached
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.seconds[stage] += seconds

    def add_truncation(self, tokens_dropped: int, units_dropped: int, cut: bool = False) -> None:
        self.truncated_prompts += 1
        self.prompt_tokens_dropped += tokens_dropped
        self.context_units_dropped += units_dropped
        self.context_units_cut += cut

    def add_reasoning(self, tokens: int, cut: int) -> None:
        self.reasoning_tokens += tokens
        self.reasoning_cut += cut

    def add_retrieval(self, passage_ids: Iterable[str], seconds: float, stage: str = "retrieval") -> None:
        self.retrieval_calls += 1
        self.passage_ids.update(passage_ids)
        self.seconds[stage] += seconds

    def to_dict(self) -> dict[str, Any]:
        return {
            "llm_calls": self.llm_calls,
            "llm_cache_hits": self.llm_cache_hits,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "retrieval_calls": self.retrieval_calls,
            "empty_results": self.empty_results,
            "passages_read": len(self.passage_ids),
            "truncated_prompts": self.truncated_prompts,
            "prompt_tokens_dropped": self.prompt_tokens_dropped,
            "context_units_dropped": self.context_units_dropped,
            "context_units_cut": self.context_units_cut,
            "missing_logprobs": self.missing_logprobs,
            "reasoning_tokens": self.reasoning_tokens,
            "reasoning_cut": self.reasoning_cut,
            "seconds": {stage: round(s, 4) for stage, s in sorted(self.seconds.items())},
        }


def charge_evenly(costs: Sequence[Cost | None] | None, seconds: float) -> float:
    """The share of a batched call's wall time charged to each of its items."""
    return seconds / len(costs) if costs else 0.0
