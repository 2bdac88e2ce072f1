"""Chain-of-thought baseline (TreeRare's CoT rows, spec/treerare.md App. B): one CoT reply per question.

    python eval.py +method=cot data=hotpotqa retriever=bm25 method.k=20     # TreeRare's: few-shot over BM25 top-20
    python eval.py +method=cot data=2wiki method.mode=zero_shot             # "Let's think step by step"
    python eval.py +method=cot data=musique method.with_documents=false     # closed-book CoT

The reply is TreeRare's `#Explanations … #FINAL: The answer is X.` form, read by `hoprag.search.cot.read_final`
(no FINAL marker: the extractor's reading of the whole reply, counted as a parse failure). With documents the
retriever's top `k` passages for the question are shown (one batched search); the prompt is one batched call
for the batch (`batching: question`: one call per question, for the benchmark).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import PassageFormat
from hoprag.llm.types import Generation
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.cot import CoTPrompt, read_final
from hoprag.search.cot_exemplars import exemplars_for
from hoprag.search.steps import llm_step, one_by_one, retrieval_step


class CoT(Method):
    """`mode` zero_shot or few_shot (3 exemplars of dataset `exemplars`), `with_documents` (the top `k`
    passages in the prompt), `task` multihop or ambiguous (long-form answers, TreeRare's ASQA form)."""

    name = "cot"

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever | None = None,
        mode: str = "few_shot",
        with_documents: bool = True,
        k: int = 20,
        exemplars: str = "hotpotqa",
        task: str = "multihop",
        batching: str = "step",
        passage_template: str = "[{rank}] {title}\n{text}",
        **kwargs: Any,
    ) -> None:
        self.needs_retriever = with_documents  # closed book: no retriever, and the runner builds none
        super().__init__(llm, retriever, **kwargs)
        self.prompt = cot_prompt(k, mode, exemplars, task, passage_template)
        self.with_documents = with_documents
        self.k = k
        self.one_by_one = one_by_one(batching)

    @classmethod
    def reads_passages(cls, settings: Mapping[str, Any]) -> bool:
        return bool(settings.get("with_documents", True))

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """The prompt's settings (mode, task, the data's exemplars) and `k`, as the constructor checks them."""
        cot_prompt(**{name: setting(cls, settings, name) for name in PROMPT_SETTINGS})

    def documents(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[list[Passage] | None]:
        """The passages each prompt shows: the top `k` for the question (one batched search), or None."""
        if not self.with_documents:
            return [None for _ in examples]
        hits = retrieval_step(self.retriever, [ex.question for ex in examples], self.k, costs, one_by_one=self.one_by_one)
        return [[h.passage for h in question] for question in hits]

    def read(self, text: str) -> tuple[str, bool]:
        return read_final(text, self.prompt.task, self.extractor)

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        shown = self.documents(examples, costs)
        prompts = [self.prompt(ex.question, passages) for ex, passages in zip(examples, shown)]
        replies = llm_step(self.llm, prompts, costs, "answer", self.one_by_one, **self.generation)
        return [self._output(reply, passages) for reply, passages in zip(replies, shown)]

    def _output(self, reply: Generation, passages: list[Passage] | None) -> MethodOutput:
        prediction, failed = self.read(reply.text)
        trace = {"output": reply.text, "passages": [p.id for p in passages or []]}
        stats = {"llm_steps": 1.0, "retrievals": float(passages is not None), "cut_at_max_tokens": cut(reply)}
        return MethodOutput(prediction, list(passages or []), trace, failed, stats)


PROMPT_SETTINGS = ("k", "mode", "exemplars", "task", "passage_template")


def cot_prompt(k: int, mode: str, exemplars: str, task: str, passage_template: str) -> CoTPrompt:
    """The CoT prompt of these settings; refuses a `k` below 1, data without exemplars for few-shot, and what
    `CoTPrompt` refuses."""
    if k < 1:
        raise ValueError(f"method.k must be positive, got {k}")
    shots = exemplars_for(exemplars) if mode == "few_shot" else ()
    return CoTPrompt(mode, shots, task, PassageFormat(passage_template))


def cut(generation: Generation) -> float:
    """1.0 when the reply stopped at `max_new_tokens` (its answer may be missing), else 0.0."""
    return float(generation.finish_reason == "length")
