"""Retrieval-only evaluation: one batched search per retriever, scored at several cut-offs.

Gold-passage recall matches retrieved titles against the question's supporting titles (micro over gold
titles, TreeHop's headline, and macro per question); answer-containment recall@k is DPR's top-k accuracy
(`hoprag.metrics.retrieval.has_answer`), beside FlashRAG's looser `retrieval_recall_top{k}`. All are
percentages with one decimal.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from hoprag.data.types import QAExample
from hoprag.metrics import aggregate_passage_recall, answer_recall_at_k, retrieval_recall_top_k
from hoprag.retrieval import Retriever


def _pct(x: float | None) -> float | None:
    return None if x is None else round(100 * x, 1)


def evaluate_retriever(examples: Sequence[QAExample], retriever: Retriever, ks: Sequence[int]) -> dict:
    start = time.perf_counter()
    hits = retriever.search([ex.question for ex in examples], max(ks))
    search_seconds = time.perf_counter() - start
    titles = [[h.passage.title for h in question] for question in hits]
    texts = [[h.passage.contents for h in question] for question in hits]
    gold_titles = [ex.supporting_titles for ex in examples]
    golds = [ex.answers for ex in examples]
    metrics: dict[str, float | int | None] = {}
    for k in ks:
        recall = aggregate_passage_recall(titles, gold_titles, k=k)
        metrics[f"retrieval/passage_recall@{k}"] = _pct(recall.micro)
        metrics[f"retrieval/passage_recall_macro@{k}"] = _pct(recall.macro)
        metrics[f"retrieval/answer_recall@{k}"] = _pct(answer_recall_at_k(texts, golds, k))
        metrics[f"retrieval/retrieval_recall_top{k}"] = _pct(retrieval_recall_top_k(texts, golds, k))
    metrics["retrieval/queries_per_second"] = round(len(examples) / search_seconds, 1)
    metrics["index/build_seconds"] = round(retriever.build_seconds, 2)
    metrics["index/from_cache"] = retriever.from_cache
    return metrics


def format_table(report: dict, ks: Sequence[int]) -> str:
    """A plain-text table, one row per retriever."""
    cols = [f"{c}@{k}" for c in ("P", "Pmacro", "A", "F") for k in ks] + ["build s", "q/s"]
    keys = (
        [f"retrieval/passage_recall@{k}" for k in ks]
        + [f"retrieval/passage_recall_macro@{k}" for k in ks]
        + [f"retrieval/answer_recall@{k}" for k in ks]
        + [f"retrieval/retrieval_recall_top{k}" for k in ks]
        + ["index/build_seconds", "retrieval/queries_per_second"]
    )
    header = f"{'retriever':<10}" + "".join(f"{c:>10}" for c in cols)
    lines = [
        f"{report['dataset']}: {report['questions']} questions, {report['corpus_passages']} passages, "
        f"embedder {report['embedder']}, index {report['index']}",
        "P = gold-passage recall (micro over gold titles), Pmacro = per question, A = answer-containment recall "
        "(DPR's token match), F = FlashRAG's retrieval_recall_top{k} (substring)",
        header,
        "-" * len(header),
    ]
    for name, metrics in report["results"].items():
        cells = "".join(f"{'-' if metrics[k] is None else metrics[k]:>10}" for k in keys)
        lines.append(f"{name:<10}{cells}")
    return "\n".join(lines)
