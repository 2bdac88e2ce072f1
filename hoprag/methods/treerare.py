"""TreeRare (spec/treerare.md): the question's parse tree guides retrieval and reasoning, bottom-up.

    python eval.py +experiment=treerare data=hotpotqa [method.tree=ct] [method.task=ambiguous] [method.search.k=10]
    python eval.py +experiment=treerare_wo_qg data=hotpotqa     # a Table 3 ablation (conf/experiment/)
    python scripts/runs/show_treerare.py <run dir>              # one question's tree, queries and evidence

The traversal lives in `hoprag.search.treerare`; this class wires it to the runner: the trees of a batch,
level by level, then one FAG call per question whose answer is read after the last FINAL marker (no marker:
the extractor's reading of the whole reply, counted as a parse failure). Every passage read anywhere in the
tree is `retrieved`; the tree goes in the trace, its figures (nodes, height, queries, fallbacks) in `stats`.
A question over `search.max_nodes` is answered from its nodes nearest the root: `capped: 1` in `stats`, and
the nodes skipped under the trace's `tree.capped`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.llm.base import LLM
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.cot import read_final
from hoprag.search.steps import llm_step
from hoprag.search.treerare.traversal import TreeParser, TreeRareSearch, parser_for


class TreeRare(Method):
    """`parsers` maps tree kinds to parsers (conf/parser/: `dt` spaCy, `ct` Stanza); `tree` picks one.
    `search` is the traversal, given unfinished (Hydra `_partial_`, or the class) with its own knobs
    (`TreeRareSearch`'s: k, the ablation switches, QG / SAG sampling ...) and completed here with the LLM,
    the retriever, the parser and the settings the FAG answer reads too: `task` (multihop or ambiguous) and
    `batching` (level or node). `generation` overrides the FAG call's sampling."""

    name = "treerare"
    completes = {"search": ("llm", "retriever", "parser", "kind", "task", "batching")}

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        parsers: Mapping[str, TreeParser],
        search: Callable[..., TreeRareSearch] = TreeRareSearch,
        tree: str = "dt",
        task: str = "multihop",
        batching: str = "level",
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.task = task
        self.one_by_one = batching == "node"
        self.search = self.complete_part("search", search, llm=llm, retriever=retriever,
                                         parser=parser_for(parsers, tree), kind=tree, task=task,
                                         batching=batching)  # fmt: skip

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """`tree` among the configured parsers, and the traversal's settings, as the constructor and the
        traversal check them (`task` and `batching` the method's, the rest `search`'s)."""
        parser_for(settings["parsers"], setting(cls, settings, "tree"))
        super().check_settings(settings)
        search = settings.get("search") or {}
        TreeRareSearch.check_settings(
            task=setting(cls, settings, "task"), batching=setting(cls, settings, "batching"),
            evidence_scope=setting(TreeRareSearch, search, "evidence_scope"),
            max_nodes=setting(TreeRareSearch, search, "max_nodes"),
        )  # fmt: skip

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        trees = self.search.search([ex.question for ex in examples], costs)
        prompts = [self.search.final_prompt(t) for t in trees]
        replies = llm_step(self.llm, prompts, costs, "answer", self.one_by_one, **self.generation)
        outputs = []
        for tree, reply in zip(trees, replies):
            prediction, failed = read_final(reply.text, self.task, self.extractor)
            trace = {"tree": tree.to_dict(), "output": reply.text}
            outputs.append(MethodOutput(prediction, tree.passages(), trace, failed, tree.stats()))
        return outputs
