"""TreeHop as a retriever of any method (`retriever=treehop`): the pruned tree search over a dense index.

`search(queries, k)` runs TreeHop@k for `n_hops` rounds and returns every passage kept, hop by hop, best
first within a hop: up to k·n_hops hits per query, not k (k is the per-hop top-K, as "TreeHop@5" names it).
As for any dense retriever, a hit is a real index row whatever its inner product; the -1 rows an
approximate index returns when it finds fewer than K are dropped by the tree search, never kept.
Without a checkpoint the update is the training-free `q − c`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import numpy as np
import torch

from hoprag.data.corpus_store import Corpus
from hoprag.data.types import Passage
from hoprag.retrieval.dense import DenseIndex
from hoprag.retrieval.retrievers import DenseRetriever, Hit, Retriever
from hoprag.treehop.checkpoint import load_treehop
from hoprag.treehop.model import TreeHop
from hoprag.treehop.search import Step, TreeResult, tree_search

log = logging.getLogger(__name__)


def passage_vectors(index: DenseIndex) -> np.ndarray:
    """The indexed passage vectors (TreeHop feeds them to its update): the saved embeddings, else
    reconstructed from the index, which only exact (Flat) indexes can do faithfully."""
    if index.embeddings is not None:
        return np.asarray(index.embeddings, dtype=np.float32)
    try:
        return index.cpu_index().reconstruct_n(0, index.ntotal)
    except RuntimeError as err:
        raise ValueError(
            f"cannot read the passage vectors back from a {index.manifest.get('faiss_factory')} index: "
            "set index.save_embeddings=true"
        ) from err


def model_step(model: torch.nn.Module) -> Step:
    """A torch update (TreeHop, or anything mapping (q, c) → next query) as tree search's numpy step, run on
    the device the model's weights are on (the vectors go there and come back)."""
    device = next(model.parameters(), torch.empty(0)).device

    def tensor(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(x)).to(device)

    @torch.no_grad()
    def step(q: np.ndarray, c: np.ndarray) -> np.ndarray:
        return model(tensor(q), tensor(c)).cpu().numpy()

    return step


def q_minus_c(q: np.ndarray, c: np.ndarray) -> np.ndarray:
    return q - c


class TreeHopRetriever(Retriever):
    """`dense` is a DenseRetriever over the same corpus (or a factory called with `corpus=`); `ckpt` a
    TreeHop export folder, `treehop.pt` or Lightning checkpoint trained with the dense retriever's embedder,
    run on `device` (None: the embedder's `device`, else "auto": the GPU when torch sees one)."""

    def __init__(
        self,
        corpus: Corpus | Sequence[Passage],
        dense: Callable[..., DenseRetriever] | DenseRetriever,
        ckpt: str | None = None,
        n_hops: int = 2,
        redundancy_pruning: bool = True,
        layerwise_topk: bool = True,
        official_rank_quirk: bool = False,
        device: str | None = None,
    ) -> None:
        super().__init__(corpus)
        self.dense = dense if isinstance(dense, DenseRetriever) else dense(corpus=self.corpus)
        if self.dense.corpus is not self.corpus and self.dense.corpus.fingerprint != self.corpus.fingerprint:
            raise ValueError("the dense retriever was built over another corpus than the TreeHop retriever")
        self.embedder = self.dense.embedder
        self.vectors = passage_vectors(self.dense.index)
        self.model: TreeHop | None = None
        if ckpt:
            self.model, _ = load_treehop(ckpt, self.embedder, device or getattr(self.embedder, "device", "auto"))
        else:
            log.warning("TreeHopRetriever without a checkpoint: using the training-free q - c update")
        self.step: Step = model_step(self.model) if self.model is not None else q_minus_c
        self.n_hops = n_hops
        self.options = {
            "redundancy_pruning": redundancy_pruning,
            "layerwise_topk": layerwise_topk,
            "official_rank_quirk": official_rank_quirk,
        }
        self.build_seconds = self.dense.build_seconds
        self.from_cache = self.dense.from_cache

    def index_search(self, vectors: np.ndarray, owners: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """One FAISS search for all live branches of all questions."""
        self.dense.calls += len(vectors)
        return self.dense.index.search(vectors, k)

    def tree(self, query_vectors: np.ndarray, k: int, n_hops: int | None = None, step: Step | None = None) -> list[TreeResult]:
        """Tree search from encoded questions; `step` overrides the update (e.g. q − c for a comparison)."""
        hops = n_hops or self.n_hops
        return tree_search(
            query_vectors, self.vectors, self.index_search, step or self.step if hops > 1 else None, k, hops,
            **self.options,
        )  # fmt: skip

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        results = self.tree(self.embedder.encode_queries(queries), k)
        return self._ranked(
            [[(row, s) for rows, scores in zip(r.hops, r.scores) for row, s in zip(rows, scores)] for r in results]
        )
