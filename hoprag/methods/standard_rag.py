"""Standard RAG baseline: retrieve the top k passages for the question, one prompt with them, one answer."""

from __future__ import annotations

from collections.abc import Sequence

from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.cost import Cost
from hoprag.llm.base import LLM
from hoprag.methods.base import ChatPrompt, Method, MethodOutput, register
from hoprag.retrieval.retrievers import Retriever


@register("standard_rag")
class StandardRAG(Method):
    """`prompt`'s user template has {question} and {passages} fields; passages are numbered from 1 and
    written with `passage_template` ({rank}, {title}, {text}), separated by blank lines."""

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
        self.passage_template = passage_template

    def format_passages(self, passages: Sequence[Passage]) -> str:
        return "\n\n".join(
            self.passage_template.format(rank=i, title=p.title, text=p.text) for i, p in enumerate(passages, 1)
        )

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        hits = self.retriever.search([ex.question for ex in examples], self.k, costs=costs)
        retrieved = [[h.passage for h in question] for question in hits]
        prompts = [
            self.prompt(question=ex.question, passages=self.format_passages(passages))
            for ex, passages in zip(examples, retrieved)
        ]
        outputs = self._final_answers(prompts, costs, retrieved)
        for out, question in zip(outputs, hits):
            out.trace["scores"] = [round(h.score, 4) for h in question]
        return outputs
