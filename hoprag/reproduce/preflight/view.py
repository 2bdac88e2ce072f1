"""A composed job as the preflight reads it: the sections `eval.py` instantiates (the retriever only where the
method searches the dataset's corpus, as `hoprag.evaluation.fingerprint` decides), resolved, and every object
they build (a mapping with a `_target_`), nested ones included."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from hoprag.evaluation.fingerprint import EVAL_SECTIONS, uses_retriever


@dataclass
class JobView:
    overrides: tuple[str, ...]
    choices: dict[str, str]  # config group → option (empty unless composed with the hydra node)
    sections: dict[str, Any]
    searches: bool  # whether the method searches the dataset's corpus with `retriever`
    built: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def of(cls, cfg: DictConfig, overrides: tuple[str, ...]) -> JobView:
        searches = uses_retriever(cfg)
        names = [s for s in EVAL_SECTIONS if cfg.get(s) is not None and (s != "retriever" or searches)]
        sections = {s: OmegaConf.to_container(cfg[s], resolve=True) for s in names}
        choices = dict(OmegaConf.select(cfg, "hydra.runtime.choices", default={}) or {})
        return cls(overrides, choices, sections, searches, list(objects(sections)))


def objects(node: Any) -> Iterator[dict[str, Any]]:
    """Every configured object in `node` (a mapping with a `_target_`), outermost first. Of TreeRare's `parsers`
    (one per tree kind) only the one its `tree` picks is used (`hoprag.methods.treerare`): the others are left out."""
    if isinstance(node, Mapping):
        if isinstance(node.get("_target_"), str):
            yield dict(node)
        for key, value in node.items():
            if key == "parsers" and isinstance(value, Mapping) and node.get("tree") in value:
                value = value[node["tree"]]
            yield from objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from objects(value)
