"""Length-grouped training batches: little compute goes to padding, which on a CPU is most of the speed."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

from torch.utils.data import Sampler


class LengthGroupedSampler(Sampler[list[int]]):
    """Batches of similar length: shuffle, cut into pools of `pool` batches, sort each pool, shuffle the batches."""

    def __init__(self, lengths: Sequence[int], batch_size: int, pool: int = 50, seed: int = 0) -> None:
        self.lengths, self.batch_size, self.pool, self.seed = list(lengths), batch_size, pool, seed
        self.epoch = 0

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
        return iter(batches)

    def __len__(self) -> int:
        return -(-len(self.lengths) // self.batch_size)
