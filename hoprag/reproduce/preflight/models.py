"""Models: every model reference a job's objects load (`model`, `base_model`, `tokenizer`, `qa_reader`), each
checked where it will be read from without touching the network: a hub id in the Hugging Face cache the
environment names (huggingface_hub's `scan_cache_dir`: its snapshot's config and every weight file its index
lists), a `pkg://` model in its installed
package, a local folder on disk. A served model (an object with a `base_url`) is the server's need instead. A
gated repository that is not cached also needs a hub token to download it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoprag.reproduce.preflight.host import Host
from hoprag.reproduce.preflight.need import MISSING, OK, Need
from hoprag.utils.bundled import PREFIX, resolve_model_ref

MODEL_KEYS = ("model", "base_model", "tokenizer", "qa_reader")
HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")
# organisations whose repositories ask for a licence to be accepted before download (known without asking the hub)
GATED = ("meta-llama/",)
TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt")


@dataclass(frozen=True)
class Weights:
    """What is on disk of a model: its config.json (None when absent), the bytes of its weight files (None when
    not all are there), and why it is incomplete ("" when complete)."""

    config: dict[str, Any] | None
    size: int | None
    lacking: str = ""


def folder_weights(folder: Path) -> Weights:
    """A model folder (a hub snapshot, an export): its config and weights, every shard its index lists, else
    every weight file it holds (safetensors, PyTorch, GGUF)."""
    config_file = folder / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else None
    for name in INDEXES:
        if (folder / name).is_file():
            shards = sorted(set(json.loads((folder / name).read_text(encoding="utf-8"))["weight_map"].values()))
            lacking = [s for s in shards if not (folder / s).is_file()]
            if lacking:
                return Weights(config, None, f"{len(lacking)} of {len(shards)} weight files not there")
            return Weights(config, sum((folder / s).stat().st_size for s in shards))
    files = [f for f in folder.iterdir() if f.suffix in WEIGHT_SUFFIXES and f.is_file()]
    if files:
        return Weights(config, sum(f.stat().st_size for f in files))
    return Weights(config, None, f"no weight file in {folder}")


def model_weights(ref: str, host: Host) -> Weights | None:
    """What is on disk of the model `ref` (None: no reference this preflight reads, e.g. a spaCy package name)."""
    def find() -> Weights | None:
        if ref.startswith(PREFIX):
            try:
                return _local(Path(resolve_model_ref(ref)))
            except FileNotFoundError as e:
                return Weights(None, None, str(e))
        path = Path(ref).expanduser()
        if path.is_absolute() or path.exists():
            return _local(path)
        if not HUB_ID.match(ref):
            return None
        snapshot = host.hub_snapshots().get(ref)
        if snapshot is None:
            return Weights(None, None, f"not in the Hugging Face cache {host.cache_dir()}")
        return folder_weights(snapshot)

    return host.memo(("weights", ref), find)


def _local(path: Path) -> Weights:
    """A model folder, or one file (a GGUF)."""
    if path.is_dir():
        return folder_weights(path)
    return Weights(None, path.stat().st_size) if path.is_file() else Weights(None, None, f"no {path}")


def references(obj: Mapping[str, Any]) -> Iterator[str]:
    """The model references of one configured object; a served model (`base_url`) is not loaded here."""
    for key in MODEL_KEYS:
        ref = obj.get(key)
        if isinstance(ref, str) and not (key == "model" and "base_url" in obj):
            yield ref


def model_needs(objects: list[dict[str, Any]], host: Host) -> Iterator[Need]:
    for ref in dict.fromkeys(r for obj in objects for r in references(obj)):
        weights = model_weights(ref, host)
        if weights is None:
            continue
        state = MISSING if weights.lacking else OK
        yield Need("model", ref, _command(ref), state, weights.lacking)
        if state == MISSING and ref.startswith(GATED):
            token = any(host.has_env(v) for v in TOKEN_VARS) or _token_file().is_file()
            yield Need("credential", "HF_TOKEN", f"accept the licence at https://huggingface.co/{ref}, then "
                       "`hf auth login` or export HF_TOKEN", OK if token else MISSING,  # fmt: skip
                       "" if token else f"{ref} is gated: its download needs a token")


def _command(ref: str) -> str:
    if ref.startswith(PREFIX):
        return "make install"
    return f"hf download {ref}" if HUB_ID.match(ref) and not Path(ref).exists() else f"put the model at {ref}"


def _token_file() -> Path:
    from huggingface_hub import constants

    return Path(constants.HF_TOKEN_PATH)
