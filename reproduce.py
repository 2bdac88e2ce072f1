"""Reproduce one paper's headline table: every row as one multirun of `eval.py`, the table in the paper's layout.

    python reproduce.py table=<name> [scale=smoke|paper] [hydra/launcher=joblib hydra.launcher.n_jobs=2]
    python reproduce.py table=<name> scale=paper --cfg job        # the table and its settings, nothing run

Tables (conf/table/): treehop_t2, sc_rag_t3, sc_rag_t5, prunerag_t1, treerare_t1, pruningrag_t3, pruningrag_t8.
`scale=smoke` runs the rows on the bundled samples with the offline models and a small `limit` (mechanics, not
quality); `scale=paper` with the paper's models, corpora and sample sizes (a GPU, the full data). Runs go to
`logs/reproduce/<table>/<scale>/runs/<row>/<group>`: a finished run is not rerun, a stopped one resumes, and a
rerun of a finished table runs nothing and writes the same table (table.md, table.csv, paired.csv, table.html
beside the runs). `'job_overrides=["show=0","llm.threads=1"]'` sets every run's overrides (run control such as
`llm.threads` reruns nothing); `overwrite=true` starts every run afresh.
"""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from hoprag.config import register_resolvers
from hoprag.reproduce import Table, forwarded, reproduce
from hoprag.reproduce.render import markdown

register_resolvers()


@hydra.main(version_base="1.3", config_path="conf", config_name="reproduce")
def main(cfg: DictConfig) -> None:
    table = Table.parse(OmegaConf.to_container(cfg.table, resolve=True))  # type: ignore[arg-type]
    report, unfinished = reproduce(
        table,
        cfg.scale,
        Path(cfg.out_dir),
        job_overrides=list(cfg.job_overrides),
        hydra_overrides=forwarded(HydraConfig.get().overrides.hydra),
        overwrite=cfg.overwrite,
        resamples=cfg.resamples,
        seed=cfg.seed,
    )
    print(markdown(report), end="")
    print(f"written to {cfg.out_dir}")
    if unfinished:
        raise SystemExit(f"{len(unfinished)} runs did not finish: " + ", ".join(j.name for j in unfinished))


if __name__ == "__main__":
    main()
