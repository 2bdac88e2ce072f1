"""`bm25s`, kept off the GPU.

When JAX is installed (GPU images often ship it), `import bm25s` imports it and runs a top-k to probe it, which
starts JAX on the GPU, and JAX takes 75 % of the GPU's memory in every process that does (its preallocation):
beside a vLLM engine, or in each worker of an encoding pool, that is an out-of-memory error (seen on an H100).
hoprag's BM25 scores on the CPU, so JAX is confined to the CPU here unless the user has chosen its platforms
(`JAX_PLATFORMS`). Import bm25s through this module."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import bm25s  # noqa: E402
from bm25s import scoring  # noqa: E402

__all__ = ["bm25s", "scoring"]
