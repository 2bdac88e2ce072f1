"""FlashRAG's prebuilt dense indexes (wiki-18 with e5-base-v2: `e5_Flat.index` + `wiki18_100w.jsonl`), searched
as they are: no re-encoding of 21M passages.

FlashRAG's layout is one FAISS file whose row i is line i of the corpus JSONL `{id, contents}`, and nothing
about how the vectors were made. The retriever config says it (`built_with`: model and pooling); that
declaration plus the file's dimension and size is the index's manifest, checked like a built index's
against the query embedder, so queries encoded by another model are refused instead of silently
searching the wrong space.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss

from hoprag.data.corpus_store import Corpus
from hoprag.data.types import Passage
from hoprag.paths import data_root
from hoprag.retrieval.dense import KIND, DenseIndex
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.manifest import IndexMismatchError, check_manifest, new_manifest
from hoprag.retrieval.retrievers import DenseRetriever, Retriever


class PrebuiltDenseRetriever(DenseRetriever):
    """A `DenseRetriever` over a FAISS file built elsewhere (FlashRAG), for `corpus` in the file's row order.

    `index_path` is absolute or under `root` (the data root). `built_with` names the `model` the passages
    were encoded with and, optionally, its `pooling` ("mean" for FlashRAG's e5); the embedder must match
    both and the index's dimension, and the corpus must have one passage per row.
    """

    def __init__(
        self,
        corpus: Corpus | Sequence[Passage],
        embedder: Embedder,
        index_path: str | None = None,
        built_with: Mapping[str, Any] | None = None,
        root: str | None = None,
        nprobe: int | None = None,
        ef_search: int | None = None,
        use_gpu: bool | str = "auto",
        batch_size: int = 64,
    ) -> None:
        if index_path is None or not built_with or "model" not in built_with:
            raise ValueError(
                "a prebuilt index needs retriever.index_path (its FAISS file) and retriever.built_with.model "
                "(the embedding model its passages were encoded with, e.g. intfloat/e5-base-v2)"
            )
        Retriever.__init__(self, corpus)  # not DenseRetriever's: nothing is built or cached here
        self.embedder = embedder
        self.batch_size = batch_size
        path = Path(index_path) if Path(index_path).is_absolute() else data_root(root) / index_path
        if not path.is_file():
            raise FileNotFoundError(f"no prebuilt FAISS index at {path}")
        index = faiss.read_index(str(path))
        if index.ntotal != len(self.passages):
            raise IndexMismatchError(
                f"the prebuilt index {path} holds {index.ntotal} vectors but the corpus has {len(self.passages)} "
                "passages: it was built over another corpus file (row i of the index is line i of the corpus)"
            )
        manifest = new_manifest(KIND, **built_with, dim=index.d, num_passages=index.ntotal, index_file=str(path))
        expected: dict[str, Any] = {"model": embedder.model, "dim": embedder.dim}
        if "pooling" in built_with:
            expected["pooling"] = embedder.pooling
        pooling = f" ({built_with['pooling']} pooling)" if "pooling" in built_with else ""
        check_manifest(
            path,
            manifest,
            expected,
            fix=f"its passages were encoded with {built_with['model']}{pooling}: query it with that embedder "
            "(e.g. embedder=e5_base for FlashRAG's e5 index), or correct retriever.built_with",
        )
        manifest["build_seconds"] = 0.0
        self.index = DenseIndex(index, self._ids, manifest, ef_search=ef_search, nprobe=nprobe, use_gpu=use_gpu)
        self.index_dir = path.parent
        self.from_cache = True
        self.build_seconds = 0.0

    def _ids(self) -> list[str]:
        """The corpus's ids in row order: read only if something asks the index for them (21M strings)."""
        return [p.id for p in self.corpus]
