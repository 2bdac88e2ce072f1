"""Where a FAISS index lives (`index.use_gpu`): the CPU, one GPU, or sharded over every visible GPU, decided for
this machine and refused clearly where FAISS cannot honour it (faiss-cpu, no GPU, a GPU number past the last);
`auto` and `auto:shard` fall back to the CPU instead, saying why."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

import faiss

log = logging.getLogger(__name__)

_gpu_resources: Any = None


PLACEMENTS = "auto, auto:shard, cpu, gpu, gpu:<n> or shard"
_PLACEMENT = re.compile(r"(auto:shard|auto|cpu|shard)|gpu(?::(\d+))?")


@dataclass(frozen=True)
class Placement:
    """Where a FAISS index searches (`index.use_gpu`): "cpu"; "gpu" (one GPU, number `gpu`); "shard" (its
    vectors split over every visible GPU, FAISS's IndexShards: an index too big for one GPU's memory). `why`
    says why an automatic choice fell back to the CPU."""

    where: str
    gpu: int = 0
    why: str = field(default="", compare=False)

    @property
    def on_gpu(self) -> bool:
        return self.where != "cpu"

    def __str__(self) -> str:
        return f"gpu:{self.gpu}" if self.where == "gpu" else self.where


def placement(use_gpu: bool | str) -> Placement:
    """`index.use_gpu` decided for this machine: "auto" is GPU 0 and "auto:shard" every GPU (sharded) when FAISS
    has GPU support and sees a GPU, else the CPU (with `why`); true / "gpu" / "gpu:<n>" and "shard" are GPU
    placements, refused (RuntimeError naming the fix) where FAISS cannot honour them; false / "cpu" is the CPU.
    Anything else is refused (ValueError)."""
    value = ("gpu" if use_gpu else "cpu") if isinstance(use_gpu, bool) else str(use_gpu)
    match = _PLACEMENT.fullmatch(value)
    if match is None:
        raise ValueError(f"index.use_gpu={use_gpu!r}: choose {PLACEMENTS}")
    asked = Placement(match.group(1) or "gpu", int(match.group(2) or 0))
    if asked.where == "cpu":
        return asked
    missing = _missing_gpu(asked.gpu if asked.where == "gpu" else None)
    if asked.where.startswith("auto"):
        return Placement("cpu", why=missing) if missing else Placement("shard" if value == "auto:shard" else "gpu")
    if missing:
        raise RuntimeError(f"index.use_gpu={value}: {missing}; set index.use_gpu=cpu or auto")
    return asked


def _missing_gpu(gpu: int | None) -> str | None:
    """Why FAISS cannot place an index on GPU `gpu` (None: on any GPU), or None when it can."""
    if not hasattr(faiss, "StandardGpuResources"):
        return ("the installed FAISS has no GPU support (faiss-cpu): pip uninstall faiss-cpu, then "
                "pip install -c constraints-gpu.txt -e '.[faiss-gpu]'")
    visible = faiss.get_num_gpus()
    if visible == 0:
        return "FAISS sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)"
    if gpu is not None and gpu >= visible:
        return f"FAISS sees {visible} GPU(s), numbered 0 to {visible - 1}"
    return None


def _gpu_resources_once() -> Any:
    global _gpu_resources
    if _gpu_resources is None:
        _gpu_resources = faiss.StandardGpuResources()
    return _gpu_resources


def to_gpu(index: faiss.Index, where: Placement, faiss_factory: str) -> faiss.Index:
    """A GPU copy of `index` as `where` says: on one GPU, or sharded over every visible GPU (each holds a
    slice of the vectors; a search asks them all and merges). IVF-PQ computes in float16 on the GPU, which
    FAISS needs for the many sub-quantizers of PQ64. RuntimeError for a type FAISS has no GPU version of (HNSW)."""
    if where.where == "shard":
        options = faiss.GpuMultipleClonerOptions()
        options.shard = True
        options.useFloat16 = "PQ" in faiss_factory
        return faiss.index_cpu_to_all_gpus(index, options)
    options = faiss.GpuClonerOptions()
    options.useFloat16 = "PQ" in faiss_factory
    return faiss.index_cpu_to_gpu(_gpu_resources_once(), where.gpu, index, options)


def _gpu_builder(index: faiss.Index, faiss_factory: str, where: Placement) -> faiss.Index | None:
    """A GPU copy of an untrained `index` to train and fill (IVF k-means and assignment are where a GPU
    pays), or None: a CPU placement, or a type FAISS has no GPU version of (HNSW). One GPU trains: the
    placement's, or GPU 0 for "shard" (the finished index is sharded when it is placed)."""
    if not where.on_gpu or index.is_trained:
        return None
    try:
        return to_gpu(index, Placement("gpu", where.gpu), faiss_factory)
    except RuntimeError as err:
        log.warning("training the %s index on CPU: %s", faiss_factory, err)
        return None
