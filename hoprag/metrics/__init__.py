"""Answer and retrieval metrics shared by every method (STYLE §3.2–3.3, PruneRAG EFR, TreeHop recall), and
the ambiguous-question metrics of ASQA and AmbigDocs (TreeRare)."""

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

__all__ = [
    "EvalRow",
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
    "disambig_f1",
    "entity_recall",
    "evidence_forgetting_rate",
    "exact_match",
    "f1_score",
    "has_answer",
    "normalize_answer",
    "passage_hits",
    "passage_recall",
    "passage_recall_at_k",
    "passages_read",
    "str_em",
    "token_overlap_match",
    "token_scores",
]
