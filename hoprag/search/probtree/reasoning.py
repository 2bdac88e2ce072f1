"""ProbTree's reasoning phase: every node answered three ways, the most confident answer kept, leaves first.

As in the official code (RoHT/question_answering.py, 2_run.py), per node:

- closed-book QA (`closed_book`): chain of thought from the model's own knowledge;
- open-book QA (`open_book`): the same over the top k passages for the node's question (a leaf also
  searches with each sibling answer its question names, its "topic entities");
- child-aggregating QA (`children`, non-leaves): the node answered from its children's chosen answers.

A reply's confidence is the mean token log-prob of its explanation, the text before "So the answer is:"
(`confidence=explanation`, the code's); an aggregated answer's is the mean of that, the node's
decomposition score and its children's confidences (the code's `calculate_score2`). A reply without the
marker, an "Unknown" answer, a reply cut by the token limit, or one without log-probs (a server that gives
none: counted as `missing_logprobs`) scores the floor, -100, as the code's errors do; the highest score wins,
ties in the order closed-book, open-book, children. `confidence=answer_tokens` (a small-model aid, not the
paper's) scores every reply by the mean log-prob of all its tokens.

Nodes are answered in rounds: a node is ready once its children are answered and so are the earlier
siblings its question names (<1>, <2> ...); each round makes one batched search and one batched LLM call
(all three kinds of prompt) for the ready nodes of every question of the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hoprag.cost import Cost
from hoprag.llm.base import LLM
from hoprag.llm.types import Generation
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.probtree.prompts import CLOSED_BOOK, MARKER, aggregate_prompt, open_book_prompt
from hoprag.search.probtree.tree import REFERENCE, Node, mean_logprob
from hoprag.search.steps import llm_step, retrieval_step

FLOOR = -100.0  # the code's score of an error, an "Unknown" or an answer without explanation
CONFIDENCES = ("explanation", "answer_tokens")
KINDS = ("closed_book", "open_book", "children")


@dataclass(frozen=True)
class Candidate:
    """One answer of a node: its `kind`, `score` (FLOOR when unscorable), the raw `output`, whether the
    output had the answer marker (`marked`) and whether the backend gave log-probs (`scored`)."""

    kind: str
    answer: str
    score: float
    output: str
    marked: bool = True
    scored: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "answer": self.answer, "score": round(self.score, 4), "output": self.output}


def read_answer(
    generation: Generation, kind: str, confidence: str = "explanation", fallback: Callable[[str], str] | None = None
) -> Candidate:
    """The answer after the marker (its first line, a final period removed) and its confidence (module
    docstring); without the marker, `fallback(output)` (the stripped output by default) at the floor."""
    text = generation.text
    at = text.find(MARKER)
    scored = generation.logprobs is not None
    if at < 0:
        answer = fallback(text) if fallback else text.strip()
        return Candidate(kind, answer, FLOOR, text, marked=False, scored=scored)
    lines = text[at + len(MARKER) :].strip().splitlines()
    answer = (lines[0].strip() if lines else "").removesuffix(".").strip()
    if confidence == "explanation":
        score = mean_logprob(generation, 0, len(text[:at].rstrip()))
    else:
        score = generation.mean_logprob if scored else None
    if "Unknown" in answer or generation.finish_reason == "length":
        answer, score = "", None
    return Candidate(kind, answer, FLOOR if score is None else score, text, scored=scored)


class Reasoner:
    """Answers built trees bottom-up (module docstring): `k` passages per search, `generation` the
    sampling of every answering call, `one_by_one` one call per prompt and per query."""

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        k: int = 5,
        confidence: str = "explanation",
        generation: Mapping[str, Any] | None = None,
        one_by_one: bool = False,
        fallback: Callable[[str], str] | None = None,
    ) -> None:
        self.check_confidence(confidence)
        self.llm, self.retriever, self.k = llm, retriever, k
        self.confidence = confidence
        self.generation = dict(generation or {})
        self.one_by_one = one_by_one
        self.fallback = fallback

    @staticmethod
    def check_confidence(confidence: str) -> None:
        """Refuse an unknown `confidence`; ProbTree calls this before anything is built."""
        if confidence not in CONFIDENCES:
            raise ValueError(f"method.confidence must be one of {CONFIDENCES}, got {confidence!r}")

    def __call__(self, roots: Sequence[Node], costs: Sequence[Cost]) -> list[int]:
        """Answer every node of every tree; returns each tree's number of rounds."""
        owner = {id(n): i for i, root in enumerate(roots) for n in root.walk()}
        pending = [n for root in roots for n in root.walk()]
        rounds = [0] * len(roots)
        while pending:
            ready = [n for n in pending if _ready(n)]
            for i in {owner[id(n)] for n in ready}:
                rounds[i] += 1
            for node in ready:
                node.round = rounds[owner[id(node)]]
            self._round(ready, [costs[owner[id(n)]] for n in ready])
            pending = [n for n in pending if n.chosen is None]
        return rounds

    def _round(self, nodes: list[Node], costs: list[Cost]) -> None:
        for node in nodes:
            _resolve(node)
        self._retrieve(nodes, costs)
        prompts, asked = [], []
        for node, cost in zip(nodes, costs):
            prompts += [CLOSED_BOOK(question=node.resolved), open_book_prompt(node.resolved, node.passages)]
            asked += [(node, "closed_book", cost), (node, "open_book", cost)]
            if node.children:
                pairs = [(c.resolved, c.chosen.answer) for c in node.children]
                prompts.append(aggregate_prompt(node.resolved, pairs))
                asked.append((node, "children", cost))
        charged = [cost for _, _, cost in asked]
        outputs = llm_step(self.llm, prompts, charged, "reasoning", self.one_by_one, **self.generation)
        for (node, kind, _), output in zip(asked, outputs):
            node.candidates.append(self._candidate(node, kind, output))
        for node in nodes:
            node.chosen = max(node.candidates, key=lambda c: c.score)  # ties: the first, as the code's max

    def _candidate(self, node: Node, kind: str, output: Generation) -> Candidate:
        candidate = read_answer(output, kind, self.confidence, self.fallback)
        if kind != "children" or candidate.score == FLOOR:
            return candidate
        parts = [candidate.score, _floored(node.decomposition_score), *(c.chosen.score for c in node.children)]
        return Candidate(kind, candidate.answer, sum(parts) / len(parts), candidate.output, scored=candidate.scored)

    def _retrieve(self, nodes: list[Node], costs: list[Cost]) -> None:
        """One search per node question, and per topic entity of a leaf; a node's passages in that order,
        distinct by id."""
        queries, owners = [], []
        for node, cost in zip(nodes, costs):
            for query in [node.resolved, *([] if node.children else node.topics)]:
                queries.append(query)
                owners.append((node, cost))
        found = retrieval_step(self.retriever, queries, self.k, [c for _, c in owners], one_by_one=self.one_by_one)
        for (node, _), hits in zip(owners, found):
            known = {p.id for p in node.passages}
            node.passages += [h.passage for h in hits if h.passage.id not in known]


def _floored(score: float | None) -> float:
    return FLOOR if score is None else score


def _references(node: Node) -> list[Node]:
    """The earlier siblings whose answers `node`'s question names."""
    siblings = node.siblings()
    picked = [int(m) for m in REFERENCE.findall(node.question)]
    return [siblings[j - 1] for j in picked if 1 <= j < node.index]


def _ready(node: Node) -> bool:
    return all(c.chosen is not None for c in node.children) and all(s.chosen is not None for s in _references(node))


def _resolve(node: Node) -> None:
    """The node's question with each named earlier sibling's answer in place of <j>."""
    question = node.question
    for sibling in _references(node):
        question = question.replace(f"<{sibling.index}>", sibling.chosen.answer)
        if sibling.chosen.answer:
            node.topics.append(sibling.chosen.answer)
    node.resolved = question
