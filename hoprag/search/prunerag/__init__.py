"""PruneRAG (spec/prunerag.md): confidence-guided query decomposition trees, built round by round for a
batch of questions, then aggregated into one answer per question."""

from hoprag.search.prunerag.aggregate import AGGREGATIONS, Aggregator, FinalAnswer, serialize
from hoprag.search.prunerag.builder import PruneTreeBuilder
from hoprag.search.prunerag.parsing import Decision, extract_boxed, parse_decision, span_confidence
from hoprag.search.prunerag.tree import Node, format_tree, tree_stats

__all__ = [
    "AGGREGATIONS",
    "Aggregator",
    "Decision",
    "FinalAnswer",
    "Node",
    "PruneTreeBuilder",
    "extract_boxed",
    "format_tree",
    "parse_decision",
    "serialize",
    "span_confidence",
    "tree_stats",
]
