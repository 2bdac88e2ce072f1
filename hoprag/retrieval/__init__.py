"""Retrieval: embedders, dense (FAISS) and BM25 indexes, rank fusion, rerankers, and the `Retriever` interface."""

from hoprag.retrieval.dense import DenseIndex
from hoprag.retrieval.embedders import Embedder, FlagEmbedder, SentenceTransformerEmbedder
from hoprag.retrieval.fingerprint import corpus_fingerprint
from hoprag.retrieval.fusion import reciprocal_rank_fusion
from hoprag.retrieval.manifest import IndexMismatchError
from hoprag.retrieval.rerankers import CrossEncoderReranker, EmbeddingReranker, NoReranker, Reranker
from hoprag.retrieval.retrievers import BM25Retriever, DenseRetriever, FusionRetriever, Hit, Retriever
from hoprag.retrieval.sparse import BM25Index

__all__ = [
    "BM25Index",
    "BM25Retriever",
    "CrossEncoderReranker",
    "DenseIndex",
    "DenseRetriever",
    "Embedder",
    "EmbeddingReranker",
    "FlagEmbedder",
    "FusionRetriever",
    "Hit",
    "IndexMismatchError",
    "NoReranker",
    "Reranker",
    "Retriever",
    "SentenceTransformerEmbedder",
    "corpus_fingerprint",
    "reciprocal_rank_fusion",
]
