"""Build the retrieval index of one corpus, as its own entry point (DPR/FlashRAG style).

    python build_index.py data=hotpotqa retriever=dense [embedder=bge_m3] [index=hnsw] [force=true]
    python build_index.py corpus=wiki18/wiki18.jsonl retriever=dense embedder=e5_base index=wiki18 \
        [shard=i/n | merge=true] [shards.size=100000] [shards.dtype=float16]
    python build_index.py corpus=wiki18/wiki18_100w.jsonl retriever=flashrag_dense \
        retriever.index_path=wiki18/e5_Flat.index embedder=e5_base index=wiki18 shards.dtype=float16

The index is cached under `paths.index_dir`, one directory per corpus fingerprint and per digest of what
decides the index (embedder with its passage template, index type; BM25 parameters), exactly where the
retrievers look; running this again is a no-op unless the corpus or the configuration changed (a new
directory beside the old), or `force=true`. Dense indexes are encoded in shards on disk
(`hoprag.retrieval.shards`): a killed build resumes at the first missing shard, `shard=i/n` encodes only
worker i's share (one process per GPU or machine) and `merge=true` then builds the index from all shards.
Each shard is stamped (embedder, template, corpus, rows, dtype, byte lengths, checksums): a resumed build
rebuilds a short or foreign shard, and `merge=true` refuses one, naming the shard and the differing key.
An IVF index is written list by list from the shards (`hoprag.retrieval.ivf_build`: memory bounded by its training
sample and one shard; a killed merge resumes at its first missing shard). `retriever=flashrag_dense` with an index
other than Flat converts FlashRAG's prebuilt Flat file into it once, through shards copied from the file's rows.
`corpus=<FlashRAG JSONL>` reads a corpus file through its store (`hoprag.data.store_build`: Arrow, memory-mapped,
built once beside the indexes, resumable; a rerun recognises the file without reading it) instead of holding the
dataset's corpus in memory; so does a dataset whose config names a corpus file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import nullcontext

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig

from hoprag.config import check_config, register_resolvers
from hoprag.data.corpus_store import Corpus, as_corpus
from hoprag.data.fetch import ensure_file
from hoprag.data.store_build import open_corpus_store
from hoprag.paths import data_root
from hoprag.retrieval.dense import read_index
from hoprag.retrieval.flashrag_index import check_rows, convert, prebuilt_path
from hoprag.retrieval.shards import BuildResult, build_bm25, build_dense, parse_worker
from hoprag.utils import quiet, run_lock
from hoprag.utils.refusals import reported
from hoprag.utils.run_dirs import leaves_no_empty_run

log = logging.getLogger(__name__)
register_resolvers()

DENSE = "hoprag.retrieval.DenseRetriever"
BM25 = "hoprag.retrieval.BM25Retriever"
PREBUILT = "hoprag.retrieval.flashrag_index.PrebuiltDenseRetriever"
STATES = {"cached": "already in cache", "built": "built", "encoded": "encoded (this worker's shards)"}


def index_parts(retriever: DictConfig) -> Iterator[DictConfig]:
    """The dense, prebuilt dense and BM25 retriever configs inside a retriever config (itself, or RRF's / TreeHop's
    parts)."""
    if retriever.get("_target_") in (DENSE, BM25, PREBUILT):
        yield retriever
        return
    for value in retriever.values():
        if isinstance(value, DictConfig):
            yield from index_parts(value)


@hydra.main(version_base="1.3", config_path="conf", config_name="build_index")
@reported
@leaves_no_empty_run
def main(cfg: DictConfig) -> None:
    check_config(cfg)
    quiet.configure(cfg.get("verbose"))
    worker = parse_worker(cfg.shard)
    # one build or merge per index cache at a time; shard=i/n workers encode their own shards side by side
    with run_lock.hold(cfg.paths.index_dir, "build_index.py") if worker is None else nullcontext():
        build_indexes(cfg, worker)


def build_indexes(cfg: DictConfig, worker: tuple[int, int] | None) -> None:
    """Open the corpus and build each index `cfg.retriever` uses."""
    if cfg.corpus is not None:
        corpus = open_corpus_store(ensure_file(cfg.corpus, data_root(cfg.paths.data_dir)), cfg.paths.index_dir)
        log.info("corpus file %s: %d passages, store %s", cfg.corpus, len(corpus), corpus.directory)
    else:
        dataset = instantiate(cfg.data)
        corpus = as_corpus(dataset.corpus())
        log.info("corpus of %s: %d passages", dataset.name, len(corpus))
    build = {"shard_size": cfg.shards.size, "dtype": cfg.shards.dtype, "worker": worker, "merge": cfg.merge,
             "force": cfg.force}  # fmt: skip
    for part in index_parts(cfg.retriever):
        if part._target_ == DENSE:
            name = "DenseRetriever"
            result = build_dense(
                corpus, instantiate(part.embedder), part.cache_dir, part.index, batch_size=part.batch_size, **build
            )
        elif part._target_ == PREBUILT:
            if part.index.factory == "Flat":
                log.info("FlashRAG's Flat index is searched as it is (index=flat): nothing to build")
                continue
            name = f"{part.index.factory} conversion of {part.index_path}"
            result = convert_prebuilt(corpus, part, build)
        elif worker is not None:
            log.info("BM25 is built in one process: run it without shard=i/n")
            continue
        else:
            settings = {key: part[key] for key in ("k1", "b", "method", "stemmer")}
            name, result = "BM25Retriever", build_bm25(corpus, part.cache_dir, force=cfg.force, **settings)
        report(name, result)


def convert_prebuilt(corpus: Corpus, part: DictConfig, build: dict) -> BuildResult:
    """FlashRAG's Flat file converted once into the index `part.index` names (resumable: `convert`)."""
    path = prebuilt_path(part.index_path, part.root)
    prebuilt = read_index(path, mmap=True)
    check_rows(path, prebuilt, len(corpus))
    return convert(corpus, path, prebuilt, part.built_with, part.index, part.cache_dir, **build)[0]


def report(name: str, result: BuildResult) -> None:
    log.info("%s index %s (%s; build %.1f s)", name, STATES[result.state], result.index_dir, result.build_seconds)
    if result.missing_shards:
        log.info("%d shards still missing before merge=true can run", result.missing_shards)


if __name__ == "__main__":
    main()
