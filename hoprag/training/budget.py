"""A wall-clock training budget (`train_minutes`) as one Lightning callback, for CPU runs of predictable length.

The callback stops training once the budget is spent (Lightning then validates the final weights) and gives
the learning-rate schedule its progress: the larger of the step share and the budget share, so that a timed
run warms up and anneals to 0 within its budget, and an untimed one by its last step. A run the budget cut short
says so when training ends (how many of its planned steps it took), since fewer steps change what it exports: on
a machine busy with other jobs the same command trains less. A timed run logs `train/steps` and
`train/steps_planned` to its loggers either way. Under DDP every rank reads rank 0's clock, once a step, so all
step with the same learning rate and stop at the same step. A module builds it from its `train_minutes`
hyperparameter and returns it from `configure_callbacks`; the config keys stay the module's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import lightning as L
import torch


def warmup_cosine(progress: float, warmup: float, total: int) -> float:
    """Linear warm-up over the first `warmup` of training, then a cosine to 0 (the LoRA router's schedule)."""
    if warmup and progress < warmup:
        return (progress + 1 / total) / warmup
    return 0.5 * (1.0 + math.cos(math.pi * (progress - warmup) / (1.0 - warmup)))


def warmup_linear(progress: float, warmup: float, total: int) -> float:
    """Linear warm-up over the first `warmup` of training, then a linear decay to 0 (the NLI verifier's)."""
    return min(1.0, (progress + 1 / total) / warmup if warmup else 1.0) * max(0.0, 1.0 - progress)


SHAPES: dict[str, Callable[[float, float, int], float]] = {"cosine": warmup_cosine, "linear": warmup_linear}


class WallClockBudget(L.Callback):
    """Stops training after `minutes` of it (None: no budget) and tells the schedule how far training is."""

    def __init__(self, minutes: float | None = None) -> None:
        self.minutes = minutes
        self.started: float | None = None
        self.cut: tuple[int, int, int] | None = None  # (steps taken, planned, epoch) when the budget stopped training
        self.shared: float | None = None  # under DDP: rank 0's share spent, as of this step

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.started = time.monotonic()

    def fraction(self) -> float:
        """Share of the budget used so far (0 without a budget, or before training starts); under DDP rank 0's."""
        if not self.minutes or self.started is None:
            return 0.0
        return self.shared if self.shared is not None else self._elapsed()

    def _elapsed(self) -> float:
        return (time.monotonic() - self.started) / (60 * self.minutes)

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        # checked once a step, after its forward pass: the budget is spent, so Lightning validates and stops
        if self.minutes and trainer.world_size > 1:  # ranks' clocks differ a little: rank 0's decides for all
            self.shared = trainer.strategy.broadcast(self._elapsed(), src=0)
        if self.fraction() >= 1.0:
            trainer.should_stop = True
            if self.cut is None:
                self.cut = (trainer.global_step + 1, int(trainer.estimated_stepping_batches), trainer.current_epoch + 1)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.minutes:  # the run's loggers (CSV, wandb) keep how much of its plan a timed run trained
            for logger in trainer.loggers:
                logger.log_metrics({"train/steps": trainer.global_step,
                                    "train/steps_planned": int(trainer.estimated_stepping_batches)},
                                   step=trainer.global_step)  # fmt: skip
        taken, planned, epoch = self.cut or (0, 0, 0)  # the step that found the budget spent completes
        if taken < planned and trainer.is_global_zero:  # spent on the last planned step: nothing was cut
            print(f"training budget ({self.minutes:g} min) spent: stopped after {taken} of {planned} planned steps "
                  f"(epoch {epoch} of {trainer.max_epochs}), the learning rate annealed within it")  # fmt: skip

    def progress(self, step: int, total: int) -> float:
        """How far training is, in [0, 1]: the larger of the step share and the budget share."""
        return min(1.0, max(step / total, self.fraction()))

    def schedule(self, optimizer: torch.optim.Optimizer, total: int, warmup: float, shape: str) -> dict[str, Any]:
        """A per-step `LambdaLR` of `SHAPES[shape]` over `progress`, as `configure_optimizers` returns it."""
        curve = SHAPES[shape]

        def factor(step: int) -> float:
            return curve(self.progress(step, total), warmup, total)

        return {"scheduler": torch.optim.lr_scheduler.LambdaLR(optimizer, factor), "interval": "step"}
