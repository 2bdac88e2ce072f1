"""Standard RAG baseline: retrieve the top k passages for the question, one prompt with them, one answer."""

from __future__ import annotations

from collections.abc import Sequence

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, ContextPrompt, PassageFormat
from hoprag.methods.base import Method, MethodOutput
from hoprag.retrieval.retrievers import Retriever


class StandardRAG(Method):
    """`prompt`'s user template has {question} and {passages} fields; passages are numbered from 1 and
    written with `passage_template` ({rank}, {title}, {text}), separated by blank lines. Over the LLM's
    input budget the lowest-ranked passages are dropped first (`hoprag.llm.prompts`)."""

    name = "standard_rag"

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        prompt: ChatPrompt,
        k: int = 5,
        passage_template: str = "[{rank}] {title}\n{text}",
        **kwargs,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.prompt = prompt
        self.k = k
        self.passages = PassageFormat(passage_template)

    def context_prompt(self, example: QAExample, passages: Sequence[Passage]) -> ContextPrompt:
        return self.prompt.with_context("passages", self.passages.context(passages), question=example.question)

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        hits = self.retriever.search([ex.question for ex in examples], self.k, costs=costs)
        retrieved = [[h.passage for h in question] for question in hits]
        prompts = [self.context_prompt(ex, passages) for ex, passages in zip(examples, retrieved)]
        outputs = self._final_answers(prompts, costs, retrieved)
        for out, question in zip(outputs, hits):
            out.trace["scores"] = [round(h.score, 4) for h in question]
        return outputs
