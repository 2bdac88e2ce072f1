"""Growing PruneRAG trees level by level, for a whole batch of questions at once (spec §2.3).

Each round sends every pending node of every question to the LLM in one batched call, then retrieves for
all new sub-queries and entities in one batched search, so a batch costs at most D - 1 decision calls
(plus retry rounds within that budget) however many nodes it holds. `batching="node"` makes one call per
node and per query instead: the same algorithm, for measuring what round batching buys.

Ceiling: a question's tree holds at most `max_nodes` nodes (`MAX_NODES` by default: generous, since the
paper's tree, D = 3 and two children, has at most 7, and its deepest sweep, D = 5, 31). A split that would take
it over is not made: the node stays a leaf with its passages (status `capped`), and the question counts as
capped. Each round ticks a progress bar with the questions and nodes still open and the LLM calls and tokens
so far.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from hoprag.cost import Cost
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ContextPrompt, PassageFormat
from hoprag.llm.types import Generation
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.prunerag.parsing import (
    ACTIONS,
    ANSWER,
    DECOMPOSITION,
    ENTITY,
    first_occurrence_span,
    free_text_answer,
    parse_decision,
    span_confidence,
)
from hoprag.search.prunerag.prompts import EXAMPLE_PLACES, decision_prompt
from hoprag.search.prunerag.tree import ANSWERED, CAPPED, DECOMPOSED, ENTITY_PARENT, PARSE_ERROR, UNRESOLVED, Node
from hoprag.search.steps import llm_step, retrieval_step
from hoprag.utils import progress

BATCHING = ("round", "node")
CONFIDENCE_SPANS = ("json_value", "first_occurrence")
MAX_NODES = 64  # the default per-question ceiling (module docstring)

Pending = list[tuple[Node, Cost | None]]


def passage_formats(template: str) -> tuple[PassageFormat, PassageFormat]:
    """PruneRAG's passages one per line (`template` fields {title}, {text}): plain, and labelled "[Doc i] "."""
    return PassageFormat(template, "\n"), PassageFormat("[Doc {rank}] " + template, "\n")


