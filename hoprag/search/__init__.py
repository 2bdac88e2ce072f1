"""LLM-driven search over reasoning structures.

Will hold PruneRAG's confidence-guided decomposition trees (spec/prunerag.md), TreeRare's
syntax-tree-guided bottom-up retrieval (spec/treerare.md) and Self-Correcting RAG's NLI-guided MCTS
over answers (spec/self_correcting_rag.md, phase II).
"""

from hoprag.search.mcts import AnswerSearch, MCTSConfig
from hoprag.search.prunerag import PruneTreeBuilder

__all__ = ["AnswerSearch", "MCTSConfig", "PruneTreeBuilder"]
