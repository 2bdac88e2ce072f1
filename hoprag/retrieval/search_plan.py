"""How much memory a dense index takes and where it will search, said before it is built or loaded: what the
paper tables' preflight states for each dense index a job searches (wiki-18: 60 GiB as Flat, 2.1 GiB as
`index=wiki18`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import faiss

from hoprag.retrieval.dense import adapt_factory
from hoprag.retrieval.faiss_placement import placement


def footprint(factory: str, dim: int, num_vectors: int) -> int:
    """Bytes a `factory` index over `num_vectors` vectors of `dim` holds: an IVF's codes and ids plus its coarse
    quantizer (centroids, and an HNSW quantizer's links), an HNSW graph's vectors and links, or the codes of a
    flat-codes index (Flat: 4 x dim)."""
    index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        quantizer = faiss.downcast_index(ivf.quantizer)
        links = quantizer.hnsw.nb_neighbors(0) if hasattr(quantizer, "hnsw") else 0
        return num_vectors * (ivf.code_size + 8) + ivf.nlist * (4 * dim + 4 * links)
    typed = faiss.downcast_index(index)  # a view: `index` keeps owning the C++ object
    if hasattr(typed, "hnsw"):
        return num_vectors * (typed.storage.sa_code_size() + 4 * typed.hnsw.nb_neighbors(0))
    return num_vectors * typed.sa_code_size()


@dataclass(frozen=True)
class SearchPlan:
    """Where a dense index will search and what it holds there: `gpus` the GPUs it is placed on (none: the CPU),
    `each` the bytes each of them holds (on the CPU: the whole index, `resident` False when memory-mapped, paged
    in as searched), `text` the one line a person reads."""

    text: str
    each: int
    gpus: tuple[int, ...] = ()
    resident: bool = True

    def __str__(self) -> str:
        return self.text


def search_plan(settings: dict[str, Any], dim: int, num_passages: int) -> SearchPlan:
    """Where a dense index of `settings` (`DEFAULT_INDEX` keys) over `num_passages` vectors of `dim` will search on
    this machine and the memory that needs: what the paper tables' preflight states before a run."""
    size = footprint(adapt_factory(settings["factory"], min(num_passages, settings["train_size"])), dim, num_passages)
    gib = size / 2**30
    where = placement(settings["use_gpu"])
    refine = (f"; re-ranks {settings['refine']} x k candidates with exact vectors read from the shards"
              if settings["refine"] is not None else "")  # fmt: skip
    if where.where == "shard":
        gpus = faiss.get_num_gpus()
        text = f"sharded over {gpus} GPU(s): {gib / gpus:.1f} GiB of GPU memory each ({gib:.1f} GiB in all){refine}"
        return SearchPlan(text, -(-size // gpus), tuple(range(gpus)))
    if where.on_gpu:
        return SearchPlan(f"on GPU {where.gpu}: {gib:.1f} GiB of GPU memory{refine}", size, (where.gpu,))
    fallback = f" ({where.why})" if where.why else ""
    if settings["mmap"]:
        text = (f"on the CPU{fallback}, memory-mapped: {gib:.1f} GiB on disk, paged in as searched (at most that "
                f"much resident){refine}")  # fmt: skip
        return SearchPlan(text, size, resident=False)
    return SearchPlan(f"on the CPU{fallback}, read whole: {gib:.1f} GiB of memory{refine}", size)
