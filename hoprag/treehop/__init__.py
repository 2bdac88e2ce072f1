"""TreeHop (spec/treehop.md): an embedding-level multi-hop query rewriter.

`TreeHop` is the update h = q − c + W_out·G(q, c); `module.TreeHopModule` and `data.TreeHopDataModule` train
it with InfoNCE on 2Wiki retrieval trees (`python train.py +model=treehop`; imported from their modules so
that using a trained TreeHop never imports Lightning); `tree_search` is the pruned Figure 3 inference loop
and `TreeHopRetriever` serves it as a retriever of any method (`retriever=treehop`).
"""

from hoprag.treehop.checkpoint import load_treehop
from hoprag.treehop.model import QMinusC, TreeHop
from hoprag.treehop.retriever import TreeHopRetriever
from hoprag.treehop.search import TreeResult, tree_search
from hoprag.treehop.trees import Tree, TreeNode, build_tree, build_trees

__all__ = [
    "QMinusC",
    "Tree",
    "TreeHop",
    "TreeHopRetriever",
    "TreeNode",
    "TreeResult",
    "build_tree",
    "build_trees",
    "load_treehop",
    "tree_search",
]
