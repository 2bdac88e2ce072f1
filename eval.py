"""Evaluate one QA method on one dataset.

    python eval.py +method=standard_rag data=hotpotqa [limit=20] [batch_size=16] [retriever=bm25]
    python eval.py +method=standard_rag data=flashrag data.questions=<file> data.corpus=<file>
    python eval.py -m +method=no_retrieval,standard_rag data=hotpotqa,2wiki      # a sweep

Writes `predictions.jsonl` and `metrics.json` to the run directory, logs the metrics (CSV, wandb offline) and
ends with a table of the headline means (`hoprag/evaluation/summary.py`; `verbose=true` also shows the
libraries' own messages). Rerunning with the same `hydra.run.dir` resumes a killed run (or extends it to a larger `limit`);
a rerun whose method, data files, LLM, retriever or metrics differ from the run's `run_fingerprint.json` is
refused, naming the differing keys, before anything in the directory changes, and so is a second process on a
run directory another one holds (hoprag/utils/run_lock.py: it names the holder); `overwrite=true` starts
afresh, removing the old run only once the data, the config and the LLM's capabilities have passed their
checks. Secrets (`llm.api_key=...`) are redacted in everything written (hoprag/utils/secrets.py). Returns
`optimized_metric` (default f1; a list for a multi-objective search; capped by `budget`) for sweepers:
`python eval.py -m +hparams_search=<search>` (conf/hparams_search/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from hoprag.config import apply_aids, check_config, register_resolvers
from hoprag.data import QADataset
from hoprag.evaluation.fingerprint import eval_fingerprint, save_hydra_files
from hoprag.evaluation.objective import objective
from hoprag.evaluation.predictions import PredictionFile
from hoprag.evaluation.runner import PREDICTIONS, build, method_name, refuse_mixing, require_method, run
from hoprag.evaluation.summary import format_summary
from hoprag.llm import release_engines
from hoprag.utils import progress, provenance, quiet, run_lock
from hoprag.utils.loggers import log_run
from hoprag.utils.refusals import reported
from hoprag.utils.run_dirs import leaves_no_empty_run

register_resolvers()


def question_info(dataset: QADataset) -> dict[str, Any]:
    """The run's question set as metrics.json records it: the dataset, and a random sample's seed and ids."""
    examples = dataset.examples  # loaded first: its filters count what they left out
    info: dict[str, Any] = {"dataset": dataset.name}
    if dataset.sample is not None:
        info["sample"] = {"n": dataset.sample, "seed": dataset.seed, "ids": [ex.id for ex in examples]}
    if getattr(dataset, "exclude_trained", None) is not None:  # the trained model's questions, left out
        info["excluded_trained"] = {"export": dataset.exclude_trained, "n": dataset.excluded}
    if getattr(dataset, "exclude_questions", None):  # few-shot exemplars' questions, left out
        info["excluded_exemplars"] = {"n": dataset.exemplars_excluded}
    return info


@hydra.main(version_base="1.3", config_path="conf", config_name="eval")
@reported
@leaves_no_empty_run
def main(cfg: DictConfig) -> float:
    try:
        with run_lock.hold(cfg.paths.output_dir, "eval.py"):  # one writer per run directory, before it is read
            return evaluate(cfg)
    finally:  # an in-process engine lives as long as its job: the next job of a multirun finds the GPU free
        release_engines()


def evaluate(cfg: DictConfig) -> float:
    require_method(cfg)
    aids = apply_aids(cfg)  # the small-model overlay (conf/aids/), before anything reads the method's settings
    check_config(cfg)
    progress.configure(cfg.get("progress"))  # before anything that draws a bar
    quiet.configure(cfg.get("verbose"))  # before the libraries load
    output_dir = Path(cfg.paths.output_dir)
    dataset = instantiate(cfg.data)
    fingerprint = eval_fingerprint(cfg)
    if not cfg.overwrite:  # every refusal before the index is built and before .hydra/ is rewritten
        refuse_mixing(PredictionFile(output_dir / PREDICTIONS), method_name(cfg), dataset.examples, fingerprint)
    suite = instantiate(cfg.metrics)  # before the models load: a judge without its API key stops the run here
    method = build(cfg, dataset)
    metrics = run(
        method,
        dataset.examples,
        output_dir,
        batch_size=cfg.batch_size,
        overwrite=cfg.overwrite,
        suite=suite,
        run_info=question_info(dataset) | {"aids": aids} | provenance.run_stamp(),  # when, from which code
        fingerprint=fingerprint,
        on_start=lambda: save_hydra_files(output_dir, cfg),  # after the LLM probe, as overwrite's removal is
    )
    predictions = PredictionFile(output_dir / PREDICTIONS).records
    log_run(cfg.get("logger"), OmegaConf.to_container(cfg, resolve=True), metrics, predictions=predictions)
    print(format_summary(output_dir, show=cfg.show))  # last, so the run's report ends what it prints
    try:
        return objective(metrics, cfg.optimized_metric, cfg.get("budget"))
    except KeyError:
        if method.generates:
            raise
        # retrieval only: the default objective (f1) does not exist; a search names a retrieval metric instead
        print(f"objective: none ({cfg.optimized_metric} needs generated answers; this run generated none)")
        return None


if __name__ == "__main__":
    main()