class PruneTreeBuilder:
    """Builds one tree per question. The knobs are the digest's checklist (spec §4, §7, §2.6):

    k passages per retrieval; `max_depth` D (root = depth 1, decisions at depths < D); `threshold` τ_A
    with `strict_threshold` for the code's `>`; `use_confidence` (False: every answer accepted, w/o Con.);
    `actions` offered (ablations drop some); `retry_actions` offered after a rejected answer, within
    `actions` (None: the same); `all_decom_depth` (nodes up to this depth may only decompose);
    `branching` children per split; `confidence_span` json_value (the answer value in the chosen JSON) or
    first_occurrence (code-exact);
    `confidence_mean` False for exp(sum) (the w/o Ent. script); `batching` round or node; `max_nodes` the
    per-question ceiling (module docstring).

    Small-model aids (off here; conf/method/prunerag.yaml turns them on for the small default LLM):
    `decision_prefix` prefills the reply (e.g. `{"type": "`: the model continues the JSON; re-attached before
    parsing); `decision_examples` places the worked examples inline, as earlier chat turns, or nowhere
    (prompts.py); `free_text_fallback` reads a short non-JSON reply as an answer attempt
    (`parsing.free_text_answer`), its confidence from its own tokens, counted per node in `fallbacks`;
    `min_children` (None: exactly `branching`, as the paper) accepts a split naming fewer sub-queries or
    entities; `lenient_json` salvages the string pairs of broken or cut-off JSON (counted per node in
    `repairs`).
    """

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
        passage_template: str = "{title}\n{text}",
        generation: Mapping[str, Any] | None = None,
        decision_prefix: str | None = None,
        decision_examples: str = "inline",
        free_text_fallback: bool = False,
        min_children: int | None = None,
        lenient_json: bool = False,
        max_nodes: int = MAX_NODES,
    ) -> None:
        self.check_settings(
            k=k, max_depth=max_depth, actions=actions, retry_actions=retry_actions, branching=branching,
            confidence_span=confidence_span, batching=batching, decision_examples=decision_examples,
            min_children=min_children, max_nodes=max_nodes,
        )  # fmt: skip
        self.llm, self.retriever = llm, retriever
        self.k, self.max_depth, self.threshold, self.strict = k, max_depth, threshold, strict_threshold
        self.use_confidence = use_confidence
        self.actions = tuple(actions)
        # an ablation's dropped actions stay dropped on a retry; nothing left: the run's actions
        self.retry_actions = tuple(a for a in retry_actions or actions if a in actions) or self.actions
        self.all_decom_depth, self.branching = all_decom_depth, branching
        self.confidence_span, self.confidence_mean = confidence_span, confidence_mean
        self.one_by_one = batching == "node"
        self.passages = passage_formats(passage_template)[0]
        self.generation = dict(generation or {})
        self.prefix = decision_prefix or ""
        self.examples = decision_examples
        self.free_text_fallback = free_text_fallback
        self.min_children = min_children
        self.lenient = lenient_json
        self.max_nodes = max_nodes

    @staticmethod
    def check_settings(
        k: int,
        max_depth: int,
        actions: Sequence[str],
        retry_actions: Sequence[str] | None,
        branching: int,
        confidence_span: str,
        batching: str,
        decision_examples: str,
        min_children: int | None,
        max_nodes: int,
    ) -> None:
        """Refuse what these settings rule out by themselves; PruneRAG calls this before anything is built."""
        choices = (
            ("batching", batching, BATCHING),
            ("confidence_span", confidence_span, CONFIDENCE_SPANS),
            ("decision_examples", decision_examples, EXAMPLE_PLACES),
        )
        for name, value, allowed in choices:
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        for name, chosen in (("actions", actions), ("retry_actions", retry_actions or actions)):
            if not chosen or set(chosen) - set(ACTIONS):
                raise ValueError(f"{name} must be a non-empty subset of {ACTIONS}, got {list(chosen)}")
        if min_children is not None and not 1 <= min_children <= branching:
            raise ValueError(f"min_children must be in 1..branching ({branching}), got {min_children}")
        if k < 1 or max_depth < 1 or branching < 1:
            raise ValueError(f"k, max_depth and branching must be positive (got {k}, {max_depth}, {branching})")
        if max_nodes < 1:
            raise ValueError(f"method.builder.max_nodes must be at least 1 (nodes a question's tree), got {max_nodes}")

    def build(self, questions: Sequence[str], costs: Sequence[Cost | None]) -> list[Node]:
        """The trees of `questions`; each question's LLM and retrieval calls are charged to its cost."""
        roots = [Node(q, "query", 1) for q in questions]
        pending: Pending = list(zip(roots, costs))
        self._retrieve(pending)
        depth = 1
        with progress.bar(total=self.max_depth - 1, desc="PruneRAG rounds", unit="round", leave=False) as shown:
            while depth < self.max_depth and pending:
                still_open = len({id(_root(n)) for n, _ in pending})
                shown.set_postfix(questions=still_open, nodes=len(pending), **progress.spent(costs))
                pending = self._round(pending)
                depth += 1
                shown.update()
        for node, _ in pending:  # depth-D children and nodes whose retries ran out: leaves with passages
            node.status = UNRESOLVED
        return roots

    def _retrieve(self, nodes: Pending) -> None:
        if not nodes:
            return
        queries = [n.query for n, _ in nodes]
        costs = [c for _, c in nodes]
        hits = retrieval_step(self.retriever, queries, self.k, costs, one_by_one=self.one_by_one)
        for (node, _), found in zip(nodes, hits):
            node.passages = [h.passage for h in found]

    def _offered(self, node: Node) -> tuple[str, ...]:
        if node.depth <= self.all_decom_depth:
            return (DECOMPOSITION,)
        return self.retry_actions if node.rejected else self.actions

    def _round(self, pending: Pending) -> Pending:
        """One decision per pending node (one batched call), then one batched retrieval for the children."""
        prompts = [
            ContextPrompt(
                partial(
                    decision_prompt, parent_query=n.parent_query, query=n.query, actions=self._offered(n),
                    branching=self.branching, retry=n.rejected > 0, prefix=self.prefix, examples=self.examples,
                ),
                self.passages.context(n.passages),
            )
            for n, _ in pending
        ]  # fmt: skip
        outputs = llm_step(self.llm, prompts, [c for _, c in pending], "decision", self.one_by_one, **self.generation)
        retry: Pending = []
        created: Pending = []
        for (node, cost), output in zip(pending, outputs):
            node.outputs.append(self.prefix + output.text)  # as the model's whole reply reads
            offered = self._offered(node)
            decision = parse_decision(
                output.text, offered, self.branching, self.prefix, self.min_children, lenient=self.lenient
            )
            node.repairs += decision.repaired
            if decision.action is None and self.free_text_fallback and ANSWER in offered:
                fallback = free_text_answer(output.text)
                if fallback.action is not None:
                    decision = fallback
                    node.fallbacks += 1
            node.last_action, node.error = decision.action, decision.error
            if decision.action == ANSWER:
                if self._accept(node, decision.answer, decision.span, output):
                    node.status, node.answer = ANSWERED, decision.answer
                else:  # same node, same passages, reflection note, no new retrieval
                    node.rejected += 1
                    retry.append((node, cost))
            elif decision.action in (DECOMPOSITION, ENTITY) and _size(node) + len(decision.items) > self.max_nodes:
                node.status = CAPPED  # the ceiling: the split is not made
            elif decision.action in (DECOMPOSITION, ENTITY):
                node.status = DECOMPOSED if decision.action == DECOMPOSITION else ENTITY_PARENT
                kind = "query" if decision.action == DECOMPOSITION else ENTITY
                created += [(node.add_child(item, kind), cost) for item in decision.items]
            else:
                node.status = PARSE_ERROR
        self._retrieve(created)
        return retry + [(n, c) for n, c in created if n.kind == "query"]

    def _accept(self, node: Node, answer: str, span: tuple[int, int] | None, output: Generation) -> bool:
        """Whether the answer's confidence passes τ_A. Unknown is unconfident: an output without log-probs
        (a backend or server that gave none) leaves `node.confidence` None, is counted in
        `node.missing_logprobs` and is rejected like a low-confidence answer (retried, or left unresolved)."""
        if not self.use_confidence:
            return True
        if self.confidence_span == "first_occurrence":
            span = first_occurrence_span(output.text, answer)  # in the continuation: the prefix has no tokens
        node.confidence = span_confidence(output, span, mean=self.confidence_mean)
        if node.confidence is None:
            node.missing_logprobs += 1
            return False
        if self.strict:
            return node.confidence > self.threshold
        return node.confidence >= self.threshold


def _size(node: Node) -> int:
    """How many nodes the tree of `node`'s question holds."""
    return sum(1 for _ in _root(node).walk())


def _root(node: Node) -> Node:
    """The question a node belongs to (the progress bar counts the questions still being worked on)."""
    while node.parent is not None:
        node = node.parent
    return node
