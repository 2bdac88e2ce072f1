"""PruneRAG (spec/prunerag.md): confidence-guided query decomposition trees, then one aggregated answer.

    python eval.py +experiment=prunerag data=hotpotqa [method.builder.threshold=0.9] [method.max_depth=2]
    python eval.py +experiment=prunerag_wo_con data=hotpotqa          # an ablation (conf/experiment/)

The tree search lives in `hoprag.search.prunerag`; this class wires it to the runner: trees for the whole
batch, final answers from the last `\\boxed{}` (no box: the extractor's reading, counted as a parse
failure), every passage retrieved anywhere in the tree as `retrieved` (recall, all-gold-retrieved, EFR),
the tree in the trace and its figures in `stats` (decision calls, RN, nodes, depth, parse errors ...).
A question whose tree reached `max_nodes` has `capped: 1` in `stats` and, in the trace, the splits not made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.prunerag.aggregate import Aggregator
from hoprag.search.prunerag.builder import PruneTreeBuilder
from hoprag.search.prunerag.tree import CAPPED, Node, tree_stats
from hoprag.search.steps import capped

LLM_STAGES = ("decision", "aggregate", "answer")
# the builder's own settings that `PruneTreeBuilder.check_settings` checks (beside the method's shared ones)
BUILDER_CHECKED = ("k", "actions", "retry_actions", "branching", "confidence_span", "decision_examples",
                   "min_children", "max_nodes")  # fmt: skip


class PruneRAG(Method):
    """`builder` grows the trees (`PruneTreeBuilder`'s knobs: k, threshold, actions, the small-model aids
    ...) and `aggregator` answers from them (`Aggregator`'s: mode, which passages are shown, answer_prefix);
    both are given unfinished (Hydra `_partial_`, or the class: the paper's procedure, aids off) and
    completed here with the LLM, the retriever and the three settings they share, declared once on the
    method: `max_depth` D, `batching` (round or node) and `passage_template`. `generation` is the sampling
    of the final answer call, the builder's own `generation` that of its decision calls."""

    name = "prunerag"
    completes = {"builder": ("llm", "retriever", "batching", "max_depth", "passage_template"),
                 "aggregator": ("llm", "one_by_one", "generation", "fallback", "max_depth", "passage_template")}

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        builder: Callable[..., PruneTreeBuilder] = PruneTreeBuilder,
        aggregator: Callable[..., Aggregator] = Aggregator,
        max_depth: int = 3,
        batching: str = "round",
        passage_template: str = "{title}\n{text}",
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        shared = {"max_depth": max_depth, "passage_template": passage_template}
        self.builder = self.complete_part("builder", builder, llm=llm, retriever=retriever, batching=batching, **shared)
        self.aggregator = self.complete_part(
            "aggregator", aggregator, llm=llm, one_by_one=batching == "node", generation=self.generation,
            fallback=lambda text: self.extractor(text).answer, **shared,
        )  # fmt: skip

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """The builder's and the aggregator's settings, as they check them (`max_depth` and `batching` the
        method's, the rest the children's)."""
        super().check_settings(settings)
        builder = settings.get("builder") or {}
        PruneTreeBuilder.check_settings(
            max_depth=setting(cls, settings, "max_depth"), batching=setting(cls, settings, "batching"),
            **{name: setting(PruneTreeBuilder, builder, name) for name in BUILDER_CHECKED},
        )  # fmt: skip
        Aggregator.check_mode(setting(Aggregator, settings.get("aggregator") or {}, "mode"))

    def required_capabilities(self) -> dict[str, str]:
        """Log-probs for the answer confidence; a working assistant prefill for the prefixes."""
        needs = {}
        if self.builder.use_confidence:
            needs["logprobs"] = "method.builder.use_confidence=false (ablation w/o Con.), or a server returning them"
        prefills = (
            ("builder.decision_prefix", self.builder.prefix),
            ("aggregator.answer_prefix", self.aggregator.prefix),
        )
        prefixes = [f"method.{key}=null" for key, prefix in prefills if prefix]
        if prefixes:
            needs["prefill"] = "llm.tokenizer=<the served model's tokenizer> (local chat template), or " + " ".join(
                prefixes
            )
        return needs

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        roots = self.builder.build([ex.question for ex in examples], costs)
        finals = self.aggregator(roots, costs)
        outputs = []
        for root, final, cost in zip(roots, finals, costs):
            stats = tree_stats(root)
            stats["retrieval_calls"] = stats["tree_nodes"]  # RN: every node retrieved once with its own string
            stats["llm_seconds"] = round(sum(cost.seconds.get(s, 0.0) for s in LLM_STAGES), 4)
            trace = {"tree": root.to_dict(), "output": final.output, "aggregation": self.aggregator.mode}
            if final.node_results:
                trace["node_results"] = list(final.node_results)
            refused = [n.query for n in root.walk() if n.status == CAPPED]
            if refused:
                trace["capped"] = capped(root.query, "max_nodes", self.builder.max_nodes, splits_not_made=refused)
            outputs.append(MethodOutput(final.prediction, _all_passages(root), trace, final.failed, stats))
        return outputs


def _all_passages(root: Node) -> list[Passage]:
    """Every passage retrieved anywhere in the tree, de-duplicated by id, in retrieval order."""
    seen: dict[str, Passage] = {}
    for node in root.walk():
        for p in node.passages:
            seen.setdefault(p.id, p)
    return list(seen.values())
