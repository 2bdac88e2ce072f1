"""Where models run: "auto" means the GPU when torch sees one."""

from __future__ import annotations


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
