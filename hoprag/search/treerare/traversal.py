"""TreeRare's bottom-up traversal of question parse trees (spec/treerare.md §2.3), batched by tree level.

Every kept node runs QG (queries about its phrase, given the question, the evidence of its processed
subtree and its children's queries) → BM25 top-k per query, merged → SAG (one evidence paragraph). A node's
height is one more than its highest kept child's, so processing all nodes of height 1, then 2, ... keeps
every child before its parent while all questions of a batch share each step: per level one QG call, one
batched search and one SAG call (`hoprag.search.steps`), about 2 × height LLM calls for the whole batch.
`batching="node"` runs the same algorithm one node at a time in post-order (2 × nodes calls a question),
kept to measure what batching buys (scripts/bench/bench_treerare.py). Each question's own calls, tokens, searches
and passages are charged to its cost record either way.

The Table 3 ablations are switches: `query_generation=False` queries BM25 with the phrase itself (w/o QG),
`retrieval=False` lets SAG answer from no documents (w/o IR), `subanswers=False` passes the raw passages
upward (w/o SAG) or, without retrieval, the generated queries (QG only); both off is IR only; `use_tree=False`
is CoT only (no parse, FAG without documents).

Fallbacks, each counted per question: a QG reply without a parsable `response:` list → the phrase is the
query (`qg_fallbacks`); an empty SAG reply → the node's raw passages are its evidence (`sag_fallbacks`); a
question the parser cannot parse → FAG on BM25 top-k for the question (`traversal_fallback`).

Ceiling: at most `max_nodes` nodes a question (64 by default; no paper states one, and the longest of 1,366
real HotpotQA, 2Wiki, MuSiQue and Bamboogle questions keeps 16 dependency-tree nodes). A longer question's
tree keeps the nodes nearest its root (`tree.nearest_root`) and is answered from them: its deeper, shorter
phrases are skipped, the question counts as `capped` and its trace says how many nodes were skipped. Each
level (or node, with `batching="node"`) ticks a progress bar with the nodes and the LLM calls and tokens so far.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hoprag.cost import Cost
from hoprag.data.types import Passage
from hoprag.llm.base import LLM
from hoprag.llm.prompts import Context, ContextPrompt, PassageFormat
from hoprag.retrieval.retrievers import Hit, Retriever
from hoprag.search.steps import capped, llm_step, retrieval_step
from hoprag.search.treerare import prompts as P
from hoprag.search.treerare.parsing import parse_queries
from hoprag.search.treerare.tree import KeptNode, SyntaxTree, nearest_root, prune, subtree
from hoprag.utils import progress

log = logging.getLogger(__name__)

BATCHING = ("level", "node")
EVIDENCE_SCOPES = ("subtree", "children")
MAX_QUERIES = {"multihop": 3, "ambiguous": 5}


class TreeParser(Protocol):
    def parse(self, questions: Sequence[str]) -> list[SyntaxTree]: ...


def parser_for(parsers: Mapping[str, TreeParser], tree: str) -> TreeParser:
    """The parser of tree kind `tree` ("dt", "ct") among the configured ones."""
    if tree not in parsers:
        raise ValueError(f"tree must be one of {sorted(parsers)}, got {tree!r}")
    return parsers[tree]


@dataclass
class NodeRecord:
    """A processed node: its place in the pruned tree and what the traversal made of it."""

    phrase: str
    label: str
    height: int
    children: list[int]
    queries: list[str] = field(default_factory=list)
    passages: list[Passage] = field(default_factory=list)
    ranks: dict[str, int] = field(default_factory=dict)  # each passage's rank in its query's hits
    evidence: list[Passage] = field(default_factory=list)  # what the node passes upward (prompt units)
    qg_output: str | None = None
    sag_output: str | None = None
    fallbacks: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, node: KeptNode) -> NodeRecord:
        return cls(node.phrase, node.label, node.height, list(node.children))

    def to_dict(self) -> dict[str, Any]:
        return {
            "phrase": self.phrase, "label": self.label, "height": self.height, "children": self.children,
            "queries": self.queries, "passages": [{"id": p.id, "title": p.title} for p in self.passages],
            "evidence": [p.text for p in self.evidence], "qg_output": self.qg_output,
            "sag_output": self.sag_output, "fallbacks": self.fallbacks,
        }  # fmt: skip


@dataclass
class QuestionTree:
    """One question's traversal: its processed nodes in post-order (the root last), or the reason it fell
    back to plain retrieval."""

    question: str
    kind: str
    nodes: list[NodeRecord] = field(default_factory=list)
    parse_nodes: int = 0
    sentences: int = 1
    fallback: str | None = None
    fallback_passages: list[Passage] = field(default_factory=list)
    capped: dict[str, Any] | None = None  # over `max_nodes`: the ceiling and the nodes skipped (`steps.capped`)

    def levels(self) -> int:
        return max((n.height for n in self.nodes), default=0)

    def passages(self) -> list[Passage]:
        """Every passage read, de-duplicated by id, in retrieval order."""
        seen: dict[str, Passage] = {}
        for p in [q for n in self.nodes for q in n.passages] + self.fallback_passages:
            seen.setdefault(p.id, p)
        return list(seen.values())

    def evidence(self) -> list[tuple[Passage, tuple[int, ...]]]:
        """What FAG reads: every node's evidence in post-order, with its priority key (see `ordered_context`)."""
        if self.fallback:
            return [(as_evidence(p), (0, r)) for r, p in enumerate(self.fallback_passages)]
        return [(u, (-n.height, i, r)) for i, n in enumerate(self.nodes) for r, u in enumerate(n.evidence)]

    def stats(self) -> dict[str, float]:
        return {
            "tree_nodes": self.parse_nodes, "processed_nodes": len(self.nodes), "tree_height": self.levels(),
            "queries": sum(len(n.queries) for n in self.nodes),
            "qg_fallbacks": sum("qg_unparsed" in n.fallbacks for n in self.nodes),
            "sag_fallbacks": sum("sag_empty" in n.fallbacks for n in self.nodes),
            "traversal_fallback": float(self.fallback is not None), "multi_sentence": float(self.sentences > 1),
            "capped": float(self.capped is not None),
        }  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "sentences": self.sentences, "parse_nodes": self.parse_nodes,
                "fallback": self.fallback, "capped": self.capped,
                "nodes": [n.to_dict() for n in self.nodes]}  # fmt: skip


