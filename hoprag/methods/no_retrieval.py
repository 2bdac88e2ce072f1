"""Closed-book baseline: the question alone, one prompt, one answer (what the LLM knows without retrieval)."""

from __future__ import annotations

from collections.abc import Sequence

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt
from hoprag.methods.base import Method, MethodOutput


class NoRetrieval(Method):
    """`prompt` is a `ChatPrompt` whose user template has a {question} field."""

    name = "no_retrieval"

    needs_retriever = False

    def __init__(self, llm: LLM, prompt: ChatPrompt, **kwargs) -> None:
        super().__init__(llm, **kwargs)
        self.prompt = prompt

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        prompts = [self.prompt(question=ex.question) for ex in examples]
        return self._final_answers(prompts, costs, [[] for _ in examples])
