"""A Hydra sweeper whose jobs are an explicit list of override sets, not a cartesian product: how `reproduce.py`
runs a paper table's rows as one multirun of `eval.py`, so that any launcher (`hydra/launcher=joblib`, `slurm`)
runs them and each job is an ordinary `eval.py` run (resume, run fingerprint, `.hydra/`).

    python eval.py -m hydra/sweeper=rows hydra.sweeper.jobs_file=<jobs.json> hydra.sweep.dir=<dir> [shared overrides]

`jobs.json` is a JSON list of jobs, each a list of override strings (a job's `hydra.sweep.subdir=<name>` names its
run directory under the sweep directory); the command line's overrides go to every job, before the job's own.
Every job is composed before the first is launched, so a row that does not compose stops the sweep before any
runs. A job that fails does not stop the others of its batch; the sweep then fails naming the first failure.
Kept free of hoprag imports: Hydra imports every plugin module each time any entry point starts. No `from
__future__ import annotations`: Hydra executes the module before registering it in sys.modules, which dataclasses
need to resolve string annotations.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf


@dataclass
class RowsSweeperConf:
    _target_: str = "hydra_plugins.hoprag_rows_sweeper.rows_sweeper.RowsSweeper"
    jobs_file: str = "???"
    max_batch_size: int | None = None  # jobs handed to the launcher at once (None: all)


ConfigStore.instance().store(group="hydra/sweeper", name="rows", node=RowsSweeperConf, provider="hoprag")


def read_jobs(path: str) -> list[list[str]]:
    """The job list of `path`, checked: a non-empty list of lists of strings."""
    jobs = json.loads(Path(path).read_text(encoding="utf-8"))
    if not jobs or not all(isinstance(j, list) and all(isinstance(o, str) for o in j) for j in jobs):
        raise ValueError(f"{path}: expected a non-empty JSON list of jobs, each a list of override strings")
    return jobs


class RowsSweeper(Sweeper):
    """Launches the jobs of `jobs_file`, each with the command line's overrides first, in batches of
    `max_batch_size`."""

    def __init__(self, jobs_file: str, max_batch_size: int | None = None) -> None:
        super().__init__()
        self.jobs_file, self.max_batch_size = jobs_file, max_batch_size
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context = config, hydra_context
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        swept = [o.input_line for o in parser.parse_overrides(arguments) if o.is_sweep_override()]
        if swept:
            raise ValueError(f"hydra/sweeper=rows runs the jobs of {self.jobs_file}; a sweep on the command line "
                             f"would multiply them: {swept}")  # fmt: skip
        batch = [[*arguments, *job] for job in read_jobs(self.jobs_file)]
        self.validate_batch_is_legal(batch)
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        size = self.max_batch_size or len(batch)
        returns = []
        for start in range(0, len(batch), size):
            results = self.launcher.launch(batch[start : start + size], initial_job_idx=start)
            returns.append(results)
        for results in returns:  # every batch ran; now a failed job raises
            for result in results:
                _ = result.return_value
        return returns
