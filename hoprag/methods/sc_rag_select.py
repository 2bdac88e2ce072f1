"""Self-Correcting RAG with its selector only (the paper's "w/ MMKP only" row): fuse dense and sparse
retrieval into a pool of 50, select the context exactly (MMKP), answer once from it.

With `generate=False` the LLM is never called: the prediction is empty, no answer metric is reported, and the
run scores the selection alone (gold-passage Recall@5 over the selected passages in fused order, as the paper's
Table 3), with the passages and tokens selected and the budget utilisation as `method/` metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, PassageFormat
from hoprag.methods.base import Method, MethodOutput
from hoprag.retrieval.retrievers import Retriever
from hoprag.selectors import HybridFrontEnd, Selection, Selector, TokenCounter


class SCRAGSelect(Method):
    """`front_end` (completed with the retriever), `token_counter` (completed with the LLM and the prompt's
    passage format, so token costs are the generator's tokens of each passage as prompted) and `selector`
    (completed with that counter) are given unfinished: Hydra `_partial_` children, or classes. The prompt's
    user template has {question} and {passages}; passages are written with `passage_template` ({rank},
    {title}, {text}) in fused order."""

    name = "sc_rag_select"
    completes = {"front_end": ("retriever",), "token_counter": ("llm", "passages"), "selector": ("token_counter",)}

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        front_end: Callable[..., HybridFrontEnd],
        selector: Callable[..., Selector],
        prompt: ChatPrompt,
        token_counter: Callable[..., TokenCounter] = TokenCounter,
        passage_template: str = "[{rank}] {title}\n{text}",
        generate: bool = True,
        **kwargs,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.front_end = self.complete_part("front_end", front_end, retriever=retriever)
        self.passages = PassageFormat(passage_template)
        counter = self.complete_part("token_counter", token_counter, llm=llm, passages=self.passages)
        self.selector = self.complete_part("selector", selector, token_counter=counter)
        self.prompt = prompt
        self.generates = generate

    def run_info(self) -> dict[str, Any]:
        return {**super().run_info(), "selector_token_counting": self.selector.token_counter.describe()}

    def select(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[Selection]:
        """Fused pools for the batch, then one selection per question (its time charged as "select")."""
        pools = self.front_end.pools([ex.question for ex in examples], costs)
        selections = []
        for pool, cost in zip(pools, costs):
            started = time.perf_counter()
            selections.append(self.selector.select(pool.question, pool))
            cost.seconds["select"] += time.perf_counter() - started
        return selections

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        selections = self.select(examples, costs)
        chosen = [s.passages for s in selections]
        if self.generates:
            prompts = [
                self.prompt.with_context("passages", self.passages.context(passages), question=ex.question)
                for ex, passages in zip(examples, chosen)
            ]
            outputs = self._final_answers(prompts, costs, chosen)
        else:
            outputs = [MethodOutput("", list(passages)) for passages in chosen]
        for out, selection in zip(outputs, selections):
            out.stats = selection.summary()
            out.trace["selector"] = self.selector.name
            out.trace["pool_positions"] = selection.indices
            out.trace["tokens"] = selection.tokens
        return outputs
