"""TF-IDF retrieval (scikit-learn, word 1–2-grams, 200k features): the official sparse side (spec §3)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hoprag.data.types import Passage
from hoprag.retrieval.retrievers import Hit, Retriever
from hoprag.retrieval.sparse import lexical_hits


class TfidfRetriever(Retriever):
    """Cosine of L2-normalised TF-IDF vectors of `title\\ntext`; fitted in memory at construction (it
    takes seconds on 100k passages, so it is not cached). `scores(query, rows)` scores chosen passages."""

    def __init__(
        self, corpus: Sequence[Passage], ngram_range: tuple[int, int] = (1, 2), max_features: int | None = 200_000
    ) -> None:
        from sklearn.feature_extraction.text import TfidfVectorizer  # here: scikit-learn takes 1.5 s to import

        super().__init__(corpus)
        self.vectorizer = TfidfVectorizer(ngram_range=tuple(ngram_range), max_features=max_features)
        self.matrix = self.vectorizer.fit_transform([p.contents for p in self.passages]).tocsr()
        self.row = {p.id: i for i, p in enumerate(self.passages)}

    def score_all(self, queries: Sequence[str]) -> np.ndarray:
        """(n_queries, n_passages) cosine scores."""
        return (self.vectorizer.transform(list(queries)) @ self.matrix.T).toarray()

    def scores(self, query: str, passages: Sequence[Passage]) -> np.ndarray:
        """Scores of given passages (ones outside the corpus are vectorised on the fly)."""
        rows = [self.row.get(p.id) for p in passages]
        if all(r is not None for r in rows):
            matrix = self.matrix[rows]
        else:
            matrix = self.vectorizer.transform([p.contents for p in passages])
        return (self.vectorizer.transform([query]) @ matrix.T).toarray().ravel()

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        k = min(k, len(self.passages))
        if k <= 0:
            return [[] for _ in queries]
        results = []
        for row in self.score_all(queries):
            top = np.argpartition(-row, k - 1)[:k] if k < len(row) else np.arange(len(row))
            top = top[np.lexsort((top, -row[top]))]  # score descending, corpus order on ties
            results.extend(self._ranked(lexical_hits(row[top][None], top[None])))  # a cosine of 0 shares no term
        return results
