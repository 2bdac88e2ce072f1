"""Iterative chain baseline (Iter-RetGen style): retrieve, generate, retrieve again with the generation.

    python eval.py +experiment=iter_retgen data=hotpotqa [method.rounds=3]   # scored with PruneRAG's passage rule

Round 1 retrieves with the question; round t > 1 with the question followed by round t-1's output. Each
round answers from the passages it retrieved; the last round's output is the answer. It shares the LLM,
retriever, answer extraction and cost accounting with PruneRAG, so PruneRAG's speed claim (fewer, batched
calls) can be measured against a multi-retrieval method on the same components. Rounds are batched across
the questions of a batch, as every hoprag method is; RN = `rounds`.
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
from hoprag.retrieval.retrievers import Retriever


class IterRetGen(StandardRAG):
    """`prompt` and `passage_template` as for standard RAG; `rounds` retrieval-generation rounds."""

    name = "iter_retgen"

    def __init__(
        self, llm: LLM, retriever: Retriever, prompt: ChatPrompt, rounds: int = 3, k: int = 5, **kwargs: Any
    ) -> None:
        super().__init__(llm, retriever, prompt, k=k, **kwargs)
        self.check_rounds(rounds)
        self.rounds = rounds

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """`rounds`, as the constructor checks it."""
        cls.check_rounds(setting(cls, settings, "rounds"))

    @staticmethod
    def check_rounds(rounds: int) -> None:
        if rounds < 1:
            raise ValueError(f"rounds must be positive, got {rounds}")

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        queries = [ex.question for ex in examples]
        read: list[dict[str, Passage]] = [{} for _ in examples]
        steps: list[list[dict[str, Any]]] = [[] for _ in examples]
        for t in range(1, self.rounds + 1):
            hits = self.retriever.search(queries, self.k, costs=costs)
            retrieved = [[h.passage for h in question] for question in hits]
            prompts = [self.context_prompt(ex, passages) for ex, passages in zip(examples, retrieved)]
            if t == self.rounds:
                outputs = self._final_answers(prompts, costs, retrieved)
                texts = [o.trace["output"] for o in outputs]
            else:
                generations = self.llm.generate(prompts, costs=costs, stage="generation", **self.generation)
                texts = [g[0].text for g in generations]
            for i, (passages, text) in enumerate(zip(retrieved, texts)):
                for p in passages:
                    read[i].setdefault(p.id, p)
                steps[i].append({"query": queries[i], "passages": [p.id for p in passages], "output": text})
            queries = [f"{ex.question} {text.strip()}".strip() for ex, text in zip(examples, texts)]
        for out, passages, trail in zip(outputs, read, steps):
            out.retrieved = list(passages.values())
            out.trace["rounds"] = trail
            out.stats = {"retrieval_calls": float(self.rounds), "rounds": float(self.rounds)}
        return outputs
