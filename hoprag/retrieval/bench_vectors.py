"""Vectors shaped like real embeddings at any scale, for benchmarking indexes where no real wiki-18 embeddings fit:
a mixture fitted to real embeddings (k-means components, each a Gaussian with its own principal directions),
sampled and lifted to a wider dimension by one random rotation, row by row reproducibly, with a corpus of bare ids
for `build_dense` to stream past them (scripts/bench/bench_wiki_index.py)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import faiss
import numpy as np

from hoprag.data.types import Passage
from hoprag.retrieval.embedders import Embedder

BLOCK = 4096  # synthetic rows drawn together (one random stream per block: the same rows whoever asks)


def fit_mixture(vectors: np.ndarray, components: int, rank: int, seed: int) -> dict[str, np.ndarray]:
    """A mixture of Gaussians fitted to `vectors`: k-means components, each with its weight, mean, `rank`
    principal directions (with their standard deviations) and the residual spread of the other directions."""
    kmeans = faiss.Kmeans(vectors.shape[1], components, niter=25, seed=seed)
    kmeans.train(vectors)
    _, assigned = kmeans.index.search(vectors, 1)
    weights, means, axes, spreads, rests = [], [], [], [], []
    for c in range(components):
        members = vectors[assigned[:, 0] == c]
        if len(members) < 2:
            continue
        centred = members - members.mean(axis=0)
        _, sing, vt = np.linalg.svd(centred, full_matrices=False)
        std = sing / math.sqrt(len(members) - 1)
        kept = min(rank, len(std))
        weights.append(len(members))
        means.append(members.mean(axis=0))
        axes.append(np.pad(vt[:kept], ((0, rank - kept), (0, 0))))
        spreads.append(np.pad(std[:kept], (0, rank - kept)))
        rests.append(math.sqrt(float((std[kept:] ** 2).sum()) / vectors.shape[1]))
    w = np.asarray(weights, np.float64)
    return {"weights": w / w.sum(), "means": np.stack(means), "axes": np.stack(axes), "spreads": np.stack(spreads),
            "rests": np.asarray(rests)}  # fmt: skip


class Lift:
    """Source vectors into `dim` dimensions: [x, noise] turned by one random rotation, normalised. The noise in
    the added dimensions holds `noise` of the squared norm: the spread real wider embeddings have beyond the
    dimensions of the embeddings the mixture was fitted to."""

    def __init__(self, source_dim: int, dim: int, noise: float, seed: int) -> None:
        rotation, _ = np.linalg.qr(np.random.default_rng([seed, dim]).standard_normal((dim, dim)))
        self.rotation = rotation.astype(np.float32)
        self.source_dim = source_dim
        self.noise_std = math.sqrt(noise / max(1, dim - source_dim))

    def __call__(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        x = x / np.linalg.norm(x, axis=1, keepdims=True)
        extra = rng.standard_normal((len(x), len(self.rotation) - self.source_dim), dtype=np.float32)
        lifted = np.hstack([x.astype(np.float32), self.noise_std * extra]) @ self.rotation.T
        return lifted / np.linalg.norm(lifted, axis=1, keepdims=True)


class MixtureVectors(Embedder):
    """Row r's vector: the r-th real paragraph's (lifted) for the first rows, else a mixture sample drawn from
    row r's block: the same vector whichever chunk or process asks, so shards do not depend on who wrote them."""

    def __init__(self, mixture_file: Path, real: np.ndarray, dim: int, noise: float, seed: int) -> None:
        super().__init__(name=f"mixture-{dim}", model=f"mixture:{mixture_file.name}:{dim}:{noise}:{seed}",
                         normalize=False)  # fmt: skip
        self.mixture = dict(np.load(mixture_file))
        self.dim = dim
        self.seed = seed
        self.lift = Lift(real.shape[1], dim, noise, seed)
        self.real = self.lift(real, np.random.default_rng([seed, 1]))
        self._block: tuple[int, np.ndarray] | None = None

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        m = self.mixture
        comp = rng.choice(len(m["weights"]), size=n, p=m["weights"])
        x = rng.standard_normal((n, m["means"].shape[1]), dtype=np.float32) * m["rests"][comp, None]
        for c in np.unique(comp):
            at = np.flatnonzero(comp == c)
            z = rng.standard_normal((len(at), m["axes"].shape[1]), dtype=np.float32) * m["spreads"][c]
            x[at] += m["means"][c] + z @ m["axes"][c]
        return self.lift(x, rng)

    def block(self, b: int) -> np.ndarray:
        if self._block is None or self._block[0] != b:
            self._block = (b, self.sample(BLOCK, np.random.default_rng([self.seed, 2, b])))
        return self._block[1]

    def rows(self, start: int, stop: int) -> np.ndarray:
        out = np.empty((stop - start, self.dim), np.float32)
        for r in range(start, stop):
            out[r - start] = self.real[r] if r < len(self.real) else self.block(r // BLOCK)[r % BLOCK]
        return out

    def encode_passages(self, passages: Sequence[Passage], batch_size: int | None = None) -> np.ndarray:
        rows = [int(p.id) for p in passages]
        return self.rows(rows[0], rows[-1] + 1)


class SyntheticCorpus:
    """`n` passages with ids "0", "1", ... and no text: what `build_dense` streams past its mixture embedder."""

    def __init__(self, n: int, tag: str) -> None:
        self.n = n
        self.tag = tag

    def describe(self) -> tuple[int, str]:
        return self.n, f"n{self.n:09d}-{self.tag}"  # its first 16 characters name the index directories

    def passages(self, start: int, stop: int) -> Iterator[Passage]:
        return (Passage(str(i), "", "") for i in range(start, stop))

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        return np.asarray([int(i) for i in ids], np.int64)

    def __len__(self) -> int:
        return self.n
