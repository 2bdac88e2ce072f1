"""What `train.py` ends with: the epoch it exported, by the monitored metric, beside the untrained start.

The export holds the best checkpoint's weights, not the last epoch's, so the summary leads with that epoch's
validation figures and sets the untrained model's (when the module measured them, as TreeHop does before its
first step) and the last epoch's beside them: a run whose last epoch fell back does not read as "training did
nothing". `EpochHistory` records each validated epoch's figures as Lightning reports them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import lightning as L

NA = "n/a"


class EpochHistory(L.Callback):
    """Every epoch's logged figures (validation and training), by epoch, for the closing summary."""

    def __init__(self) -> None:
        self.epochs: dict[int, dict[str, float]] = {}

    def _record(self, trainer: L.Trainer) -> None:
        if trainer.sanity_checking:
            return
        figures = {key: float(value) for key, value in trainer.callback_metrics.items() if value.numel() == 1}
        self.epochs.setdefault(trainer.current_epoch, {}).update(figures)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer)

    def epoch_of(self, monitor: str, score: float) -> int | None:
        """The first epoch whose `monitor` was `score` (the one a best-only checkpoint keeps); None when no
        epoch of this process reached it (a resumed run's best came before the resume)."""
        hits = [e for e, figures in sorted(self.epochs.items()) if figures.get(monitor) == score]
        return hits[0] if hits else None


def training_summary(
    history: EpochHistory,
    monitor: str | None,
    best: float | None,
    untrained: Mapping[str, float] | None = None,
    tested: Mapping[str, float] | None = None,
) -> str:
    """The exported epoch's figures beside the untrained start and the last epoch, then the test figures."""
    lines = []
    epoch = history.epoch_of(monitor, best) if monitor and best is not None else None
    last = max(history.epochs) if history.epochs else None
    columns: list[tuple[str, Mapping[str, float]]] = []
    if untrained:
        columns.append(("untrained", untrained))
    if monitor and best is not None:
        exported = history.epochs.get(epoch, {}) if epoch is not None else {}
        columns.append((f"exported (epoch {epoch})" if epoch is not None else "exported", {**exported, monitor: best}))
        where = f"epoch {epoch}" if epoch is not None else "an epoch before this resume"
        lines.append(f"exported: {where}, the best {monitor} of {len(history.epochs)} epochs run here")
    if last is not None and last != epoch:
        columns.append((f"last (epoch {last})", history.epochs[last]))
    keys = _ordered({k for _, figures in columns for k in figures}, monitor)
    if columns:
        lines.append(table(["metric", *(title for title, _ in columns)], [
            [key, *(_value(figures.get(key)) for _, figures in columns)] for key in keys
        ]))  # fmt: skip
    if tested:
        lines.append("test (the exported weights):")
        lines.append(table(["metric", "value"], [[key, _value(tested[key])] for key in sorted(tested)]))
    return "\n".join(lines)


def _ordered(keys: set[str], monitor: str | None) -> list[str]:
    """The monitored metric first, then validation, training and the rest, each alphabetically; the epoch
    counter and the per-step copies Lightning keeps beside epoch means are left out."""
    kept = [k for k in keys if k != "epoch" and not k.endswith("_step")]
    rank = {"val": 1, "train": 2}
    return sorted(kept, key=lambda k: (k != monitor, rank.get(k.split("/")[0], 3), k))


def _value(value: Any) -> str:
    return NA if value is None else f"{float(value):.4f}"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Rows under a header, the first column left-aligned and the others right-aligned, two spaces in."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [f"{row[0]:<{widths[0]}}", *(f"{cell:>{w}}" for cell, w in zip(row[1:], widths[1:]))]
        lines.append("  " + "   ".join(cells))
    return "\n".join(lines)
