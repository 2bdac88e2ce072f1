"""PruneRAG (spec/prunerag.md): confidence-guided query decomposition trees, then one aggregated answer.

    python eval.py +method=prunerag data=hotpotqa [method.threshold=0.9] [method.max_depth=2]
    python eval.py +experiment=prunerag_wo_con data=hotpotqa          # an ablation (conf/experiment/)

The tree search lives in `hoprag.search.prunerag`; this class wires it to the runner: trees for the whole
batch, final answers from the last `\\boxed{}` (no box: the extractor's reading, counted as a parse
failure), every passage retrieved anywhere in the tree as `retrieved` (recall, all-gold-retrieved, EFR),
the tree in the trace and its figures in `stats` (decision calls, RN, nodes, depth, parse errors ...).
A question whose tree reached `max_nodes` has `capped: 1` in `stats` and, in the trace, the splits not made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.methods.base import Method, MethodOutput
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.prunerag.aggregate import Aggregator
from hoprag.search.prunerag.builder import MAX_NODES, PruneTreeBuilder
from hoprag.search.prunerag.parsing import ACTIONS
from hoprag.search.prunerag.tree import CAPPED, Node, tree_stats
from hoprag.search.steps import capped

LLM_STAGES = ("decision", "aggregate", "answer")


class PruneRAG(Method):
    """The tree knobs are `PruneTreeBuilder`'s (k, max_depth, threshold, strict_threshold, use_confidence,
    actions, retry_actions, all_decom_depth, branching, confidence_span, confidence_mean, batching, max_nodes), the
    aggregation knobs `Aggregator`'s (aggregation, include_context_for_all_leaves, show_internal_context).
    `decision_generation` and `generation` are the sampling overrides of the decision and answer calls.
    The small-model aids are the builder's `decision_prefix`, `decision_examples`, `free_text_fallback`,
    `min_children`, `lenient_json` and the aggregator's `answer_prefix`: off here (the paper's procedure),
    on in conf/method/prunerag.yaml for the small default LLM, off again in +experiment=prunerag_faithful."""

    name = "prunerag"

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        k: int = 5,
        max_depth: int = 3,
        threshold: float = 0.95,
        strict_threshold: bool = False,
        use_confidence: bool = True,
        actions: Sequence[str] = ACTIONS,
        retry_actions: Sequence[str] | None = None,
        all_decom_depth: int = 0,
        branching: int = 2,
        confidence_span: str = "json_value",
        confidence_mean: bool = True,
        batching: str = "round",
        aggregation: str = "single_call_tree",
        include_context_for_all_leaves: bool = True,
        show_internal_context: bool = False,
        passage_template: str = "{title}\n{text}",
        decision_generation: Mapping[str, Any] | None = None,
        decision_prefix: str | None = None,
        decision_examples: str = "inline",
        free_text_fallback: bool = False,
        min_children: int | None = None,
        lenient_json: bool = False,
        answer_prefix: str | None = None,
        max_nodes: int = MAX_NODES,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.answer_prefix = answer_prefix
        self.builder = PruneTreeBuilder(
            llm, retriever, k=k, max_depth=max_depth, threshold=threshold, strict_threshold=strict_threshold,
            use_confidence=use_confidence, actions=actions, retry_actions=retry_actions,
            all_decom_depth=all_decom_depth, branching=branching, confidence_span=confidence_span,
            confidence_mean=confidence_mean, batching=batching, passage_template=passage_template,
            generation=decision_generation, decision_prefix=decision_prefix, decision_examples=decision_examples,
            free_text_fallback=free_text_fallback, min_children=min_children, lenient_json=lenient_json,
            max_nodes=max_nodes,
        )  # fmt: skip
        self.aggregator = Aggregator(
            llm, mode=aggregation, max_depth=max_depth, passage_template=passage_template,
            include_context_for_all_leaves=include_context_for_all_leaves,
            show_internal_context=show_internal_context, one_by_one=batching == "node",
            fallback=lambda text: self.extractor(text).answer, generation=self.generation,
            answer_prefix=answer_prefix,
        )  # fmt: skip

    def required_capabilities(self) -> dict[str, str]:
        """Log-probs for the answer confidence; a working assistant prefill for the prefixes."""
        needs = {}
        if self.builder.use_confidence:
            needs["logprobs"] = "method.use_confidence=false (ablation w/o Con.), or a server that returns them"
        prefixes = [f"method.{k}=null" for k, v in (("decision_prefix", self.builder.prefix),
                                                    ("answer_prefix", self.answer_prefix)) if v]  # fmt: skip
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
