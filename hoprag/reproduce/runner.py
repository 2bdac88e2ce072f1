"""`reproduce.py`'s work: plan a table's jobs at a scale, check what the unfinished ones need (the preflight:
a job that lacks any need is refused, skipped with what it lacks, before any job starts), run the rest as ONE
Hydra multirun of `eval.py` (the row sweeper, `hydra/sweeper=rows`, with whatever launcher the command line
chose), then render the table from every finished run. A table whose jobs are all finished runs nothing and is
rendered again."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from hoprag.paths import PROJECT_ROOT
from hoprag.reproduce import preflight, rehearsal, render
from hoprag.reproduce.plan import RUNS, Job, plan
from hoprag.reproduce.preflight import INDEX_IN_RUN, Host, Preflight
from hoprag.reproduce.preflight.report import render as preflight_table
from hoprag.reproduce.spec import SCALES, Table, TableError, as_lines
from hoprag.utils import run_lock
from hoprag.utils.secrets import is_secret

log = logging.getLogger(__name__)

# reproduce.py's own Hydra overrides that concern the rows' multirun, forwarded to it
FORWARDED = ("hydra/launcher", "hydra.launcher.", "hydra.sweeper.max_batch_size")
JOBS = "jobs.json"


def forwarded(hydra_overrides: Sequence[str]) -> list[str]:
    """The launcher overrides of reproduce.py's command line (`hydra/launcher=joblib hydra.launcher.n_jobs=2`)."""
    return [o for o in hydra_overrides if o.lstrip("+~").startswith(FORWARDED)]


def multirun_command(out_dir: Path, hydra_overrides: Sequence[str] = ()) -> list[str]:
    """`eval.py -m` over the jobs written to `<out_dir>/jobs.json`, each in `<out_dir>/runs/<row>/<group>`."""
    return [sys.executable, str(PROJECT_ROOT / "eval.py"), "-m", "hydra/sweeper=rows",
            f"hydra.sweeper.jobs_file={out_dir / JOBS}", f"hydra.sweep.dir={out_dir / RUNS}",
            *hydra_overrides]  # fmt: skip


def launch(jobs: Sequence[Job], out_dir: Path, hydra_overrides: Sequence[str] = ()) -> int:
    """Run `jobs` as one multirun of `eval.py` in a child process; its exit status. The jobs file holds the
    overrides as given, so a secret (`llm.api_key=...`) is refused: keys come from the environment."""
    secrets = sorted({o.split("=", 1)[0] for j in jobs for o in j.overrides if is_secret(o.split("=", 1)[0])})
    if secrets:
        raise TableError(f"{', '.join(secrets)}: give keys through the environment (e.g. OPENAI_API_KEY), not as "
                         f"overrides, which {out_dir / JOBS} would hold")  # fmt: skip
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / JOBS).write_text(json.dumps([j.sweep_overrides() for j in jobs], indent=1) + "\n", encoding="utf-8")
    command = multirun_command(out_dir, hydra_overrides)
    log.info("running %d jobs as one multirun: %s", len(jobs), as_lines(command[1:]))
    return subprocess.run(command, cwd=PROJECT_ROOT, check=False).returncode


def check(
    table: Table,
    scale: str,
    out_dir: Path,
    job_overrides: Sequence[str] = (),
    host: Host | None = None,
    index_in_run: Sequence[str] = INDEX_IN_RUN,
) -> Preflight:
    """What every job of `table` that runs at `scale` needs (`check=true`: nothing is run); at scale=rehearsal
    asked in the rehearsal's environment of stand-ins, for its own exports."""
    _known(scale)
    table = _rehearsed(table, scale)
    with rehearsal.applied(scale):
        return preflight.check(table, scale, plan(table, scale, out_dir, job_overrides),
                               _host(scale, host), index_in_run)  # fmt: skip


def reproduce(
    table: Table,
    scale: str,
    out_dir: Path,
    job_overrides: Sequence[str] = (),
    hydra_overrides: Sequence[str] = (),
    overwrite: bool = False,
    resamples: int = 10_000,
    seed: int = 0,
    host: Host | None = None,
    index_in_run: Sequence[str] = INDEX_IN_RUN,
) -> tuple[render.Report, list[Job]]:
    """Run what `table` still lacks at `scale` and write its files into `out_dir`; the report and the jobs that
    were to run but have not finished (failed, or stopped). The jobs to run are checked first (`host`: this
    machine; `index_in_run`: the scales whose jobs may build their own indexes); those that lack a need are
    refused. At scale=rehearsal the indexes and exports found missing are first made as a user would make them
    (`rehearsal.provide`), under the rehearsal's root."""
    _known(scale)
    table = _rehearsed(table, scale)
    with run_lock.hold(out_dir, "reproduce.py"):  # one writer per table: its jobs.json, runs and table files
        shared = [*job_overrides, *(["overwrite=true"] if overwrite else [])]
        jobs = plan(table, scale, out_dir, shared)
        due = {j.name for j in jobs if not j.skip and (overwrite or not j.finished())}
        with rehearsal.applied(scale):
            host = _host(scale, host)
            found = preflight.check(table, scale, [j for j in jobs if j.name in due], host, index_in_run)
            exports = {r.command for row in table.rows for r in row.requires[scale]}
            needed = [n.command for n in found.missing if n.kind == "index" or n.command in exports]
            provided = list(dict.fromkeys(needed))
            if scale == "rehearsal" and provided:  # the rehearsal makes them as a user would, then checks again
                rehearsal.provide(provided, exports)
                host = Host(env=host.env, timeout=host.timeout, gpus=host.gpus)  # asked afresh: nothing remembered
                found = preflight.check(table, scale, [j for j in jobs if j.name in due], host, index_in_run)
            log.info("preflight:\n%s", preflight_table(found))
            jobs = preflight.refuse(jobs, found)
            todo = [j for j in jobs if j.name in due and not j.skip]
            for job in jobs:
                state = f"skipped: {job.skip}" if job.skip else ("to run" if job in todo else "finished")
                log.info("%-40s %s", job.name, state)
            if todo:
                status = launch(todo, out_dir, hydra_overrides)
                if status:
                    log.error("the multirun exited with status %d; the table shows what finished", status)
        report = render.build(table, scale, jobs, resamples, seed)
        render.write(report, out_dir)
        return report, [j for j in todo if not j.finished()]


def _rehearsed(table: Table, scale: str) -> Table:
    """At scale=rehearsal, `table` with its exports under the rehearsal's root (asked before it applies)."""
    return rehearsal.relocated(table) if scale == "rehearsal" else table


def _host(scale: str, host: Host | None) -> Host:
    """The machine the preflight asks: the given one, else this one (at scale=rehearsal with the stand-in GPU)."""
    if host is not None:
        return host
    return Host(gpus=rehearsal.gpus()) if scale == "rehearsal" else Host()


def _known(scale: str) -> None:
    if scale not in SCALES:
        raise TableError(f"scale={scale}: one of {', '.join(SCALES)}")
