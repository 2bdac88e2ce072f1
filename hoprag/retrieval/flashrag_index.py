"""FlashRAG's prebuilt dense indexes (wiki-18 with e5-base-v2: `e5_Flat.index` + `wiki18_100w.jsonl`), searched
as they are, or converted once into a compressed index: no re-encoding of 21M passages either way.

FlashRAG's layout is one FAISS file whose row i is line i of the corpus JSONL `{id, contents}`, and nothing
about how the vectors were made. The retriever config says it (`built_with`: model and pooling); that
declaration plus the file's dimension and size is the index's manifest, checked like a built index's
against the query embedder, so queries encoded by another model are refused instead of silently
searching the wrong space.

With `index.factory` Flat the file itself is searched, read whole or with `index.mmap` mapped (open in seconds;
a Flat search still pages in the whole file). Any other factory (`index=wiki18`) converts the file once: its rows
are copied into shards (`FlatFileVectors` stands in for the embedder of `build_dense`, so the conversion resumes
shard by shard like an encoding) and the index is built from them; later runs load the converted index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from hoprag.data.corpus_store import Corpus
from hoprag.data.types import Passage
from hoprag.paths import data_root
from hoprag.retrieval.dense import KIND, DenseIndex, read_index
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.exact_rows import RowFile
from hoprag.retrieval.index_dirs import DEFAULT_INDEX, build_settings, dense_index_dir
from hoprag.retrieval.manifest import IndexMismatchError, check_manifest, new_manifest
from hoprag.retrieval.retrievers import DenseRetriever, Retriever
from hoprag.retrieval.shards import BuildResult, build_dense


def flat_rows(path: Path, index: faiss.Index) -> RowFile:
    """The float32 rows of a FAISS Flat file, which FAISS writes last: read by row, never the whole file."""
    flat = faiss.downcast_index(index)
    if not isinstance(flat, faiss.IndexFlat):
        raise IndexMismatchError(f"{path} is a {type(flat).__name__}: only a Flat index keeps the vectors to convert")
    rows = RowFile(path, path.stat().st_size - 4 * flat.d * flat.ntotal, flat.ntotal, flat.d, np.float32)
    if flat.ntotal and not np.array_equal(rows.read([0])[0], flat.reconstruct(0)):
        raise IndexMismatchError(f"{path}: its vectors are not where a FAISS Flat file keeps them (at its end)")
    return rows


class FlatFileVectors(Embedder):
    """A prebuilt Flat file's rows handed out as the passage vectors of `corpus` (row i is passage i): the
    "embedder" through which `build_dense` converts the file into shards and any index type. It encodes no query;
    without a corpus it only names the conversion (`conversion_dir`)."""

    def __init__(self, path: Path, index: faiss.Index, built_with: Mapping[str, Any], corpus: Corpus | None) -> None:
        super().__init__(name=f"flashrag-{Path(built_with['model']).name}", model=built_with["model"], normalize=False)
        self.pooling = built_with.get("pooling")
        self.dim = index.d
        self._rows = flat_rows(path, index)
        self._corpus = corpus
        self._source = {**built_with, "index_file": path.name, "index_bytes": path.stat().st_size}

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), **self._source}

    def encode_passages(self, passages: Sequence[Passage], batch_size: int | None = None) -> np.ndarray:
        if self._corpus is None:
            raise ValueError("FlatFileVectors was made without its corpus: it names a conversion, it converts none")
        return self._rows.read(self._corpus.rows_of([p.id for p in passages]))


def prebuilt_path(index_path: str, root: str | None) -> Path:
    """The prebuilt FAISS file: `index_path` itself when absolute, else under the data root."""
    path = Path(index_path) if Path(index_path).is_absolute() else data_root(root) / index_path
    if not path.is_file():
        raise FileNotFoundError(f"no prebuilt FAISS index at {path}")
    return path


def conversion_dir(path: Path, built_with: Mapping[str, Any], index: Mapping[str, Any], cache_dir: str,
                   fingerprint: str) -> Path | None:
    """Where the conversion of the Flat file at `path` into `index` (dense index settings) for the corpus
    `fingerprint` lives, the directory `convert` writes and later runs load: named from the file opened mapped,
    no vector read but the first (the preflight's check that a conversion exists)."""
    vectors = FlatFileVectors(path, read_index(path, mmap=True), built_with, corpus=None)
    return dense_index_dir(cache_dir, vectors, fingerprint, build_settings({**DEFAULT_INDEX, **index}))


def check_rows(path: Path, prebuilt: faiss.Index, num_passages: int) -> None:
    if prebuilt.ntotal != num_passages:
        raise IndexMismatchError(
            f"the prebuilt index {path} holds {prebuilt.ntotal} vectors but the corpus has {num_passages} "
            "passages: it was built over another corpus file (row i of the index is line i of the corpus)"
        )


def convert(
    corpus: Corpus,
    path: Path,
    prebuilt: faiss.Index,
    built_with: Mapping[str, Any],
    index: Mapping[str, Any],
    cache_dir: str,
    **build: Any,
) -> tuple[BuildResult, FlatFileVectors]:
    """Convert the Flat file at `path` (`prebuilt`, opened mapped) into the index `index` describes, through shards
    (`build_dense` with its `build` options: shard size and dtype, worker, merge, force): a rerun resumes at the
    first missing shard, and a finished conversion is found, not redone."""
    vectors = FlatFileVectors(path, prebuilt, built_with, corpus)
    return build_dense(corpus, vectors, cache_dir, index, **build), vectors


class PrebuiltDenseRetriever(DenseRetriever):
    """A `DenseRetriever` over a FAISS file built elsewhere (FlashRAG), for `corpus` in the file's row order.

    `index_path` is absolute or under `root` (the data root). `built_with` names the `model` the passages
    were encoded with and, optionally, its `pooling` ("mean" for FlashRAG's e5); the embedder must match
    both and the index's dimension, and the corpus must have one passage per row. `index` takes the dense index
    settings: with a factory other than Flat the file is converted once under `cache_dir` (module docstring).
    """

    def __init__(
        self,
        corpus: Corpus | Sequence[Passage],
        embedder: Embedder,
        index_path: str | None = None,
        built_with: Mapping[str, Any] | None = None,
        root: str | None = None,
        index: Mapping[str, Any] | None = None,
        cache_dir: str | None = None,
        force: bool = False,
        batch_size: int = 64,
    ) -> None:
        if index_path is None or not built_with or "model" not in built_with:
            raise ValueError(
                "a prebuilt index needs retriever.index_path (its FAISS file) and retriever.built_with.model "
                "(the embedding model its passages were encoded with, e.g. intfloat/e5-base-v2)"
            )
        Retriever.__init__(self, corpus)  # not DenseRetriever's: nothing is encoded here
        self.embedder = embedder
        self.batch_size = batch_size
        settings = {**DEFAULT_INDEX, **(index or {})}
        path = prebuilt_path(index_path, root)
        converting = settings["factory"] != "Flat"
        prebuilt = read_index(path, mmap=settings["mmap"] or converting)
        manifest = self._checked(path, prebuilt, built_with)
        search = {"ef_search": settings["ef_search"], "nprobe": settings["nprobe"], "use_gpu": settings["use_gpu"]}
        if converting:
            self._convert(path, prebuilt, built_with, settings, cache_dir, force, search)
            return
        manifest["build_seconds"] = 0.0
        self.index = DenseIndex(prebuilt, self._ids, manifest, **search)
        self.index_dir = path.parent
        self.from_cache = True
        self.build_seconds = 0.0

    def _checked(self, path: Path, prebuilt: faiss.Index, built_with: Mapping[str, Any]) -> dict[str, Any]:
        """The file's manifest (what `built_with` declares, its dimension and size), checked against the query
        embedder and the corpus."""
        check_rows(path, prebuilt, len(self.passages))
        manifest = new_manifest(KIND, **built_with, dim=prebuilt.d, num_passages=prebuilt.ntotal, index_file=str(path))
        expected: dict[str, Any] = {"model": self.embedder.model, "dim": self.embedder.dim}
        if "pooling" in built_with:
            expected["pooling"] = self.embedder.pooling
        pooling = f" ({built_with['pooling']} pooling)" if "pooling" in built_with else ""
        check_manifest(
            path,
            manifest,
            expected,
            fix=f"its passages were encoded with {built_with['model']}{pooling}: query it with that embedder "
            "(e.g. embedder=e5_base for FlashRAG's e5 index), or correct retriever.built_with",
        )
        return manifest

    def _convert(
        self,
        path: Path,
        prebuilt: faiss.Index,
        built_with: Mapping[str, Any],
        settings: Mapping[str, Any],
        cache_dir: str | None,
        force: bool,
        search: Mapping[str, Any],
    ) -> None:
        """Load the file's conversion into `settings`' index type, converting it first if no run has."""
        if cache_dir is None:
            raise ValueError(f"converting {path} into index.factory={settings['factory']} needs a cache_dir")
        built, vectors = convert(self.corpus, path, prebuilt, built_with, settings, cache_dir, force=force)
        self.index = DenseIndex.load(built.index_dir, vectors, self.corpus.fingerprint, factory=settings["factory"],
                                     **search, mmap=settings["mmap"], refine=settings["refine"])  # fmt: skip
        self.index_dir = built.index_dir
        self.from_cache = built.state == "cached"
        self.build_seconds = self.index.build_seconds

    def _ids(self) -> list[str]:
        """The corpus's ids in row order: read only if something asks the index for them (21M strings)."""
        return [p.id for p in self.corpus]
