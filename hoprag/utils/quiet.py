"""Library chatter off by default, so an entry point's own report is what a run prints.

wandb's banners and run summaries, transformers' and Lightning's notices, "Loading weights" bars and faiss's
CPU-probe lines say nothing about the run; `verbose=true` (the entry points' key) keeps all of them. Warnings
and errors always show, as do hoprag's own log lines. Environment variables the user set are left as they are.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import io
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

# Set before the libraries read them (wandb at each run, transformers and huggingface_hub at import).
QUIET_ENV = {"WANDB_SILENT": "true", "TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
# Loggers whose INFO lines are banners: Lightning's device / tips / restore notices (its rank-zero loggers named
# too: importing Lightning resets its package loggers to INFO), faiss's CPU probe, the model loaders' "loading ...".
QUIET_LOGGERS = (
    "lightning.pytorch", "lightning.fabric", "lightning.pytorch.utilities.rank_zero",
    "lightning.fabric.utilities.rank_zero", "lightning.pytorch.accelerators.cuda", "faiss.loader",
    "sentence_transformers", "transformers",
)  # fmt: skip
# Modules that print at import, on stdout, where no logging level reaches them.
PRINTS_AT_IMPORT = ("transformers.integrations.integration_utils",)  # "[INFO] Running in WANDB offline mode"


def configure(verbose: bool | None) -> None:
    """Quiet the libraries for this process (and the processes it starts) unless `verbose`."""
    if verbose:
        return
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    if "transformers" in sys.modules:  # imported already: its settings were read, set them directly
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    if not any(isinstance(f, _SilentImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _SilentImport(PRINTS_AT_IMPORT))


class _SilentImport(importlib.abc.MetaPathFinder):
    """Imports `modules` with their stdout discarded (their print at import is all they would say there)."""

    def __init__(self, modules: Sequence[str]) -> None:
        self.modules = frozenset(modules)

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in self.modules:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _SilentLoader(spec.loader)
                return spec
        return None


class _SilentLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            self.loader.exec_module(module)
