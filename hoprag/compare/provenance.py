"""Where a comparison's figures come from, as its report states them (issue 33, "reports with provenance"):
when and from which code the report was made and by which command, then per run directory its table row, the
dataset and question count, when it started and from which commit (`run.started`, `run.commit` of metrics.json;
a run from before they were recorded: unknown), and the command that made it, rebuilt from Hydra's record
(`.hydra/hydra.yaml`: the application's name and the overrides, its run directory included)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from hoprag.compare.groups import Group
from hoprag.utils.provenance import code_version, now

UNKNOWN = "?"
HYDRA_RECORD = Path(".hydra") / "hydra.yaml"
KEPT_HYDRA_OVERRIDES = ("hydra.run.dir=",)  # where a single run wrote: part of the command that made it


@dataclass(frozen=True)
class Stamp:
    """When the report was made, from which checkout (None: unknown) and by which command."""

    created: str
    commit: str | None
    command: str

    @classmethod
    def now(cls, argv: Sequence[str]) -> Stamp:
        return cls(now(), code_version(), shlex.join(["python", "compare.py", *argv]))

    def line(self) -> str:
        return f"Made {self.created} from hoprag {self.commit or UNKNOWN} by: {self.command}"


def run_command(path: Path) -> str:
    """`python <app>.py <overrides>` as Hydra recorded the run (a multirun job as the single run it was);
    "?" when the directory holds no Hydra record."""
    try:
        record = yaml.safe_load((path / HYDRA_RECORD).read_text(encoding="utf-8"))["hydra"]
        app = record["job"]["name"]
        overrides = list(record["overrides"]["task"])
        where = [o for o in record["overrides"].get("hydra", []) if o.startswith(KEPT_HYDRA_OVERRIDES)]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return UNKNOWN
    return shlex.join(["python", f"{app}.py", *map(str, overrides), *where])


def questions(groups: Sequence[Group]) -> str:
    """The eval runs' question sets in a few words: `hotpotqa, 8 questions` (each set when they differ)."""
    infos = [(getattr(r, "info", {}), r.metrics) for g in groups for r in g.runs]
    sets = dict.fromkeys((info.get("dataset", UNKNOWN), info.get("n", metrics.get("n"))) for info, metrics in infos)
    return "; ".join(dataset if n is None else f"{dataset}, {int(n)} questions" for dataset, n in sets)


def runs_header() -> list[str]:
    return ["run", "dataset", "questions", "started", "commit", "directory", "command"]


def runs_cells(groups: Sequence[Group], train: Sequence[Group] = ()) -> list[list[str]]:
    """One row per run directory (each seed of a group apart), eval runs first."""
    rows = []
    for g in [*groups, *train]:
        for r in g.runs:
            info: dict[str, Any] = getattr(r, "info", {})
            n = info.get("n", r.metrics.get("n"))
            rows.append([g.name, str(info.get("dataset", "–" if g in train else UNKNOWN)),
                         "–" if n is None else str(int(n)), info.get("started") or started(r.path),
                         str(info.get("commit", UNKNOWN)), str(r.path), run_command(r.path)])  # fmt: skip
    return rows


def started(path: Path) -> str:
    """When Hydra saved the run's config (its start), for runs whose records do not say it."""
    config = path / ".hydra" / "config.yaml"
    if not config.is_file():
        return UNKNOWN
    return datetime.fromtimestamp(config.stat().st_mtime).astimezone().isoformat(timespec="seconds")
