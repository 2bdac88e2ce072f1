"""Hydra/OmegaConf glue shared by every entry point."""

from __future__ import annotations

from omegaconf import OmegaConf

from hoprag.paths import PROJECT_ROOT


def register_resolvers() -> None:
    """`${hoprag_root:}` → the checkout, so paths never depend on the working directory."""
    if not OmegaConf.has_resolver("hoprag_root"):
        OmegaConf.register_new_resolver("hoprag_root", lambda: str(PROJECT_ROOT))
