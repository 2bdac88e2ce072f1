"""Retrieval-only evaluation of every configured retriever on one dataset (the demo's main job).

    python eval_retrieval.py data=hotpotqa [limit=50] [ks=[2,5,10]] [embedder=bge_m3] [logger=csv]

Indexes are built on first use and cached; build time comes from the index manifest. The metrics are
printed as a table and written to `output_json` (and to the configured loggers).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from hoprag.config import check_config, register_resolvers
from hoprag.evaluation.retrieval import evaluate_retriever, format_table
from hoprag.utils import quiet
from hoprag.utils.loggers import log_run
from hoprag.utils.refusals import reported
from hoprag.utils.run_dirs import leaves_no_empty_run

log = logging.getLogger(__name__)
register_resolvers()


@hydra.main(version_base="1.3", config_path="conf", config_name="eval_retrieval")
@reported
@leaves_no_empty_run
def main(cfg: DictConfig) -> dict:
    check_config(cfg)
    quiet.configure(cfg.get("verbose"))
    dataset = instantiate(cfg.data)
    corpus = dataset.corpus()
    log.debug("%s: %d questions, corpus of %d passages", dataset.name, len(dataset), len(corpus))
    results = {}
    for name, retriever_cfg in cfg.retrievers.items():
        retriever = instantiate(retriever_cfg)(corpus=corpus)
        results[name] = evaluate_retriever(dataset.examples, retriever, ks=list(cfg.ks))
    report = {
        "dataset": dataset.name,
        "questions": len(dataset),
        "corpus_passages": len(corpus),
        "embedder": cfg.embedder.name,
        "index": cfg.index.factory,
        "results": results,
    }
    print(format_table(report, ks=list(cfg.ks)))
    out = Path(cfg.output_json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2))
    print(f"metrics written to {out}")
    metrics = {f"{name}/{key}": value for name, m in results.items() for key, value in m.items()}
    log_run(cfg.get("logger"), OmegaConf.to_container(cfg, resolve=True), metrics)
    return report


if __name__ == "__main__":
    main()
