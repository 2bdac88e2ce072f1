"""Self-Correcting RAG, the full method (spec/self_correcting_rag.md §2): the fused candidate pool, exact MMKP
context selection (phase I, `hoprag.selectors`), then NLI-guided MCTS over answers from that context
(phase II, `hoprag.search.mcts`), with AP / CR / Sup of the chosen answer.

Augment children add passages from the runner's retriever outside the selection and its token budget, as
the released code does. The selection's figures (passages selected, tokens used, budget utilisation, value)
join the search's in `stats`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import PassageFormat
from hoprag.methods.sc_rag_search import SCRAGSearch
from hoprag.methods.sc_rag_select import SCRAGSelect
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.sc_rag_answer import SNIPPET_SEPARATOR
from hoprag.selectors import HybridFrontEnd, Selector, TokenCounter


class SCRAG(SCRAGSearch):
    """`front_end`, `token_counter` and `selector` are given unfinished and completed as `SCRAGSelect`
    completes them, the counter with the snippets' format. The other arguments are `SCRAGSearch`'s (its `k`
    is unused: the selector decides how many passages are read)."""

    name = "sc_rag"
    completes = {**SCRAGSearch.completes, **SCRAGSelect.completes}

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        front_end: Callable[..., HybridFrontEnd],
        selector: Callable[..., Selector],
        token_counter: Callable[..., TokenCounter] = TokenCounter,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.front_end = self.complete_part("front_end", front_end, retriever=retriever)
        snippets = PassageFormat(self.snippet_template, SNIPPET_SEPARATOR)
        counter = self.complete_part("token_counter", token_counter, llm=llm, passages=snippets)
        self.selector = self.complete_part("selector", selector, token_counter=counter)

    def run_info(self) -> dict[str, Any]:
        return {**super().run_info(), "selector_token_counting": self.selector.token_counter.describe()}

    def contexts(
        self, examples: Sequence[QAExample], costs: Sequence[Cost]
    ) -> tuple[list[list[Passage]], list[dict[str, float]]]:
        """Fused pools for the batch, then one selection per question (its time charged as "select")."""
        pools = self.front_end.pools([ex.question for ex in examples], costs)
        contexts, stats = [], []
        for pool, cost in zip(pools, costs):
            started = time.perf_counter()
            selection = self.selector.select(pool.question, pool)
            cost.seconds["select"] += time.perf_counter() - started
            contexts.append(list(selection.passages))
            stats.append({f"select/{key}": value for key, value in selection.summary().items()})
        return contexts, stats
