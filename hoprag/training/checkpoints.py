"""What `train.py` reads of its checkpoints: which epoch a resume starts after, and which epoch it exports.

Two `ModelCheckpoint`s write them (conf/callbacks/default.yaml): one keeps the best epoch by the model's monitored
metric, the other (no monitor) rewrites `last.ckpt` at every epoch's end, so a killed run loses at most the epoch
in flight. (Lightning's `save_last` on the first would rewrite `last.ckpt` only when the metric improves, and a
resume would then retrain the epochs since.) The epochs named here are the ones in the checkpoint files
themselves, as Lightning counts them (from 0, as in `epoch_003.ckpt`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint


class Best(NamedTuple):
    """The best checkpoint: the one exported and tested."""

    path: str
    epoch: int
    score: float


def read(path: str | Path) -> dict[str, Any]:
    """A checkpoint of this run, memory-mapped: reading its counters does not load its weights."""
    return torch.load(path, map_location="cpu", mmap=True, weights_only=False)


def monitored(trainer: L.Trainer) -> ModelCheckpoint | None:
    """The checkpoint callback that keeps the best epoch (the one with a monitor), not the one keeping the last."""
    return next((c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint) and c.monitor), None)


def best_checkpoint(trainer: L.Trainer) -> Best | None:
    """The best checkpoint so far and the epoch it holds (None before any, or without a monitored callback)."""
    callback = monitored(trainer)
    if callback is None or not callback.best_model_path or callback.best_model_score is None:
        return None
    path = callback.best_model_path
    return Best(path, read(path)["epoch"], float(callback.best_model_score))


def resume_note(path: Path, max_epochs: int | None) -> str:
    """The line a resume starts with: the epochs `path` holds and, when it has one, the best so far."""
    state = read(path)
    done = state["epoch"] + 1  # `last.ckpt` is written at an epoch's end
    planned = f" of {max_epochs}" if max_epochs and max_epochs > 0 else ""
    note = f"resuming from {path} after epoch {state['epoch']} ({done}{planned} epochs done)"
    best = next((s for s in state.get("callbacks", {}).values() if s.get("monitor") and s.get("best_model_path")), None)
    if best is None:
        return note
    where = f" at epoch {read(best['best_model_path'])['epoch']}" if Path(best["best_model_path"]).is_file() else ""
    return f"{note}, best {best['monitor']} {float(best['best_model_score']):.4f}{where}"
