"""Every job's `eval.py` config, composed in this process with Hydra's compose API: what the preflight derives
a job's needs from, and what the table tests check the paper's settings against. Inside `reproduce.py` (a Hydra
app) the app's own config search path is used; elsewhere `conf/` is loaded for the call and let go after."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig

from hoprag.config import register_resolvers
from hoprag.paths import PROJECT_ROOT
from hoprag.reproduce.plan import Job


@contextmanager
def _hydra() -> Iterator[None]:
    if GlobalHydra.instance().is_initialized():
        yield
        return
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        yield


def compose_jobs(
    jobs: Sequence[Job], extra: Sequence[str] = (), with_choices: bool = False
) -> list[tuple[Job, DictConfig]]:
    """Each job with its composed config (its overrides, then `extra`, then its run directory as
    `paths.output_dir`), composed once per distinct override list; `with_choices` keeps the `hydra` node
    (`hydra.runtime.choices`: which option of each config group the job selected)."""
    register_resolvers()
    keys = [(*job.overrides, *extra, f"paths.output_dir={job.directory}") for job in jobs]
    composed: dict[tuple[str, ...], DictConfig] = {}
    with _hydra():
        for key in keys:
            if key not in composed:
                composed[key] = compose("eval", list(key), return_hydra_config=with_choices)
    return [(job, composed[key]) for job, key in zip(jobs, keys)]
