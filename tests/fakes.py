"""Test doubles shared by several test modules (a scripted LLM lives in the package: hoprag.llm.ScriptedLLM)."""

from __future__ import annotations

import hashlib
import re

import numpy as np

from hoprag.llm import ScriptedLLM
from hoprag.methods.base import Method, MethodOutput
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.retrievers import Hit, Retriever


class KeywordRetriever(Retriever):
    """Ranks passages by words shared with the query (ties in corpus order); records every batch searched."""

    def __init__(self, corpus):
        super().__init__(corpus)
        self.batches: list[list[str]] = []

    def _search(self, queries, k):
        self.batches.append(queries)
        results = []
        for query in queries:
            words = set(re.findall(r"\w+", query.lower()))
            overlap = [len(words & set(re.findall(r"\w+", p.contents.lower()))) for p in self.passages]
            order = sorted(range(len(self.passages)), key=lambda i: (-overlap[i], i))[:k]
            results.append([Hit(self.passages[i], float(overlap[i]), r) for r, i in enumerate(order, 1)])
        return results


class HashEmbedder(Embedder):
    """Bag of words hashed into `dim` buckets; records the size of every encode call."""

    def __init__(self, name: str = "hash-bow", dim: int = 64, devices: None = None, **kwargs) -> None:
        assert devices is None, "a hashing embedder has no devices to spread over"  # a model embedder's config key
        super().__init__(name=name, model="test://hash-bow", **kwargs)
        self.dim = dim
        self.calls: list[int] = []

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out


class Replies(Method):
    """Answers each question with the reply given for its id (runs scored without a model)."""

    name = "replies"
    needs_retriever = False

    def __init__(self, replies: dict[str, str]) -> None:
        super().__init__(ScriptedLLM())
        self.replies = replies

    def answer(self, examples, costs):
        return [MethodOutput(self.replies[ex.id]) for ex in examples]
