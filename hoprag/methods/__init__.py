"""QA methods: one class per file, each built from `conf/method/<name>.yaml` (its `_target_`) and wiring its
engines by the one rule of conf/method/README.md."""

from hoprag.llm.prompts import ChatPrompt
from hoprag.methods.answer_extraction import AnswerExtractor, Extraction
from hoprag.methods.base import Method, MethodOutput
from hoprag.methods.cot import CoT
from hoprag.methods.hyde import HyDE
from hoprag.methods.ircot import IRCoT
from hoprag.methods.iter_retgen import IterRetGen
from hoprag.methods.mmr_rag import MMRRAG
from hoprag.methods.no_retrieval import NoRetrieval
from hoprag.methods.probtree import ProbTree
from hoprag.methods.prunerag import PruneRAG
from hoprag.methods.pruningrag import PruningRAG
from hoprag.methods.react import ReAct
from hoprag.methods.rrr import RRR
from hoprag.methods.sc_rag import SCRAG
from hoprag.methods.sc_rag_search import SCRAGSearch
from hoprag.methods.sc_rag_select import SCRAGSelect
from hoprag.methods.search_o1 import SearchO1
from hoprag.methods.self_ask import SelfAsk
from hoprag.methods.self_consistency import SelfConsistency
from hoprag.methods.self_rag import SelfRAG
from hoprag.methods.shortcut_probe import ShortcutProbe
from hoprag.methods.standard_rag import StandardRAG
from hoprag.methods.topk_rag import TopKRAG
from hoprag.methods.tot import ToT
from hoprag.methods.tree_retrieval import TreeRetrievalMethod
from hoprag.methods.treehop import TreeHopMethod
from hoprag.methods.treerare import TreeRare
from hoprag.methods.with_pruning import WithPruning

__all__ = [
    "AnswerExtractor",
    "ChatPrompt",
    "CoT",
    "Extraction",
    "HyDE",
    "IRCoT",
    "IterRetGen",
    "MMRRAG",
    "Method",
    "MethodOutput",
    "NoRetrieval",
    "ProbTree",
    "PruneRAG",
    "PruningRAG",
    "ReAct",
    "RRR",
    "SCRAG",
    "SCRAGSearch",
    "SCRAGSelect",
    "SelfRAG",
    "SearchO1",
    "SelfAsk",
    "SelfConsistency",
    "ShortcutProbe",
    "StandardRAG",
    "ToT",
    "TopKRAG",
    "TreeHopMethod",
    "TreeRare",
    "WithPruning",
    "TreeRetrievalMethod",
]
