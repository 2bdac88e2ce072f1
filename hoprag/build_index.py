"""Build the retrieval index of one corpus, as its own entry point (DPR/FlashRAG style).

    python -m hoprag.build_index data=hotpotqa retriever=dense [embedder=bge_m3] [index=hnsw] [force=true]

The index is cached under `paths.index_dir`, one directory per corpus fingerprint and per digest of what
decides the index (embedder with its passage template, index type; BM25 parameters); running this again
is a no-op unless the corpus or the configuration changed (a new directory beside the old), or `force=true`.
"""

from __future__ import annotations

import logging

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig

from hoprag.config import check_config, register_resolvers
from hoprag.retrieval import FusionRetriever

log = logging.getLogger(__name__)
register_resolvers()


@hydra.main(version_base="1.3", config_path="../conf", config_name="build_index")
def main(cfg: DictConfig) -> None:
    check_config(cfg)
    dataset = instantiate(cfg.data)
    corpus = dataset.corpus()
    log.info("corpus of %s: %d passages", dataset.name, len(corpus))
    retriever = instantiate(cfg.retriever)(corpus=corpus)
    parts = [retriever.dense, retriever.sparse] if isinstance(retriever, FusionRetriever) else [retriever]
    for part in parts:
        state = "loaded from cache" if part.from_cache else "built"
        log.info("%s index %s (%s; build %.1f s)", type(part).__name__, state, part.index_dir, part.build_seconds)


if __name__ == "__main__":
    main()
