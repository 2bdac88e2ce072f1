"""Loading a trained TreeHop without Lightning: from an export folder, its `treehop.pt`, or a `.ckpt`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from hoprag.treehop.model import TreeHop

EXPORT_FILE = "treehop.pt"


def load_treehop(path: str | Path) -> tuple[TreeHop, dict[str, Any]]:
    """A trained TreeHop (eval mode) and its metadata from an export folder, its `treehop.pt`, or a Lightning
    checkpoint written by `TreeHopModule`."""
    path = Path(path)
    if path.is_dir():
        path = path / EXPORT_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no TreeHop checkpoint at {path} (give an export folder, treehop.pt or a .ckpt)")
    saved = torch.load(path, map_location="cpu", weights_only=False)
    if "state_dict" in saved and "treehop" in saved:  # Lightning checkpoint
        meta = saved["treehop"]
        state = {k.removeprefix("model."): v for k, v in saved["state_dict"].items() if k.startswith("model.")}
    elif "config" in saved:
        meta, state = {k: saved[k] for k in ("config", "embedder")}, saved["state_dict"]
    else:
        raise ValueError(f"{path} is not a TreeHop checkpoint (no 'treehop' or 'config' entry)")
    model = TreeHop(**meta["config"])
    model.load_state_dict(state)
    return model.eval(), meta
