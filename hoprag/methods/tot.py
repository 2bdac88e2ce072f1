"""Tree of Thoughts baseline (TreeRare's ToT rows, spec/treerare.md App. B): BFS over reasoning steps.

    python eval.py +method=tot data=hotpotqa retriever=bm25 method.k=20          # over BM25 top-20, TreeRare's
    python eval.py +method=tot data=hotpotqa method.branching=2 method.breadth=2 method.k=5   # a cheaper search

The search (`hoprag.search.tot`): `depth` steps; each unanswered kept state samples `branching` next
thoughts, each new state is valued by `evaluations` LLM samples (sure / likely / impossible), the best
`breadth` are kept; the answer is read after `#FINAL` in the best kept state that answered. The prompts
show `cot`'s exemplars (as numbered steps) and, with documents, the retriever's top `k` passages for the
question. Every step is one batched thought call and one batched value call for the whole batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm.base import LLM
from hoprag.methods.base import MethodOutput
from hoprag.methods.cot import CoT
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.mcts import sample_seed
from hoprag.search.tot import Search, ThoughtSearch

COUNTS = ("thoughts", "evaluations", "depth", "duplicate_thoughts", "empty_thoughts", "value_unparsed")


class ToT(CoT):
    """`cot`'s settings, plus the search's: `depth`, `branching`, `breadth`, `evaluations`, the value
    calls' sampling (`value_generation`; `generation` samples the thoughts) and `seed` (null: unseeded)."""

    name = "tot"

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever | None = None,
        depth: int = 3,
        branching: int = 5,
        breadth: int = 5,
        evaluations: int = 3,
        value_generation: Mapping[str, Any] | None = None,
        seed: int | None = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        seeds = None if seed is None else (lambda question, step, stream: sample_seed(seed, question, step, stream))
        self.search = ThoughtSearch(
            llm, self.prompt, depth, branching, breadth, evaluations, self.generation, dict(value_generation or {}),
            seeds, self.one_by_one,
        )  # fmt: skip

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        shown = self.documents(examples, costs)
        searches = [Search(ex.question, passages, cost) for ex, passages, cost in zip(examples, shown, costs)]
        self.search.run(searches)
        return [self._output(search) for search in searches]

    def _output(self, search: Search) -> MethodOutput:
        best = search.best()
        prediction, failed = self.read(best.steps[-1] if best.steps else "")
        stats = {key: search.counts.get(key, 0.0) for key in COUNTS}
        stats["max_depth_reached"] = float(not search.done)
        stats["retrievals"] = float(search.passages is not None)
        trace = {
            "steps": search.levels,
            "answer_state": list(best.steps),
            "value": best.value,
            "passages": [p.id for p in search.passages or []],
        }
        return MethodOutput(prediction, list(search.passages or []), trace, failed, stats)
