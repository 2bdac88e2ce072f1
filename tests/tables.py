"""The paper tables of conf/table/ as the test modules read them: each table parsed, and each of its jobs composed
once per test session (a job's eval config is 0.3 s of Hydra; three modules walk every job of every table)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from hoprag.paths import PROJECT_ROOT
from hoprag.reproduce import Table, plan

TABLES = sorted(p.stem for p in (PROJECT_ROOT / "conf" / "table").glob("*.yaml"))

_COMPOSED: dict[tuple[str, str], list] = {}


def load(compose_cfg, name: str, scale: str) -> Table:
    cfg = compose_cfg("reproduce", [f"table={name}", f"scale={scale}"])
    return Table.parse(OmegaConf.to_container(cfg.table, resolve=True))


def composed(compose_cfg, tmp_path: Path, name: str, scale: str) -> list[tuple[str, str, object]]:
    """(row, group, composed eval config) of every job that runs at `scale` (a missing trained export aside),
    composed once per table and scale (the configs depend on nothing a test changes)."""
    if (name, scale) not in _COMPOSED:
        table = load(compose_cfg, name, scale)
        jobs = [j for j in plan(table, scale, tmp_path, ["show=0"]) if not j.skip]
        _COMPOSED[(name, scale)] = [(j.row, j.group, compose_cfg("eval", list(j.overrides))) for j in jobs]
    return _COMPOSED[(name, scale)]
