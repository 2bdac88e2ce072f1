"""Answer and retrieval metrics shared by every method (STYLE §3.2–3.3, PruneRAG EFR, TreeHop recall), the
ambiguous-question metrics of ASQA and AmbigDocs (TreeRare), CRAG's Acc / Hall / Miss / Score (its judges are
in `hoprag.evaluation.judges`), and a source router's classification metrics (PruningRAG)."""

from hoprag.metrics.aggregate import EvalRow, MetricSuite
from hoprag.metrics.ambiguous import QAReader, TransformersReader, answer_recall, disambig_f1, entity_recall, str_em
from hoprag.metrics.answer import (
    TokenScores,
    answer_contains,
    cover_em,
    exact_match,
    f1_score,
    normalize_answer,
    token_scores,
)
from hoprag.metrics.crag import Judge, crag_outcomes, parse_judgement, relative_gain
from hoprag.metrics.retrieval import (
    PassageRecall,
    aggregate_passage_recall,
    all_gold_retrieved,
    answer_in_top_k,
    answer_recall_at_k,
    evidence_forgetting_rate,
    has_answer,
    passage_hits,
    passage_recall,
    passage_recall_at_k,
    passages_read,
    token_overlap_match,
)
from hoprag.metrics.routing import macro_f1, routing_report

__all__ = [
    "EvalRow",
    "Judge",
    "MetricSuite",
    "PassageRecall",
    "QAReader",
    "TokenScores",
    "TransformersReader",
    "aggregate_passage_recall",
    "all_gold_retrieved",
    "answer_contains",
    "answer_in_top_k",
    "answer_recall",
    "answer_recall_at_k",
    "cover_em",
    "crag_outcomes",
    "disambig_f1",
    "entity_recall",
    "evidence_forgetting_rate",
    "exact_match",
    "f1_score",
    "has_answer",
    "macro_f1",
    "normalize_answer",
    "parse_judgement",
    "passage_hits",
    "passage_recall",
    "passage_recall_at_k",
    "passages_read",
    "relative_gain",
    "routing_report",
    "str_em",
    "token_overlap_match",
    "token_scores",
]
