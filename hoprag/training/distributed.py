"""What a trainer's data needs to stay right on several devices (`trainer=ddp`, one process per device).

The batch in a config is the global one, the paper's (`device_batch` splits it over the devices and says so);
a cache is written whole or not at all, under a name no other process uses (`write_atomically`); what one rank
computes for all is handed to the others (`from_rank_zero`); evaluation sets are read whole by every rank
(`whole_set`), so every rank computes the same figures and checkpoint choice and early stopping agree.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sized
from pathlib import Path
from typing import IO, Any, TypeVar

import lightning as L
from lightning.pytorch.utilities import rank_zero_only
from torch.utils.data import DistributedSampler

from hoprag.utils.refusals import Refusal

T = TypeVar("T")


class UnevenBatch(Refusal, ValueError):
    """A global batch the devices cannot share evenly."""


@rank_zero_only
def report(message: str) -> None:
    """Print on global rank 0 only: every rank runs the same set-up, one line says what it did."""
    print(message)


def write_atomically(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """`write(file)` into a temporary beside `path` named for this process alone, then renamed onto `path`: a
    reader (another rank, a later run) finds the whole file or none, and two writers never share a temporary."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "xb") as f:
            write(f)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def device_batch(global_batch: int, trainer: L.Trainer | None, unit: str) -> int:
    """The per-device share of `global_batch` (the config's batch, what one step trains on over all devices),
    refused unless the devices divide it; said once at the start of training: "batch 64 trees = 8 devices × 8".
    Gradient accumulation multiplies on top, as on one device."""
    devices = trainer.world_size if trainer is not None else 1
    if global_batch % devices:
        raise UnevenBatch(f"batch_size={global_batch} {unit} is the global batch (one step, over all devices) and "
                         f"does not split evenly over {devices} devices: choose a multiple of {devices}, or a "
                         f"device count that divides {global_batch} (trainer.devices)")  # fmt: skip
    per_device = global_batch // devices
    accumulated = getattr(trainer, "accumulate_grad_batches", 1)
    steps = f", {accumulated} accumulated: {accumulated * global_batch} per optimizer step" if accumulated > 1 else ""
    report(f"batch {global_batch} {unit} = {devices} device{'s' if devices > 1 else ''} × {per_device}{steps}")
    return per_device


def from_rank_zero(trainer: L.Trainer | None, compute: Callable[[], T]) -> T:
    """`compute()` run on global rank 0 alone and its result handed to every rank (a collective: each rank calls
    this at the same point); a datamodule used without a trainer, or on one device, simply computes."""
    if trainer is None or trainer.world_size == 1:
        return compute()
    return trainer.strategy.broadcast(compute() if trainer.is_global_zero else None, src=0)


def whole_set(dataset: Sized) -> DistributedSampler:
    """All of `dataset`, in order, on every rank. Lightning leaves a `DistributedSampler` as it is, where it would
    shard an evaluation set and pad the shards with repeats; read whole, the set gives every rank the figures one
    device gives (the modules' cross-rank sums then change no ratio), at the cost of evaluating it on each."""
    return DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=False)
