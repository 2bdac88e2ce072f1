"""Run fingerprints: the resolved settings a run directory was started with, so a rerun cannot mix settings.

`eval.py` and `train.py` write `run_fingerprint.json` into the run directory when a run starts afresh. A rerun
in the same directory recomputes it and is refused, before anything there is modified, when any
fingerprinted key differs; the error lists every differing dotted key with its saved and requested value.

What is fingerprinted is the resolved config with the run-control keys removed: keys that change where
things are written or cached, how fast or in what batches they run, or how many questions are asked, but
not the answers (`RUN_CONTROL`, matched by `fnmatch` on dotted keys, so `*.cache_dir` covers every depth).
Data files enter by content (sha256), not by path, so the same files under another data root match.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from hoprag.config import select_settings
from hoprag.data.corpus_identity import cached_sha256
from hoprag.data.fetch import ensure_file
from hoprag.paths import data_root
from hoprag.utils.refusals import Refusal
from hoprag.utils.run_control import LLM_TRANSPORT, RUN_CONTROL_ANYWHERE
from hoprag.utils.secrets import HYDRA_FILES, save_redacted

FINGERPRINT = "run_fingerprint.json"
ABSENT = "<absent>"

# eval.py: the sections that decide a run's answers (`embedder` and `index` enter resolved, wherever the
# retriever or the method use them); `retriever` only for methods that use one, `pruning` and `oracle` (the oracle
# retriever, hoprag/retrieval/oracle.py) where they are added.
EVAL_SECTIONS = ("method", "pruning", "data", "llm", "retriever", "metrics", "oracle")
RUN_CONTROL = (*RUN_CONTROL_ANYWHERE, "data.root", "data.limit", *(f"llm.{key}" for key in LLM_TRANSPORT))
DATA_FILES = ("questions", "corpus")


class ResumeRefused(Refusal, ValueError):
    """A rerun whose settings differ from those the run directory was started with."""


def uses_retriever(cfg: DictConfig) -> bool:
    """Whether the run builds `retriever=` over the dataset's corpus: a method that reads passages, unless
    `+pruning=` gives it each question's own sources instead."""
    return bool(get_class(cfg.method._target_).reads_passages(cfg.method)) and cfg.get("pruning") is None


def eval_fingerprint(cfg: DictConfig) -> dict[str, Any]:
    """What decides an evaluation's answers: method (and its pruning), data (with its files' content hashes),
    LLM, retriever (when the method searches the dataset's corpus) and the metric suite."""
    uses = {"retriever": uses_retriever(cfg), "pruning": cfg.get("pruning") is not None}
    sections = [s for s in EVAL_SECTIONS if uses.get(s, True)]
    fingerprint = select_settings(cfg, sections, RUN_CONTROL)
    root = data_root(cfg.data.get("root"))
    for key in DATA_FILES:
        name = OmegaConf.select(cfg, f"data.{key}", throw_on_missing=True)
        if name is not None:
            file = ensure_file(name, root)  # hashed once per file version (size, mtime, sampled blocks)
            fingerprint["data"][key] = {"sha256": cached_sha256(file, cfg.paths.index_dir)}
    return fingerprint


def diff(saved: Any, requested: Any, prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two nested dicts (a key missing on one side included);
    lists and other values are compared whole."""
    if not (isinstance(saved, Mapping) and isinstance(requested, Mapping)):
        return [] if saved == requested else [prefix.rstrip(".") or "<root>"]
    keys = [*saved, *(k for k in requested if k not in saved)]
    return [
        key
        for k in keys
        for key in diff(saved.get(k, ABSENT), requested.get(k, ABSENT), f"{prefix}{k}.")
    ]


def _lookup(tree: Mapping[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return ABSENT
        node = node[part]
    return node


def load(directory: str | os.PathLike) -> dict[str, Any] | None:
    path = Path(directory) / FINGERPRINT
    return json.loads(path.read_text()) if path.exists() else None


def save(directory: str | os.PathLike, fingerprint: Mapping[str, Any]) -> None:
    """Written atomically: a killed start never leaves half a fingerprint."""
    path = Path(directory) / FINGERPRINT
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(fingerprint, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def refuse_changed(directory: str | os.PathLike, fingerprint: Mapping[str, Any], what: str, remedy: str) -> None:
    """Raise `ResumeRefused` unless `directory`'s saved fingerprint equals `fingerprint`.

    Called only when the directory holds something to resume (`what`: "predictions and metrics",
    "checkpoints"); `remedy` names the way to start afresh there.
    """
    saved = load(directory)
    ways_out = f"Use another run directory (hydra.run.dir=...) to keep both, or {remedy}."
    if saved is None:
        raise ResumeRefused(
            f"{directory} holds {what} but no {FINGERPRINT} (an older run's), so the settings that made them "
            f"cannot be checked. {ways_out}"
        )
    keys = diff(saved, fingerprint)
    if keys:
        lines = "\n".join(
            f"  {key}: saved {_short(_lookup(saved, key))}, requested {_short(_lookup(fingerprint, key))}"
            for key in keys
        )
        raise ResumeRefused(
            f"{directory} was started with other settings than this rerun's ({len(keys)} differing keys); "
            f"refusing to resume it, its {what} are left as they are:\n{lines}\n{ways_out}"
        )


def _short(value: Any, width: int = 100) -> str:
    text = value if value == ABSENT else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def save_hydra_files(directory: str | os.PathLike, cfg: DictConfig) -> None:
    """Hydra's `.hydra/` files (config, hydra, overrides), written by the entry point once the preflight
    has passed (the configs set `hydra.output_subdir: null`, so a refused rerun does not rewrite them), with
    their secrets redacted (`hoprag.utils.secrets`)."""
    if not HydraConfig.initialized():  # composed in a test, not launched by @hydra.main
        return
    hydra_dir = Path(directory) / ".hydra"
    hydra_cfg = HydraConfig.get()
    config, hydra, overrides = HYDRA_FILES
    save_redacted(cfg, hydra_dir / config)
    save_redacted({"hydra": hydra_cfg}, hydra_dir / hydra)
    save_redacted(hydra_cfg.overrides.task, hydra_dir / overrides)
