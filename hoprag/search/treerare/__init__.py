"""TreeRare (spec/treerare.md): syntax-tree-guided retrieval and reasoning.

`tree` holds the parse-tree model and the node filter, `parsers` the spaCy dependency and Stanza
constituency parsers, `traversal` the level-batched QG → BM25 → SAG walk, `tree_retrieval` the LLM-free
variant, `prompts` and `parsing` the prompts and the readers of their replies.
"""

from hoprag.search.treerare.parsing import final_answer, parse_queries
from hoprag.search.treerare.traversal import NodeRecord, QuestionTree, TreeRareSearch
from hoprag.search.treerare.tree import KeptNode, SyntaxNode, SyntaxTree, from_bracketed, keep, prune
from hoprag.search.treerare.tree_retrieval import TreeRetrieval

__all__ = [
    "KeptNode",
    "NodeRecord",
    "QuestionTree",
    "SyntaxNode",
    "SyntaxTree",
    "TreeRareSearch",
    "TreeRetrieval",
    "final_answer",
    "from_bracketed",
    "keep",
    "parse_queries",
    "prune",
]
