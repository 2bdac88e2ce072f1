"""The oracle retriever: any retriever, with a question's gold passages injected or withheld hop by hop, so a rerun
measures what each hop's evidence is worth.

    python eval.py +method=standard_rag data=musique +oracle=withhold                   # hop 1's gold never returned
    python eval.py +method=self_ask data=musique +oracle=inject oracle.hops=all         # every hop's gold on top
    python eval.py +method=standard_rag data=2wiki +oracle=inject oracle.hops=[2] retriever=bm25

`+oracle=` (conf/oracle/) wraps the run's retriever (`retriever=`, whichever it is) in an `OracleRetriever`. A
question's gold chain is its `QAExample.decomposition` (MuSiQue's question decomposition, 2Wiki's evidences); hop
k's gold passage is the passage titled `Hop.support_title`. `hops` picks the hops (`[1]`, `[1, 2]`, or `all`);
hops past a question's chain are none of its own, and a hop without a known support title is counted
(`unknown`), never guessed.

- `mode: inject`: every search for the question returns the picked hops' gold passages first (in hop order), then
  the inner retriever's hits without them (deduplicated by passage id), cut to k. The gold passage is the
  question's own context passage with that title (when several share it, the first that contains the hop's
  answer, else the first), else the first corpus passage with that title, else none (counted `missing`).
- `mode: withhold`: every passage titled like a picked hop's gold passage is filtered out of every search for the
  question; the inner retriever is searched deeper by as many passages as the corpus holds with those titles, so
  the next hits fill the k places.

How the wrapper knows the question (the retriever receives query strings only): the runner answers each batch
inside `asking(batch, costs)`, which holds the batch's questions and their cost records; every method charges each
search to the cost record of the question it searches for (`Retriever.search(queries, k, costs=...)`), so each
query of a batched search is mapped to its question by the identity of its cost record. A query without one of the
batch's cost records maps to the question whose text it is, or to the batch's only question; otherwise, and outside
`asking` (no runner), the wrapper refuses (`OracleError`) rather than guess.

What it did is counted per question (`Asking.report`): the runner writes it into the record (`oracle`: mode, hops,
searches, injected: gold passages put into results the inner retriever's top k lacked, withheld: gold hits taken
out of its top k, unknown / missing hops) and totals it into metrics.json (`oracle/*`, `oracle_metrics`). The
`oracle` section enters the run's fingerprint and its name (`+oracle=...` is an override), so an oracle run's
answers never mix with a normal run's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.metrics.answer import answer_contains
from hoprag.retrieval.retrievers import Hit, Retriever
from hoprag.utils.refusals import Refusal

ORACLE = "oracle"  # the record key (and metrics prefix) of what the oracle did
MODES = ("inject", "withhold")
COUNTS = ("searches", "injected", "withheld")


class OracleError(Refusal, ValueError):
    """The oracle cannot do what it was asked honestly: bad settings, or a search it cannot tie to a question."""


@dataclass
class Asking:
    """The batch being answered: its questions, their cost records, and what the oracle did for each."""

    examples: list[QAExample]
    costs: list[Cost]
    done: dict[int, dict[str, Any]] = field(default_factory=dict)  # question index -> the oracle's counts

    def question(self, query: str, cost: Cost | None) -> int:
        """The index of the question a query searches for (module docstring: by cost record, text, or alone)."""
        for i, own in enumerate(self.costs):
            if cost is not None and own is cost:
                return i
        by_text = [i for i, ex in enumerate(self.examples) if ex.question == query]
        if len(by_text) == 1:
            return by_text[0]
        if len(self.examples) == 1:
            return 0
        raise OracleError(
            f"the oracle retriever cannot tell which of {len(self.examples)} questions the query {query!r} searches "
            "for: the method searched without the question's cost record (costs=...), which maps a query to its "
            "question; run it with batch_size=1, or pass the cost records"
        )

    def counts(self, index: int, mode: str, hops: list[int] | str) -> dict[str, Any]:
        return self.done.setdefault(index, {"mode": mode, "hops": hops, **dict.fromkeys(COUNTS, 0)})

    def report(self) -> list[dict[str, Any] | None]:
        """Per question, in batch order, what the oracle did (None where no oracle searched for it)."""
        return [self.done.get(i) for i in range(len(self.examples))]


_ASKED: list[Asking] = []  # the batches being answered, innermost last (the runner answers one at a time)


@contextmanager
def asking(examples: Sequence[QAExample], costs: Sequence[Cost]) -> Iterator[Asking]:
    """Answer `examples` (charged to `costs`, one each) inside this context, so an oracle retriever knows whose
    searches it serves. A module-level stack rather than a context variable: a search made in a worker thread
    sees the batch too."""
    if len(examples) != len(costs):
        raise ValueError(f"{len(costs)} cost records for {len(examples)} questions")
    current = Asking(list(examples), list(costs))
    _ASKED.append(current)
    try:
        yield current
    finally:
        del _ASKED[next(i for i, a in enumerate(_ASKED) if a is current)]


def parse_hops(hops: str | int | Sequence[int]) -> list[int] | None:
    """`all` -> None (every hop); one hop number or a list of them (1-based) -> the sorted distinct list."""
    if isinstance(hops, str):
        if hops.strip().lower() == "all":
            return None
        raise OracleError(f"oracle.hops must be all, a hop number or a list of them, not {hops!r}")
    listed = [hops] if isinstance(hops, int) else list(hops)
    if not listed or any(isinstance(h, bool) or not isinstance(h, int) or h < 1 for h in listed):
        raise OracleError(f"oracle.hops must be all or hop numbers from 1, not {hops!r}")
    return sorted(set(listed))


def gold_passage(example: QAExample, hop: int, corpus: Any) -> Passage | None:
    """Hop `hop`'s (1-based) gold passage (module docstring: the question's context first, then the corpus)."""
    step = example.decomposition[hop - 1]
    titled = [p for p in example.context if p.title == step.support_title]
    if titled:
        return next((p for p in titled if step.answer and answer_contains(p.text, step.answer)), titled[0])
    rows = corpus.rows_with_titles([step.support_title])[0]
    return corpus.take([rows[0]])[0] if len(rows) else None


class OracleRetriever(Retriever):
    """`inner` (a built retriever) with the picked `hops`' gold passages injected or withheld (`mode`), per the
    question each search is for. Other attributes are the inner retriever's (its index, embedder ...)."""

    def __init__(self, inner: Retriever, mode: str = "inject", hops: str | int | Sequence[int] = (1,)) -> None:
        if mode not in MODES:
            raise OracleError(f"oracle.mode must be one of {list(MODES)}, not {mode!r}")
        super().__init__(inner.corpus)
        self.inner = inner
        self.mode = mode
        self.hops = parse_hops(hops)
        self.build_seconds, self.from_cache = inner.build_seconds, inner.from_cache

    def __getattr__(self, name: str) -> Any:  # only for what this class lacks
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def search(
        self, queries: Sequence[str], k: int, costs: Sequence[Cost | None] | None = None, stage: str = "retrieval"
    ) -> list[list[Hit]]:
        if isinstance(queries, str):
            raise TypeError("search() takes a batch of queries: wrap a single query in a list")
        queries = list(queries)
        owners = self._owners(queries, costs)
        return self._counted(len(queries), lambda: self._oracle(owners, k, lambda d: self.inner.search(queries, d)),
                             costs, stage)  # fmt: skip

    def search_vectors(
        self, vectors: np.ndarray, k: int, costs: Sequence[Cost | None] | None = None, stage: str = "retrieval"
    ) -> list[list[Hit]]:
        """The inner retriever's vector search (HyDE), with the same oracle; queries map by cost record only."""
        vectors = np.asarray(vectors, dtype=np.float32)
        vectors = vectors.reshape(-1, vectors.shape[-1])
        owners = self._owners([""] * len(vectors), costs)
        search = self.inner.search_vectors  # an inner retriever without vectors has none: AttributeError
        return self._counted(len(vectors), lambda: self._oracle(owners, k, lambda d: search(vectors, d)), costs, stage)

    def _owners(self, queries: list[str], costs: Sequence[Cost | None] | None) -> list[tuple[Asking, int]]:
        if not _ASKED:
            raise OracleError("the oracle retriever searches only inside the runner's `asking` context (eval.py), "
                              "which tells it the question each search is for")  # fmt: skip
        batch = _ASKED[-1]
        if costs is not None and len(costs) != len(queries):
            raise ValueError(f"{len(costs)} cost records for {len(queries)} queries")
        owned = costs if costs is not None else [None] * len(queries)
        return [(batch, batch.question(q, c)) for q, c in zip(queries, owned)]

    def _picked(self, example: QAExample) -> tuple[list[int], list[int]]:
        """The picked hops of this question with a known support title, and those without one."""
        hops = range(1, len(example.decomposition) + 1) if self.hops is None else [
            h for h in self.hops if h <= len(example.decomposition)]  # fmt: skip
        known = [h for h in hops if example.decomposition[h - 1].support_title]
        return known, [h for h in hops if h not in known]

    def _oracle(
        self, owners: list[tuple[Asking, int]], k: int, search: Callable[[int], list[list[Hit]]]
    ) -> list[list[Hit]]:
        plans = []
        for batch, i in owners:
            example = batch.examples[i]
            known, unknown = self._picked(example)
            counts = batch.counts(i, self.mode, "all" if self.hops is None else list(self.hops))
            counts["searches"] += 1
            counts["unknown"] = unknown
            plans.append((example, known, counts))
        if self.mode == "withhold":
            titles = [{ex.decomposition[h - 1].support_title for h in known} for ex, known, _ in plans]
            extra = max((sum(map(len, self.corpus.rows_with_titles(sorted(t)))) for t in titles), default=0)
            found = search(k + extra)
            return [_withhold(hits, t, k, counts) for hits, t, (_, _, counts) in zip(found, titles, plans)]
        found = search(k)
        results = []
        for hits, (example, known, counts) in zip(found, plans):
            golds = [gold_passage(example, h, self.corpus) for h in known]
            counts["missing"] = [h for h, p in zip(known, golds) if p is None]
            results.append(_inject(hits, [p for p in golds if p is not None], k, counts))
        return results


