"""Evaluate one QA method on one dataset.

    python eval.py +method=standard_rag data=hotpotqa [limit=20] [batch_size=16] [retriever=bm25]
    python eval.py +method=standard_rag data=flashrag data.questions=<file> data.corpus=<file>
    python eval.py -m +method=no_retrieval,standard_rag data=hotpotqa,2wiki      # a sweep

Writes `predictions.jsonl` and `metrics.json` to the run directory and logs the metrics (CSV, wandb
offline). Rerunning with the same `hydra.run.dir` resumes a killed run; `overwrite=true` starts afresh.
Returns `optimized_metric` (default f1) for sweepers.
"""

from __future__ import annotations

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from hoprag.config import register_resolvers
from hoprag.evaluation.runner import build, format_summary, require_method, run
from hoprag.utils.loggers import log_run

register_resolvers()


@hydra.main(version_base="1.3", config_path="conf", config_name="eval")
def main(cfg: DictConfig) -> float:
    require_method(cfg)
    dataset, method = build(cfg)
    metrics = run(
        method,
        dataset.examples,
        cfg.paths.output_dir,
        batch_size=cfg.batch_size,
        overwrite=cfg.overwrite,
        suite=instantiate(cfg.metrics),
        passage=method.retriever.get if method.retriever is not None else None,
        run_info={"dataset": dataset.name},
    )
    print(format_summary(cfg.paths.output_dir, show=cfg.show))
    log_run(cfg.get("logger"), OmegaConf.to_container(cfg, resolve=True), metrics)
    return metrics[cfg.optimized_metric]


if __name__ == "__main__":
    main()
