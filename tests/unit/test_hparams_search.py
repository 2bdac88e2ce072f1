"""conf/hparams_search: every search composes with its entry point, objectives match directions, the SLURM
launcher composes, and `objective` returns what a sweeper needs (one value, several, or a capped one)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from hoprag.config import register_resolvers
from hoprag.evaluation.objective import objective
from hoprag.paths import PROJECT_ROOT

CONF = PROJECT_ROOT / "conf"
SEARCHES = sorted(p.stem for p in (CONF / "hparams_search").glob("*.yaml"))
TRAIN_SEARCHES = {"treehop_train"}


def compose_hydra(config_name: str, overrides: list[str]):
    register_resolvers()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.parametrize("search", SEARCHES)
def test_every_search_composes_and_has_one_direction_per_objective(search, tmp_path):
    entry = "train" if search in TRAIN_SEARCHES else "eval"
    cfg = compose_hydra(entry, [f"+hparams_search={search}", f"paths.output_dir={tmp_path}"])
    sweeper = cfg.hydra.sweeper
    assert sweeper.params, "a search sweeps something"
    swept = [k for k in sweeper.params if not k.startswith("+")]
    missing = [k for k in swept if OmegaConf.select(cfg, k, default=KeyError) is KeyError]
    assert not missing, f"swept keys the composed config does not have: {missing}"
    if "optuna" in sweeper._target_.lower():
        assert cfg.get("method" if entry == "eval" else "model") is not None  # the search brings what it tunes
        objectives = cfg.optimized_metric if isinstance(cfg.optimized_metric, str) else list(cfg.optimized_metric)
        directions = sweeper.direction if isinstance(sweeper.direction, str) else list(sweeper.direction)
        assert isinstance(objectives, str) == isinstance(directions, str)
        if not isinstance(objectives, str):
            assert len(objectives) == len(directions) >= 2
        assert sweeper.n_trials >= 8 and sweeper.sampler.seed is not None  # reproducible searches
    else:  # the grid: every method and retriever it names exists
        methods = [m.strip() for m in sweeper.params["+method"].split(",")]
        retrievers = [r.strip() for r in sweeper.params["retriever"].split(",")]
        assert all((CONF / "method" / f"{m}.yaml").is_file() for m in methods) and len(methods) >= 5
        assert retrievers == ["dense", "bm25", "rrf", "treehop"]


def test_searches_tune_on_training_samples_not_the_reported_dev_sets(tmp_path):
    for search in set(SEARCHES) - TRAIN_SEARCHES - {"rag_grid"}:
        cfg = compose_hydra("eval", [f"+hparams_search={search}", f"paths.output_dir={tmp_path}"])
        assert cfg.data.name.endswith("_train"), search


def test_the_slurm_launcher_composes_with_a_search(tmp_path):
    cfg = compose_hydra(
        "eval", ["+hparams_search=prunerag", "hydra/launcher=slurm", "hydra.launcher.partition=gpu",
                 f"hydra.sweep.dir={tmp_path}/sweep"],
    )  # fmt: skip
    launcher = cfg.hydra.launcher
    assert launcher._target_ == "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"
    assert launcher.partition == "gpu" and launcher.gpus_per_node == 1 and launcher.timeout_min == 240
    assert launcher.submitit_folder == f"{tmp_path}/sweep/.submitit/%j"


def test_joblib_runs_local_jobs_side_by_side(tmp_path):
    cfg = compose_hydra("train", ["+model=treehop", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"])
    assert cfg.hydra.launcher._target_.endswith("JoblibLauncher") and cfg.hydra.launcher.n_jobs == 2


def test_objective_returns_one_value_several_or_a_capped_one():
    metrics = {"f1": 0.4, "cost/mean/prompt_tokens": 900.0, "recall": 60.0}
    assert objective(metrics, "f1") == 0.4
    assert objective(metrics, ["f1", "cost/mean/prompt_tokens"]) == (0.4, 900.0)
    assert objective(metrics, "f1", {"metric": "cost/mean/prompt_tokens", "max": 1000}) == 0.4
    assert objective(metrics, "f1", {"metric": "cost/mean/prompt_tokens", "max": 800}) == 0.0
    capped = objective(metrics, ["recall", "cost/mean/prompt_tokens"], {"metric": "cost/mean/prompt_tokens", "max": 800, "infeasible": -1})
    assert capped == (-1.0, 900.0)  # only the quality objective is replaced
    with pytest.raises(KeyError, match="did not produce"):
        objective(metrics, "em")


@pytest.mark.slow
def test_an_optuna_search_runs_offline_and_reports_its_best_trial(tmp_path):
    """Three trials of the TreeHop retrieval search on a few 2Wiki train questions, end to end."""
    sweep = tmp_path / "sweep"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "CI": "true"}
    subprocess.run(
        [sys.executable, "eval.py", "-m", "+hparams_search=treehop_topk", "limit=20", "hydra.sweeper.n_trials=3",
         "hydra.sweeper.sampler.n_startup_trials=3", f"hydra.sweep.dir={sweep}"],
        cwd=PROJECT_ROOT, env=env, check=True, capture_output=True, text=True,
    )  # fmt: skip
    result = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert set(result["best_params"]) == {"method.top_k", "method.n_hops"}
    trials = sorted(p for p in sweep.iterdir() if p.name.isdigit())
    assert len(trials) == 3 and all((t / "metrics.json").is_file() for t in trials)
    assert 0 < result["best_value"] <= 100