def as_evidence(passage: Passage) -> Passage:
    """A retrieved passage as an evidence unit (title and text in one, as `#context:` shows it)."""
    return Passage(passage.id, passage.title, passage.contents, passage.origin)


def ordered_context(units: Sequence[tuple[Passage, tuple]], fmt: PassageFormat, empty: str = P.NO_EVIDENCE) -> Context:
    """Units shown in the given order but kept for the input budget by their priority key (smallest first):
    a prompt over budget loses its lowest-priority units, not simply its last ones. Repeated ids: the first."""
    seen: dict[str, tuple[int, tuple]] = {}
    for position, (unit, key) in enumerate(units):
        seen.setdefault(unit.id, (position, key))
    distinct = {unit.id: unit for unit, _ in reversed(units)}
    by_priority = sorted(seen, key=lambda uid: (seen[uid][1], seen[uid][0]))

    def render(kept: Sequence[Passage]) -> str:
        return fmt.render(sorted(kept, key=lambda p: seen[p.id][0])) or empty

    return Context(tuple(distinct[uid] for uid in by_priority), render)


def parse_all(parser: TreeParser, questions: Sequence[str]) -> list[SyntaxTree | str]:
    """Each question's tree, or the parser's error message for a question it cannot parse (ValueError)."""
    try:
        return list(parser.parse(questions))
    except ValueError:
        out: list[SyntaxTree | str] = []
        for q in questions:
            try:
                out.append(parser.parse([q])[0])
            except ValueError as e:
                log.warning("cannot parse %r (%s): falling back to retrieval for the question", q, e)
                out.append(f"parse error: {e}")
        return out


def by_level(trees: Sequence[QuestionTree]) -> list[list[tuple[int, int]]]:
    """(question, node) pairs grouped by height, lowest first; post-order within a question."""
    levels = max((t.levels() for t in trees), default=0)
    return [[(q, i) for q, t in enumerate(trees) for i, n in enumerate(t.nodes) if n.height == h]
            for h in range(1, levels + 1)]  # fmt: skip


def start_trees(
    parser: TreeParser,
    questions: Sequence[str],
    kind: str,
    min_tokens: int,
    collapse_unary: bool,
    max_nodes: int | None = None,
) -> list[QuestionTree]:
    """Parse and prune every question, keeping at most `max_nodes` nodes each (those nearest the root; a
    question over the ceiling is recorded as capped; None: all, for Tree-Retrieval, whose nodes make no LLM
    call); an unparsable one is marked to fall back."""
    trees = []
    for question, parsed in zip(questions, parse_all(parser, questions)):
        if isinstance(parsed, str):
            trees.append(QuestionTree(question, kind, fallback=parsed))
            continue
        kept = prune(parsed, min_tokens, collapse_unary)
        processed = kept if max_nodes is None else nearest_root(kept, max_nodes)
        nodes = [NodeRecord.of(n) for n in processed]
        parse_nodes = sum(1 for _ in parsed.root.walk())
        tree = QuestionTree(question, kind, nodes, parse_nodes, parsed.sentences)
        if len(processed) < len(kept):
            skipped = len(kept) - len(processed)
            tree.capped = capped(question, "max_nodes", max_nodes, kept_nodes=len(kept), skipped=skipped)
        trees.append(tree)
    return trees


