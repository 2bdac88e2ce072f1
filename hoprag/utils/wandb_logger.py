"""Lightning's WandbLogger, less the deprecation warning every run printed.

Lightning always passes `anonymous` to `wandb.init` (None unless asked for), and wandb warns about any value of
that retired setting, on every run and past `WANDB_SILENT`. This logger passes it only when it was set.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.loggers import WandbLogger as LightningWandbLogger


class WandbLogger(LightningWandbLogger):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self._wandb_init.get("anonymous") is None:
            self._wandb_init.pop("anonymous", None)
