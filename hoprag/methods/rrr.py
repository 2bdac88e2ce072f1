"""Rewrite-Retrieve-Read baseline (Ma et al. 2023, "Query Rewriting for Retrieval-Augmented Large Language
Models"), its train-free variant: the LLM itself rewrites the question into search queries, each query is
retrieved with, and the answer is read from what they found as in standard RAG.

    python eval.py +method=rrr data=hotpotqa [retriever=bm25] [method.k=5]

The rewriter follows the paper's few-shot LLM rewriter for multi-hop questions (§3.2, appendix prompts):
"think step by step" about the knowledge needed, queries split by ';' and ended by '**' (the stop string).
A rewrite with no query in it (an empty reply) falls back to searching with the question itself, counted
per question in `stats.rewrite_fallback`. Each query's top k are merged rank by rank (every query's first
hit, then every second ...), distinct by id, so a prompt over the LLM's budget drops the lowest ranks.
`rewrite` is separate from the retrieval it feeds, so another source can take the retrieval's place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt
from hoprag.methods.base import MethodOutput, setting
from hoprag.methods.standard_rag import StandardRAG
from hoprag.retrieval.retrievers import Hit, Retriever
from hoprag.search.steps import llm_step, one_by_one, retrieval_step

END = "**"


def parse_queries(output: str, separator: str = ";", end: str = END) -> list[str]:
    """The distinct non-empty queries of a rewrite: the text before `end`, split at `separator`, with
    surrounding quotes and a leading "Query:"/"Answer:" label removed."""
    body = output.split(end, 1)[0]
    queries = []
    for part in body.split(separator):
        query = part.strip()
        for label in ("query:", "answer:"):
            if query.lower().startswith(label):
                query = query[len(label) :].strip()
        query = query.strip("\"'").strip()
        if query:
            queries.append(query)
    return list(dict.fromkeys(queries))


def merged_by_rank(hits: Sequence[Sequence[Hit]]) -> list[Passage]:
    """Every query's first hit, then every query's second ..., distinct by passage id."""
    seen: dict[str, Passage] = {}
    for rank in range(max((len(h) for h in hits), default=0)):
        for query_hits in hits:
            if rank < len(query_hits):
                seen.setdefault(query_hits[rank].passage.id, query_hits[rank].passage)
    return list(seen.values())


class RRR(StandardRAG):
    """`rewriter` (user template field {question}) writes the queries with `rewriter_generation`; `k`
    passages per query; `prompt` and `passage_template` read the answer as standard RAG."""

    name = "rrr"

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        prompt: ChatPrompt,
        rewriter: ChatPrompt,
        rewriter_generation: Mapping[str, Any] | None = None,
        batching: str = "step",
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, prompt, **kwargs)
        self.rewriter = rewriter
        self.rewriter_generation = {"max_new_tokens": 64, "stop": [END], **dict(rewriter_generation or {})}
        self.one_by_one = one_by_one(batching)

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """`batching`, as the constructor checks it."""
        super().check_settings(settings)
        one_by_one(setting(cls, settings, "batching"))

    def rewrite(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> tuple[list[str], list[list[str]]]:
        """Each question's rewrite output and its queries (empty when the rewrite has none)."""
        prompts = [self.rewriter(question=ex.question) for ex in examples]
        outputs = llm_step(self.llm, prompts, costs, "rewrite", self.one_by_one, **self.rewriter_generation)
        texts = [g.text for g in outputs]
        return texts, [parse_queries(t) for t in texts]

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        texts, rewritten = self.rewrite(examples, costs)
        queries = [qs or [ex.question] for qs, ex in zip(rewritten, examples)]  # the fallback, counted below
        owners = [i for i, qs in enumerate(queries) for _ in qs]
        flat = [q for qs in queries for q in qs]
        found = retrieval_step(self.retriever, flat, self.k, [costs[i] for i in owners], one_by_one=self.one_by_one)
        per_question: list[list[list[Hit]]] = [[] for _ in examples]
        for owner, hits in zip(owners, found):
            per_question[owner].append(hits)
        retrieved = [merged_by_rank(hits) for hits in per_question]
        prompts = [self.context_prompt(ex, passages) for ex, passages in zip(examples, retrieved)]
        outputs = self._final_answers(prompts, costs, retrieved, self.one_by_one)
        for out, text, qs, hits, own in zip(outputs, texts, queries, per_question, rewritten):
            out.trace["rewrite"] = text
            out.trace["queries"] = [{"query": q, "passages": [h.passage.id for h in hs]} for q, hs in zip(qs, hits)]
            out.stats = {"queries": float(len(qs)), "retrieval_calls": float(len(qs)),
                         "rewrite_fallback": float(not own)}  # fmt: skip
        return outputs
