"""A retriever over what a question's chosen knowledge sources hold: the "+ Pruning" frameworks' retriever.

PruningRAG's Tables 1 and 8 run each framework (Naive RAG, HyDE, Iter-RetGen, RRR, Self-Ask, Self-RAG)
unchanged on the sources a router (or a fixed choice) gave each question (spec/pruningrag.md P18). The
framework keeps its own queries, its own `k` and its own number of searches; what it searches is no longer a
pooled corpus but its question's sources:

- a source that ranks by query (the web source: its `retrieve(queries, pages, top_k)` chunks the question's
  pages, keeps BM25's best above its page threshold and ranks the chunks by cosine) answers each query with
  its top `k` chunks of that question's pages; a framework that searches by vector (HyDE's averaged
  passages) gets the same through `search_vectors`, in the ranked source's `embedder` space;
- a source whose evidence does not depend on the query (the mock API pipeline, which reads the question's
  entities and time; a TAT-QA question's table or text) is fetched once per question when the batch is
  scoped, and every search of that question returns it first, before the ranked chunks: the official code
  puts the KG text beside the web chunks the same way, so a question routed to the API reads its API
  passages plus up to `k` chunks.

A query finds its question by the cost record it is charged to: every method charges each query to its own
question's `Cost`, and `scope` maps those records to their questions before the framework runs (a query
charged to no scoped record is refused). Per question, `question_stats` holds what the sources reported:
each query-independent source's own figures, and for the web source the largest of each figure over the
question's searches (they describe its pages, the same for every query).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.retrievers import Hit, Retriever
from hoprag.sources.base import Source


class ScopedSources(Retriever):
    """`sources`: the run's sources by name (null ones are skipped); `scope` before each framework call."""

    def __init__(self, sources: Mapping[str, Source | None]) -> None:
        super().__init__([])  # no corpus: each question's own sources
        self.sources = {name: s for name, s in sources.items() if s is not None}
        self._owners: dict[int, int] = {}
        self._examples: list[QAExample] = []
        self._routes: list[tuple[str, ...]] = []
        self._fixed: list[list[Passage]] = []
        self.question_stats: list[dict[str, float]] = []

    def ranked(self, name: str) -> bool:
        """Whether source `name` answers queries (ranked per query) rather than giving fixed evidence."""
        return hasattr(self.sources[name], "retrieve")

    def scope(self, examples: Sequence[QAExample], routes: Sequence[Sequence[str]], costs: Sequence[Cost]) -> None:
        """Bind the next searches to these questions (by their cost records) and their routed sources, and
        fetch the query-independent evidence of each question once (charged to it by the source)."""
        self._owners = {id(cost): i for i, cost in enumerate(costs)}
        self._examples, self._routes = list(examples), [tuple(r) for r in routes]
        self._fixed = [[] for _ in examples]
        self.question_stats = [{} for _ in examples]
        for name, source in self.sources.items():
            asked = [i for i, route in enumerate(self._routes) if name in route]
            if not asked or self.ranked(name):
                continue
            found = source.fetch([examples[i] for i in asked], [costs[i] for i in asked])
            for i, passages in zip(asked, found):
                self._fixed[i] += passages
            self._record(name, asked, getattr(source, "question_stats", None))

    def _record(self, name: str, asked: Sequence[int], reported: Sequence[Mapping[str, float]] | None) -> None:
        """Keep a source's per-query figures under `<name>/<key>` for their questions (the largest, for a
        question searched more than once)."""
        if reported is None:
            return
        if len(reported) != len(asked):
            raise RuntimeError(f"source {name!r} reported question_stats for {len(reported)} of {len(asked)} queries")
        for i, stats in zip(asked, reported):
            for key, value in stats.items():
                slot = f"{name}/{key}"
                self.question_stats[i][slot] = max(float(value), self.question_stats[i].get(slot, float("-inf")))

    @property
    def embedder(self) -> Embedder:
        """The ranked source's embedder, so that a framework searching by vector (HyDE) encodes as it ranks;
        an AttributeError when no source ranks by query (the framework then searches by text)."""
        for name, source in self.sources.items():
            if self.ranked(name) and hasattr(source, "embedder"):
                return source.embedder
        raise AttributeError("no source here ranks by a query vector")

    def search(
        self, queries: Sequence[str], k: int, costs: Sequence[Cost | None] | None = None, stage: str = "retrieval"
    ) -> list[list[Hit]]:
        """Per query, its question's fixed evidence, then the top `k` of each ranked source it was routed to."""
        if isinstance(queries, str):
            raise TypeError("search() takes a batch of queries: wrap a single query in a list")
        queries = list(queries)
        owners = self._owners_of(costs, len(queries))
        return self._counted(len(queries), lambda: self._scoped(queries, owners, k), costs, stage)

    def search_vectors(
        self, vectors: np.ndarray, k: int, costs: Sequence[Cost | None] | None = None, stage: str = "retrieval"
    ) -> list[list[Hit]]:
        """As `search`, ranking by one query vector per row (of `embedder`'s space); BM25, where a source uses
        it, reads the question's text."""
        owners = self._owners_of(costs, len(vectors))
        questions = [self._examples[i].question for i in owners]
        return self._counted(len(questions), lambda: self._scoped(questions, owners, k, vectors), costs, stage)

    def _owners_of(self, costs: Sequence[Cost | None] | None, n: int) -> list[int]:
        if costs is None or len(costs) != n or any(id(c) not in self._owners for c in costs):
            raise ValueError("a search over the routed sources needs each query's cost record, one of the questions "
                             "`scope` was given: the framework must charge every query to its question")  # fmt: skip
        return [self._owners[id(c)] for c in costs]

    def _scoped(
        self, queries: list[str], owners: list[int], k: int, vectors: np.ndarray | None = None
    ) -> list[list[Hit]]:
        found: list[list[Passage]] = [list(self._fixed[i]) for i in owners]
        for name, source in self.sources.items():
            if not self.ranked(name):
                continue
            asking = [j for j, i in enumerate(owners) if name in self._routes[i]]
            if not asking:
                continue
            pages = [self._examples[owners[j]].metadata.get("search_results", []) for j in asking]
            given = None if vectors is None else vectors[asking]
            ranked = source.retrieve([queries[j] for j in asking], pages, top_k=k, query_vectors=given)
            for j, passages in zip(asking, ranked):
                found[j] += passages
            self._record(name, [owners[j] for j in asking], getattr(source, "question_stats", None))
        return [[Hit(p, 0.0, rank) for rank, p in enumerate(passages, start=1)] for passages in found]

    def get(self, passage_id: str) -> Passage:
        raise KeyError(f"{passage_id!r}: a search over routed sources has no corpus to look passages up in")

