"""QA methods: one class per file, registered by name, built from `conf/method/<name>.yaml`."""

from hoprag.methods.answer_extraction import AnswerExtractor, Extraction
from hoprag.methods.base import ChatPrompt, Method, MethodOutput, get, names, register
from hoprag.methods.no_retrieval import NoRetrieval
from hoprag.methods.standard_rag import StandardRAG

__all__ = [
    "AnswerExtractor",
    "ChatPrompt",
    "Extraction",
    "Method",
    "MethodOutput",
    "NoRetrieval",
    "StandardRAG",
    "get",
    "names",
    "register",
]