def _withhold(hits: list[Hit], titles: set[str], k: int, counts: dict[str, Any]) -> list[Hit]:
    counts["withheld"] += sum(h.passage.title in titles for h in hits[:k])
    kept = [h for h in hits if h.passage.title not in titles][:k]
    return [Hit(h.passage, h.score, rank) for rank, h in enumerate(kept, start=1)]


def _inject(hits: list[Hit], golds: list[Passage], k: int, counts: dict[str, Any]) -> list[Hit]:
    distinct: dict[str, Passage] = {}
    for p in golds:  # distinct by id, the first kept
        distinct.setdefault(p.id, p)
    golds = list(distinct.values())
    shown = {h.passage.id for h in hits[:k]}
    counts["injected"] += sum(p.id not in shown for p in golds[:k])
    top = max((h.score for h in hits), default=0.0)
    ids = {p.id for p in golds}
    ranked = [(p, top) for p in golds] + [(h.passage, h.score) for h in hits if h.passage.id not in ids]
    return [Hit(p, score, rank) for rank, (p, score) in enumerate(ranked[:k], start=1)]


def oracle_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """metrics.json's `oracle/*` totals over the records an oracle searched for (none without an oracle): questions,
    searches, gold passages injected and hits withheld, and questions with a picked hop whose gold passage is
    unknown (no support title) or was not found (`missing`)."""
    done = [r["oracle"] for r in records if r.get("oracle")]
    if not done:
        return {}
    metrics = {"oracle/questions": float(len(done))}
    metrics.update({f"oracle/{key}": float(sum(d[key] for d in done)) for key in COUNTS})
    metrics["oracle/unknown_hops"] = float(sum(bool(d.get("unknown")) for d in done))
    metrics["oracle/missing_hops"] = float(sum(bool(d.get("missing")) for d in done))
    return metrics
