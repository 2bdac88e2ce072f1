"""Reproduce one paper's headline table: every row as one multirun of `eval.py`, the table in the paper's layout.

    python reproduce.py table=<name> [scale=smoke|paper|rehearsal] [hydra/launcher=joblib hydra.launcher.n_jobs=2]
    python reproduce.py table=prunerag_t1 scale=paper gpus_per_job=1 hydra/launcher=joblib hydra.launcher.n_jobs=8
    python reproduce.py table=<name> scale=paper --cfg job        # the table and its settings, nothing run
    python reproduce.py table=<name> scale=paper check=true       # what its jobs need and what is missing here

Tables (conf/table/): treehop_t2, sc_rag_t3, sc_rag_t5, prunerag_t1, treerare_t1, pruningrag_t3, pruningrag_t8.
`scale=smoke` runs the rows on the bundled samples with the offline models and a small `limit` (mechanics, not
quality); `scale=paper` with the paper's models, corpora and sample sizes (a GPU, the full data);
`scale=rehearsal` the paper scale's jobs here, with stand-ins for the weights, vLLM, served models and the full
data (hoprag/reproduce/rehearsal.py: code paths, not figures). Runs go to
`logs/reproduce/<table>/<scale>/runs/<row>/<group>`: a finished run is not rerun, a stopped one resumes, and a
rerun of a finished table runs nothing and writes the same table (table.md, table.csv, paired.csv, table.html
beside the runs). `'job_overrides=["show=0","llm.threads=1"]'` sets every run's overrides (run control such as
`llm.threads` reruns nothing); `overwrite=true` starts every run afresh. Every run starts with the preflight
(hoprag/reproduce/preflight/): the files, indexes, models, servers, credentials, extras and GPU memory the jobs
need, each with its state and the command that provides it; a job that lacks one is skipped, naming it.
`check=true` prints that table for every job and runs nothing, exiting 1 when anything is missing.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from hoprag.config import check_config, check_known, register_resolvers
from hoprag.reproduce import Table, forwarded, rehearsal, reproduce
from hoprag.reproduce.preflight import Host
from hoprag.reproduce.preflight.report import render
from hoprag.reproduce.render import markdown
from hoprag.reproduce.runner import check
from hoprag.utils.refusals import reported

register_resolvers()


@hydra.main(version_base="1.3", config_path="conf", config_name="reproduce")
@reported
def main(cfg: DictConfig) -> None:
    check_known(cfg)
    check_config(OmegaConf.masked_copy(cfg, [k for k in cfg if k != "table"]))  # a table's texts are not settings
    table = Table.parse(OmegaConf.to_container(cfg.table, resolve=True))  # type: ignore[arg-type]
    gpus = rehearsal.gpus() if cfg.scale == "rehearsal" else None  # the stand-in engine's simulated GPU
    host, index_in_run = Host(timeout=cfg.preflight.timeout, gpus=gpus), list(cfg.preflight.index_in_run)
    job_overrides = [*cfg.job_overrides, *([f"gpus_per_job={cfg.gpus_per_job}"] if cfg.gpus_per_job else [])]
    if cfg.check:
        found = check(table, cfg.scale, Path(cfg.out_dir), job_overrides, host, index_in_run)
        print(render(found), end="")
        if found.missing:
            raise SystemExit(f"{len(found.missing)} of {len(found.needs)} needs missing (listed above)")
        return
    report, unfinished = reproduce(
        table,
        cfg.scale,
        Path(cfg.out_dir),
        job_overrides=job_overrides,
        hydra_overrides=forwarded(HydraConfig.get().overrides.hydra),
        overwrite=cfg.overwrite,
        resamples=cfg.resamples,
        seed=cfg.seed,
        host=host,
        index_in_run=index_in_run,
    )
    print(markdown(report), end="")
    print(f"written to {cfg.out_dir}")
    if unfinished:
        raise SystemExit(f"{len(unfinished)} runs did not finish: " + ", ".join(j.name for j in unfinished))


if __name__ == "__main__":
    main()