class TreeRareSearch:
    """The traversal (module docstring). `k` passages per query (paper 15, code 10); `max_queries` per node
    (default 3 multi-hop, 5 ambiguous); `evidence_scope`: a parent's QG sees its whole processed subtree's
    evidence (`subtree`, the code) or its kept children's only (`children`, the paper's formula);
    `show_child_queries`: the children's queries in the parent's QG prompt (the code). `qg_prefix` is an
    assistant prefill of the QG reply (a small-model aid; the reply is read with the prefix in front).
    `max_nodes` is the per-question ceiling (module docstring)."""

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever | None,
        parser: TreeParser | None,
        kind: str = "dt",
        task: str = "multihop",
        k: int = 15,
        max_queries: int | None = None,
        min_tokens: int = 3,
        collapse_unary: bool = False,
        query_generation: bool = True,
        retrieval: bool = True,
        subanswers: bool = True,
        use_tree: bool = True,
        evidence_scope: str = "subtree",
        show_child_queries: bool = True,
        batching: str = "level",
        passage_template: str = "[{rank}] {title}\n{text}",
        qg_prefix: str | None = None,
        qg_generation: Mapping[str, Any] | None = None,
        sag_generation: Mapping[str, Any] | None = None,
        max_nodes: int = 64,
    ) -> None:
        self.check_settings(task, batching, evidence_scope, max_nodes)
        if use_tree and parser is None:
            raise ValueError("a parser is needed unless use_tree=false (CoT only)")
        if (retrieval or use_tree) and retriever is None:
            raise ValueError("a retriever is needed unless both retrieval and use_tree are off")
        self.llm, self.retriever, self.parser = llm, retriever, parser
        self.kind, self.task, self.k = kind, task, k
        self.max_queries = max_queries or MAX_QUERIES[task]
        self.min_tokens, self.collapse_unary = min_tokens, collapse_unary
        self.query_generation, self.retrieval, self.subanswers = query_generation, retrieval, subanswers
        self.use_tree, self.evidence_scope, self.show_child_queries = use_tree, evidence_scope, show_child_queries
        self.one_by_one = batching == "node"
        self.documents = PassageFormat(passage_template)
        self.qg_prefix = qg_prefix or ""
        self.qg_generation = dict(qg_generation or {})
        self.sag_generation = dict(sag_generation or {})
        self.max_nodes = max_nodes

    @staticmethod
    def check_settings(task: str, batching: str, evidence_scope: str, max_nodes: int) -> None:
        """Refuse what these settings rule out by themselves; TreeRare calls this before anything is built."""
        if task not in P.TASKS:
            raise ValueError(f"task must be one of {P.TASKS}, got {task!r}")
        if batching not in BATCHING:
            raise ValueError(f"batching must be one of {BATCHING}, got {batching!r}")
        if evidence_scope not in EVIDENCE_SCOPES:
            raise ValueError(f"evidence_scope must be one of {EVIDENCE_SCOPES}, got {evidence_scope!r}")
        if max_nodes < 1:
            raise ValueError(f"method.search.max_nodes must be at least 1 (nodes a question), got {max_nodes}")

    def search(self, questions: Sequence[str], costs: Sequence[Cost]) -> list[QuestionTree]:
        """Every question's traversed tree (the answer step is the caller's: `final_prompt`)."""
        if not self.use_tree:
            return [QuestionTree(q, "none") for q in questions]
        trees = start_trees(self.parser, questions, self.kind, self.min_tokens, self.collapse_unary, self.max_nodes)
        if self.one_by_one:
            steps = [[(q, i)] for q, tree in enumerate(trees) for i in range(len(tree.nodes))]
        else:
            steps = by_level(trees)
        unit = "node" if self.one_by_one else "level"
        desc = f"TreeRare {unit}s of {len(trees)} question{'s' * (len(trees) != 1)}"
        with progress.bar(total=len(steps), desc=desc, unit=unit, leave=False) as shown:
            for step in steps:
                shown.set_postfix(nodes=len(step), **progress.spent(costs))
                self.process(trees, step, costs)
                shown.update()
        self.fall_back(trees, costs)
        return trees

    def fall_back(self, trees: Sequence[QuestionTree], costs: Sequence[Cost]) -> None:
        """BM25 top-k for the questions whose traversal failed."""
        failed = [q for q, t in enumerate(trees) if t.fallback]
        hits = retrieval_step(self.retriever, [trees[q].question for q in failed], self.k,
                              [costs[q] for q in failed], "retrieval", self.one_by_one)  # fmt: skip
        for q, question_hits in zip(failed, hits):
            trees[q].fallback_passages = [h.passage for h in question_hits]

    def process(self, trees: Sequence[QuestionTree], items: Sequence[tuple[int, int]], costs: Sequence[Cost]) -> None:
        """QG, retrieval and SAG for these nodes (each node's children already done), one step each."""
        nodes = [trees[q].nodes[i] for q, i in items]
        item_costs = [costs[q] for q, _ in items]
        if self.query_generation:
            prompts = [self.qg_prompt(trees[q], i) for q, i in items]
            replies = llm_step(self.llm, prompts, item_costs, "qg", self.one_by_one, **self.qg_generation)
            for node, reply in zip(nodes, replies):
                node.qg_output = self.qg_prefix + reply.text
                queries = parse_queries(node.qg_output, self.max_queries)
                if queries is None:
                    node.fallbacks.append("qg_unparsed")
                node.queries = queries or [node.phrase]
        else:
            for node in nodes:
                node.queries = [node.phrase]
        if self.retrieval:
            self.retrieve(nodes, item_costs)
        if self.subanswers:
            prompts = [P.SAG.with_context("context", self.document_context(n), questions="; ".join(n.queries))
                       for n in nodes]  # fmt: skip
            replies = llm_step(self.llm, prompts, item_costs, "sag", self.one_by_one, **self.sag_generation)
            for (_, i), node, reply in zip(items, nodes, replies):
                node.sag_output = reply.text
                if reply.text.strip():
                    node.evidence = [Passage(f"evidence:{i}", node.phrase, reply.text.strip())]
                else:
                    node.fallbacks.append("sag_empty")
                    node.evidence = [as_evidence(p) for p in node.passages] or [self.query_unit(i, node)]
        else:
            for (_, i), node in zip(items, nodes):
                node.evidence = [as_evidence(p) for p in node.passages] if self.retrieval else [self.query_unit(i, node)]

    @staticmethod
    def query_unit(index: int, node: NodeRecord) -> Passage:
        return Passage(f"queries:{index}", node.phrase, "; ".join(node.queries))

    def retrieve(self, nodes: Sequence[NodeRecord], costs: Sequence[Cost]) -> None:
        """BM25 top-k for every query of every node in one batched search; per node the union in query order."""
        flat = [(n, q, c) for n, c in zip(nodes, costs) for q in n.queries]
        hits = retrieval_step(self.retriever, [q for _, q, _ in flat], self.k, [c for *_, c in flat],
                              "retrieval", self.one_by_one)  # fmt: skip
        merged: dict[int, dict[str, Hit]] = {id(n): {} for n in nodes}
        for (node, _, _), query_hits in zip(flat, hits):
            for h in query_hits:
                merged[id(node)].setdefault(h.passage.id, h)
        for node in nodes:
            node.passages = [h.passage for h in merged[id(node)].values()]
            node.ranks = {h.passage.id: h.rank for h in merged[id(node)].values()}

    def document_context(self, node: NodeRecord) -> Context:
        """The node's merged passages in merge order; over budget, each query's lower-ranked ones go first."""
        return ordered_context([(p, (node.ranks.get(p.id, 0),)) for p in node.passages], self.documents, "(none)")

    def scope(self, tree: QuestionTree, index: int) -> list[int]:
        """The processed nodes whose evidence node `index`'s QG reads, in post-order."""
        if self.evidence_scope == "children":
            return list(tree.nodes[index].children)
        kept = [KeptNode(i, n.phrase, n.label, n.children, n.height) for i, n in enumerate(tree.nodes)]
        return subtree(kept, index)

    def qg_prompt(self, tree: QuestionTree, index: int) -> ContextPrompt:
        node = tree.nodes[index]
        units = [(u, (-tree.nodes[j].height, j, r)) for j in self.scope(tree, index)
                 for r, u in enumerate(tree.nodes[j].evidence)]  # fmt: skip
        children = {tree.nodes[c].phrase: tree.nodes[c].queries for c in node.children}
        block = P.child_queries_block(children) if self.show_child_queries else ""
        return P.QG[self.task].with_context(
            "context", ordered_context(units, P.EVIDENCE), prefill=self.qg_prefix or None,
            question=tree.question, phrase=node.phrase, child_queries=block, n=self.max_queries,
        )  # fmt: skip

    def final_prompt(self, tree: QuestionTree) -> ContextPrompt:
        """FAG's prompt: the question and all evidence in post-order (the root's kept first when over budget)."""
        return P.FAG[self.task].with_context("context", ordered_context(tree.evidence(), P.EVIDENCE),
                                             question=tree.question)  # fmt: skip

