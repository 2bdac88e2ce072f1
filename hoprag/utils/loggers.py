"""Experiment loggers built from the `logger` config group (Lightning's CSV / wandb loggers), and what makes the
wandb runs of a sweep comparable: each job's run named from its overrides, grouped by its sweep, tagged with its
method / data / model, and an evaluation's predictions logged as a Table."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from hoprag.utils.run_control import is_run_control
from hoprag.utils.secrets import redact, redact_text, redacted_argv

# Config groups a run is tagged with (`method:prunerag`), when the run chose one; `data` and `llm` by their `name`.
TAGGED = ("method", "data", "llm", "model", "experiment", "hparams_search")
MAX_TAG = 64  # wandb refuses longer tags


def wandb_run(field: str, default: Any = None, *, _root_: DictConfig) -> Any:
    """The `${wandb_run:...}` resolver (conf/logger/wandb.yaml): `name` → the job's overrides (else `default`),
    `group` → its sweep (multirun only, else null), `tags` → `default` plus the chosen method, data, llm, model.

    Outside a Hydra app (configs composed in tests) there is no job: the name is `default`, no group, and the
    tags come from the config alone."""
    hydra = HydraConfig.get() if HydraConfig.initialized() else None
    if field == "name":
        return (override_label(hydra.overrides.task, sweep_overrides(hydra)) if hydra else "") or default
    if field == "group":
        return sweep_group(hydra, OmegaConf.select(_root_, "paths.log_dir")) if hydra else None
    if field == "tags":
        return run_tags(_root_, dict(hydra.runtime.choices) if hydra else {}, default or ())
    raise ValueError(f"${{wandb_run:{field}}}: expected name, group or tags")


def override_label(job: Sequence[str], sweep: Sequence[str] = ()) -> str:
    """`method=prunerag,seed=1`: the job's overrides, without the `+` of added groups, the unnamed keys and
    those every job of its sweep shares (`sweep`: the multirun's command line; all of them when none varies)."""
    parser = OverridesParser.create()
    shared = {_text(o) for o in parser.parse_overrides(list(sweep)) if not o.is_sweep_override()}
    own = [_text(o) for o in parser.parse_overrides(list(job)) if not is_run_control(o.key_or_group)]
    return ",".join([text for text in own if text not in shared] or own)


def _text(override: Override) -> str:
    if override.is_delete():
        return f"~{override.key_or_group}"
    return redact_text(f"{override.key_or_group}={override.get_value_element_as_str()}")  # a secret in a dict


def sweep_overrides(hydra: DictConfig) -> list[str]:
    """The command-line overrides of the job's multirun (Hydra's basic sweeper saves them in
    `<sweep dir>/multirun.yaml` before the first job); none for a single run or another sweeper."""
    saved = Path(hydra.sweep.dir) / "multirun.yaml"
    if hydra.mode != RunMode.MULTIRUN or not saved.is_file():
        return []
    return list(OmegaConf.load(saved).hydra.overrides.task)


def sweep_group(hydra: DictConfig, log_dir: str | None) -> str | None:
    """A multirun job's sweep directory, relative to the log directory when under it
    (`eval/multiruns/2025-01-31_12-00-00`); null for a single run."""
    if hydra.mode != RunMode.MULTIRUN:
        return None
    sweep = Path(hydra.sweep.dir)
    return str(sweep.relative_to(log_dir)) if log_dir and sweep.is_relative_to(log_dir) else str(sweep)


def run_tags(cfg: DictConfig, choices: Mapping[str, Any], base: Iterable[str]) -> list[str]:
    """`base` plus `group:choice` for each TAGGED group the run has (`data` and `llm` by their configured name)."""
    names = {group: OmegaConf.select(cfg, f"{group}.name") for group in ("data", "llm")}
    chosen = [f"{group}:{names.get(group) or choices.get(group)}"[:MAX_TAG] for group in TAGGED
              if names.get(group) or choices.get(group)]  # fmt: skip
    return list(dict.fromkeys([*base, *chosen]))


def predictions_table(records: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Columns and rows of an evaluation's predictions: id, question, prediction, golds and one column per score."""
    records = list(records)
    scores = list(dict.fromkeys(name for r in records for name in r.get("scores") or {}))
    rows = [
        [r["id"], r.get("question"), r.get("prediction"), " | ".join(map(str, r.get("golds") or ())),
         *((r.get("scores") or {}).get(name) for name in scores)]
        for r in records
    ]  # fmt: skip
    return ["id", "question", "prediction", "golds", *scores], rows


def log_predictions(run: Any, records: Sequence[Mapping[str, Any]], metrics: Mapping[str, float]) -> None:
    """The run's prediction records as a wandb Table, in a `predictions` artifact (the metrics as its metadata)
    and in the run's history (so the workspace compares runs question by question)."""
    wandb = sys.modules["wandb"]
    columns, rows = predictions_table(records)
    table = wandb.Table(columns=columns, data=rows)
    artifact = wandb.Artifact(f"predictions-{run.id}", type="predictions", metadata=dict(metrics))
    artifact.add(table, "predictions")
    run.log_artifact(artifact)
    run.log({"predictions": table})


def log_config(logger: Any, config: Mapping[str, Any]) -> None:
    """A run's config as the logger's hyperparameters, its secrets redacted; a wandb run starts here, so it
    records a command line without them too (`hoprag.utils.secrets`)."""
    with redacted_argv():
        logger.log_hyperparams(redact(config))


def log_run(
    logger_cfgs: Mapping | None,
    hparams: dict[str, Any],
    metrics: dict[str, float],
    predictions: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Log one evaluation's config (its secrets redacted, `log_config`) and metrics to every configured logger,
    then close them; a wandb run also gets the `predictions` records (`log_predictions`).

    wandb runs are finished explicitly, so that each Hydra job of a multirun is its own wandb run.
    """
    for logger_cfg in (logger_cfgs or {}).values():
        from lightning.pytorch.loggers import WandbLogger  # here: seconds to import, and `~logger` needs none

        logger = instantiate(logger_cfg)
        log_config(logger, hparams)
        logger.log_metrics(metrics)
        if predictions is not None and isinstance(logger, WandbLogger):
            log_predictions(logger.experiment, predictions, metrics)
        logger.finalize("success")
    if "wandb" in sys.modules:
        sys.modules["wandb"].finish()
