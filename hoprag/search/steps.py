"""One step of a level-by-level search, for every question of a batch at once.

Tree searches (PruneRAG's rounds, TreeRare's levels) grow many nodes per question; a step takes every
pending node of every question in the batch and makes one batched LLM call and one batched retrieval for
them, charging each node's share to its own question's cost record. `one_by_one=True` makes one call per
node instead: the same algorithm, kept to measure what batching buys (the `bench_*` scripts).

Every tree search also has a declared per-question ceiling (TreeRare's and PruneRAG's `max_nodes`, MCTS's
`max_llm_calls`); a question that reaches it stops growing and is recorded by `capped`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.llm.base import LLM, Prompt
from hoprag.llm.prompts import ContextPrompt
from hoprag.llm.types import Generation
from hoprag.retrieval.retrievers import Hit, Retriever

log = logging.getLogger(__name__)


def one_by_one(batching: str) -> bool:
    """A baseline's `batching` setting: "step" (the default: one LLM call and one search per step for every
    active question of the batch) or "question" (one call per prompt and per query, for the benchmarks)."""
    if batching not in ("step", "question"):
        raise ValueError(f"method.batching must be 'step' or 'question', got {batching!r}")
    return batching == "question"


def llm_step(
    llm: LLM,
    prompts: Sequence[Prompt | ContextPrompt],
    costs: Sequence[Cost | None],
    stage: str,
    one_by_one: bool = False,
    **params: Any,
) -> list[Generation]:
    """One generation per prompt (the first sample): one batched call, or one call per prompt."""
    return [samples[0] for samples in llm_samples(llm, prompts, costs, stage, one_by_one, **params)]


def llm_samples(
    llm: LLM,
    prompts: Sequence[Prompt | ContextPrompt],
    costs: Sequence[Cost | None],
    stage: str,
    one_by_one: bool = False,
    seeds: Sequence[int] | None = None,
    **params: Any,
) -> list[list[Generation]]:
    """Every sample per prompt (`n=` in `params`, each prompt with its own seed from `seeds`): one batched
    call, or one call per prompt."""
    if not one_by_one:
        return llm.generate(prompts, costs=costs, stage=stage, **params, **({} if seeds is None else {"seeds": seeds}))
    each = [{}] * len(prompts) if seeds is None else [{"seeds": [s]} for s in seeds]
    return [llm.generate([p], costs=[c], stage=stage, **params, **s)[0] for p, c, s in zip(prompts, costs, each)]


def retrieval_step(
    retriever: Retriever,
    queries: Sequence[str],
    k: int,
    costs: Sequence[Cost | None],
    stage: str = "retrieval",
    one_by_one: bool = False,
) -> list[list[Hit]]:
    """The top `k` hits per query: one batched search, or one search per query."""
    if not queries:
        return []
    if not one_by_one:
        return retriever.search(list(queries), k, costs=list(costs), stage=stage)
    return [retriever.search([q], k, costs=[c], stage=stage)[0] for q, c in zip(queries, costs)]


def capped(question: str, limit: str, value: int, **where: Any) -> dict[str, Any]:
    """Log that `question`'s search stopped growing at its ceiling `limit` = `value`, and return the record its
    trace keeps under "capped" (`where`: what was left out). Its stats then hold `capped: 1`, which
    metrics.json averages into `method/capped`, the fraction of questions capped."""
    detail = ", ".join(f"{key}={shown!r}" for key, shown in where.items())
    log.warning(
        "question %r reached method ceiling %s=%d and stopped growing (%s)", question[:80], limit, value, detail
    )
    return {"limit": limit, "value": value, **where}
