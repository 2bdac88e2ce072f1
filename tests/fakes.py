"""Test doubles shared by several test modules (a scripted LLM lives in the package: hoprag.llm.ScriptedLLM)."""

from __future__ import annotations

import re

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
