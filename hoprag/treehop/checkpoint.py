"""Loading a trained TreeHop without Lightning: from an export folder, its `treehop.pt`, or a `.ckpt`."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval.embedders import Embedder
from hoprag.treehop.model import TreeHop
from hoprag.utils.contract import refuse_mismatch
from hoprag.utils.device import resolve_device

EXPORT_FILE = "treehop.pt"
EMBEDDER_CONFIGS = PROJECT_ROOT / "conf" / "embedder"


def load_treehop(
    path: str | Path, embedder: Embedder | None = None, device: str = "cpu"
) -> tuple[TreeHop, dict[str, Any]]:
    """A trained TreeHop (eval mode, on `device`; "auto": the GPU when torch sees one) and its metadata from an
    export folder, its `treehop.pt`, or a Lightning checkpoint written by `TreeHopModule`; with `embedder`,
    refused unless it makes the vectors TreeHop was trained on (`check_embedder`)."""
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
    if embedder is not None:
        check_embedder(path, meta.get("embedder") or {}, embedder)
    model = TreeHop(**meta["config"])
    model.load_state_dict(state)
    return model.to(resolve_device(device)).eval(), meta


def check_embedder(ckpt: Path, recorded: Mapping[str, Any], embedder: Embedder) -> None:
    """Refuse a checkpoint whose embedder differs from `embedder` in anything that changes the vectors
    (`Embedder.describe_encoding`: model, template, normalisation, max length, pooling, query prefix), naming
    each differing key and the embedder config that matches the checkpoint."""
    refuse_mismatch(
        f"the TreeHop checkpoint {ckpt}, trained on {recorded.get('embedder')} embeddings,",
        recorded,
        embedder.describe_encoding(),
        f"choose {embedder_hint(recorded)} or retrain TreeHop with this embedder",
        sides=("checkpoint", "run"),
    )


def embedder_hint(recorded: Mapping[str, Any]) -> str:
    """The `embedder=<choice>` override(s) that rebuild the recorded embedder: the conf/embedder configs
    agreeing with every setting both record (the config's `name` is the record's `embedder`)."""
    choices = []
    for path in sorted(EMBEDDER_CONFIGS.glob("*.yaml")):
        config = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
        settings = {**config, "embedder": config.get("name")}
        if all(settings[key] == value for key, value in recorded.items() if key in settings):
            choices.append(f"embedder={path.stem}")
    if choices:
        return " or ".join(choices)
    return f"an embedder config (conf/embedder/) with {dict(recorded)} (none of {EMBEDDER_CONFIGS} has it)"
