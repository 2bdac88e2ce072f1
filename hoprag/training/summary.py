"""What `train.py` ends with: the epoch it exported, by the monitored metric, beside the untrained start; and
the line every trainer starts with, what it trains (`parameter_line`).

The export holds the best checkpoint's weights, not the last epoch's, so the summary leads with that epoch's
validation figures and sets the untrained model's (when the module measured them, as TreeHop does before its
first step) and the last epoch's beside them: a run whose last epoch fell back does not read as "training did
nothing". `EpochHistory` records each validated epoch's figures as Lightning reports them, and keeps them in
every checkpoint, so a resumed run still has the figures of the epochs before it (the exported one among them).
The exported epoch is the one the best checkpoint file holds (`hoprag.training.checkpoints.Best`), not one
looked up by its score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import lightning as L
from torch import nn

from hoprag.training.checkpoints import Best

NA = "n/a"


def parameter_line(name: str, module: nn.Module, symbols: Mapping[str, str] | None = None, detail: str = "") -> str:
    """`<name>: N parameters, M trainable`, what a trainer prints as training starts: how much of the model training
    changes (a frozen body, a LoRA adapter, a fresh head). Where every trainable tensor is a scalar they are named
    too, `symbols` renaming them (`TreeHop: 1 parameter, 1 trainable (β)`); `detail` is appended as it is."""
    params = dict(module.named_parameters())
    total = sum(p.numel() for p in params.values())
    trainable = {n: p for n, p in params.items() if p.requires_grad}
    count = sum(p.numel() for p in trainable.values())
    named = ""
    if trainable and all(p.numel() == 1 for p in trainable.values()):
        named = f" ({', '.join((symbols or {}).get(n, n) for n in trainable)})"
    return f"{name}: {total:,} parameter{'' if total == 1 else 's'}, {count:,} trainable{named}{detail}"


class EpochHistory(L.Callback):
    """Every epoch's logged figures (validation and training), by epoch, and the untrained model's (a module's
    `untrained_metrics`, measured before its first step and not again on a resume), for the closing summary."""

    def __init__(self) -> None:
        self.epochs: dict[int, dict[str, float]] = {}
        self.untrained: dict[str, float] | None = None

    def _record(self, trainer: L.Trainer) -> None:
        if trainer.sanity_checking:
            return
        figures = {key: float(value) for key, value in trainer.callback_metrics.items() if value.numel() == 1}
        self.epochs.setdefault(trainer.current_epoch, {}).update(figures)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._record(trainer)
        untrained = getattr(pl_module, "untrained_metrics", None)
        if untrained:
            self.untrained = {key: float(value) for key, value in untrained.items()}

    def state_dict(self) -> dict[str, Any]:
        return {"epochs": self.epochs, "untrained": self.untrained}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """A resume's history starts with what its checkpoint's run had measured."""
        self.epochs = {int(epoch): dict(figures) for epoch, figures in state_dict["epochs"].items()}
        self.untrained = state_dict.get("untrained")


def training_summary(
    history: EpochHistory,
    monitor: str | None,
    best: Best | None,
    untrained: Mapping[str, float] | None = None,
    tested: Mapping[str, float] | None = None,
) -> str:
    """The exported epoch's figures beside the untrained start and the last epoch, then the test figures."""
    lines = []
    epoch = best.epoch if monitor and best is not None else None
    last = max(history.epochs) if history.epochs else None
    columns: list[tuple[str, Mapping[str, float]]] = []
    if untrained:
        columns.append(("untrained", untrained))
    if monitor and best is not None:
        columns.append((f"exported (epoch {epoch})", {**history.epochs.get(epoch, {}), monitor: best.score}))
        epochs = max([epoch, *history.epochs]) + 1
        lines.append(f"exported: epoch {epoch}, the best {monitor} of {epochs} epochs")
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
