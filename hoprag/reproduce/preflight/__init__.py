"""The preflight: before any job starts (and before any GPU time is spent), everything a table's jobs need at a
scale, each with its state here and the command that provides it, derived from every job's composed `eval.py`
config: data and corpus files and the rows' trained exports (`files`), prebuilt indexes (`indexes`), models
(`models`), servers and credentials (`services`), optional packages and downloads (`extras`), GPU memory for
in-process engines (`gpu`). `python reproduce.py table=<t> scale=<s> check=true` prints it and runs nothing; a
normal run checks the jobs it is about to run and refuses (skips, naming what is missing) those that lack any.

Everything is asked the way the jobs will ask (`host`): so a stand-in environment (a fake `vllm` module on
PYTHONPATH, a local OpenAI-compatible server, a fake Hugging Face cache under HF_HOME) passes it as it passes
the jobs. A secret's value is never read into a need: credentials are named, present or not."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from hoprag.reproduce.plan import Job
from hoprag.reproduce.preflight.compose import compose_jobs
from hoprag.reproduce.preflight.extras import extra_needs
from hoprag.reproduce.preflight.files import data_needs, required
from hoprag.reproduce.preflight.gpu import gpu_needs
from hoprag.reproduce.preflight.host import Host
from hoprag.reproduce.preflight.indexes import index_needs
from hoprag.reproduce.preflight.models import model_needs
from hoprag.reproduce.preflight.need import MISSING, OK, UNKNOWN, Need
from hoprag.reproduce.preflight.services import service_needs
from hoprag.reproduce.preflight.view import JobView
from hoprag.reproduce.spec import Requirement, Table

INDEX_IN_RUN = ("smoke",)  # scales whose jobs build their own indexes (small corpora)
_WORSE = {OK: 0, UNKNOWN: 1, MISSING: 2}


@dataclass
class Preflight:
    """The needs of the jobs checked (deduplicated by kind and name, the worst state kept) and which jobs need
    each."""

    table: str
    scale: str
    jobs: list[str] = field(default_factory=list)
    needs: dict[tuple[str, str], Need] = field(default_factory=dict)
    users: dict[tuple[str, str], dict[str, None]] = field(default_factory=dict)

    def add(self, need: Need, job: str) -> None:
        known = self.needs.get(need.key)
        if known is None or _WORSE[need.state] > _WORSE[known.state]:
            self.needs[need.key] = need
        self.users.setdefault(need.key, {})[job] = None

    @property
    def missing(self) -> list[Need]:
        return [n for n in self.needs.values() if n.state == MISSING]

    def lacking(self, job: str) -> list[Need]:
        """What `job` needs that is missing."""
        return [n for n in self.missing if job in self.users[n.key]]


def check(
    table: Table,
    scale: str,
    jobs: Sequence[Job],
    host: Host | None = None,
    index_in_run: Sequence[str] = INDEX_IN_RUN,
) -> Preflight:
    """The needs of `jobs` (those not skipped) at `scale`, each job's config composed once."""
    host = host or Host()
    found = Preflight(table.name, scale)
    runnable = [j for j in jobs if not j.skip]
    for job, cfg in compose_jobs(runnable, with_choices=True):
        found.jobs.append(job.name)
        view = JobView.of(cfg, job.overrides)
        for need in job_needs(view, table.row(job.row).requires[scale], host, scale not in index_in_run):
            found.add(need, job.name)
    return found


def job_needs(view: JobView, requirements: Sequence[Requirement], host: Host, prebuilt: bool) -> Iterator[Need]:
    """One job's needs; `prebuilt`: its indexes must exist before it starts."""
    yield from required(requirements)
    yield from data_needs(view.sections["data"], host)
    if prebuilt:
        yield from index_needs(view, host)
    yield from model_needs(view.built, host)
    yield from service_needs(view.built, host)
    yield from extra_needs(view.built, host)
    yield from gpu_needs(view.built, host)


def refuse(jobs: Sequence[Job], found: Preflight) -> list[Job]:
    """`jobs`, those that lack a need skipped with the reason (each missing need and the command that makes it)."""
    return [replace(j, skip="; ".join(n.reason for n in lacking)) if (lacking := found.lacking(j.name)) else j
            for j in jobs]  # fmt: skip


__all__ = ["INDEX_IN_RUN", "Host", "Need", "Preflight", "check", "compose_jobs", "refuse"]
