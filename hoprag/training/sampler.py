"""Training samplers: length-grouped batches (little compute goes to padding, which on a CPU is most of the speed)
and a fresh draw of part of the set each epoch; both as Lightning shards them under DDP (hoprag.training.distributed).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import torch
from torch.utils.data import BatchSampler, DistributedSampler, RandomSampler, Sampler


class LengthGroupedSampler(BatchSampler):
    """Batches of similar length: shuffle, cut into pools of `pool` batches, sort each pool, shuffle the batches.

    A `BatchSampler`, so that under DDP Lightning rebuilds it with its `DistributedSampler` as `sampler`, which here
    only says which share is this rank's: every rank makes the epoch's batches over the whole set alike (same seed)
    and takes every n-th, so one step's batches, one per device, are consecutive batches of the one-device order;
    every rank takes as many (the first batches again where their count does not divide)."""

    def __init__(
        self, lengths: Sequence[int], batch_size: int, pool: int = 50, seed: int = 0,
        sampler: DistributedSampler | None = None,
    ) -> None:  # fmt: skip
        super().__init__(range(len(lengths)) if sampler is None else sampler, batch_size, drop_last=False)
        self.lengths, self.pool, self.seed = list(lengths), pool, seed
        self.epoch = 0

    def _share(self) -> tuple[int, int]:
        """(this rank, ranks)."""
        if isinstance(self.sampler, DistributedSampler):
            return self.sampler.rank, self.sampler.num_replicas
        return 0, 1

    def __iter__(self) -> Iterator[list[int]]:
        rng = random.Random(self.seed + self.epoch)
        self.epoch += 1
        order = list(range(len(self.lengths)))
        rng.shuffle(order)
        size = self.batch_size * self.pool
        batches = []
        for start in range(0, len(order), size):
            chunk = sorted(order[start : start + size], key=self.lengths.__getitem__)
            batches += [chunk[i : i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
        rng.shuffle(batches)
        rank, ranks = self._share()
        return iter([batches[i % len(batches)] for i in range(rank, len(self) * ranks, ranks)])

    def __len__(self) -> int:
        batches = -(-len(self.lengths) // self.batch_size)
        return -(-batches // self._share()[1])


class EpochDraw(Sampler[int]):
    """`num_samples` of `size` indices drawn without replacement, anew each epoch (a seeded `RandomSampler`'s draws).

    Not itself a `RandomSampler`: under DDP Lightning wraps it (each rank takes its share of the same draw) rather
    than replacing it with a `DistributedSampler` over the whole set, which would drop `num_samples`."""

    def __init__(self, size: int, num_samples: int, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.draw = RandomSampler(range(size), num_samples=num_samples, generator=generator)

    def __iter__(self) -> Iterator[int]:
        return iter(self.draw)

    def __len__(self) -> int:
        return len(self.draw)
