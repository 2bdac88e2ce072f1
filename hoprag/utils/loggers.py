"""Experiment loggers built from the `logger` config group (Lightning's CSV / wandb loggers)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from hydra.utils import instantiate


def log_run(logger_cfgs: Mapping | None, hparams: dict[str, Any], metrics: dict[str, float]) -> None:
    """Log one evaluation's config and metrics to every configured logger, then close them.

    wandb runs are finished explicitly, so that each Hydra job of a multirun is its own wandb run.
    """
    for logger_cfg in (logger_cfgs or {}).values():
        logger = instantiate(logger_cfg)
        logger.log_hyperparams(hparams)
        logger.log_metrics(metrics)
        logger.finalize("success")
    if "wandb" in sys.modules:
        sys.modules["wandb"].finish()
