"""Train one trainable component with Lightning.

    python train.py +model=treehop [trainer.max_epochs=20] [threads=1]
    python train.py +model=nli_verifier trainer=gpu
    python train.py +experiment=treehop_2wiki_bge_m3 trainer=ddp   # every GPU; trainer=ddp_cpu: CPU processes
    python train.py -m +model=treehop seed=1,2,3                 # a sweep

Checkpoints go to `<run>/checkpoints`: the best epoch's, and `last.ckpt` rewritten at every epoch's end; logs to
CSV and wandb (offline). Rerunning with the same `hydra.run.dir` resumes from `last.ckpt` (a killed run loses at
most the epoch in flight), saying after which epoch and the best so far, unless the rerun's training settings
differ from those the run was started with (`run_fingerprint.json`; `RESUMABLE` lists what may change): then it
is refused, naming the differing keys, and `ckpt_path=null` trains afresh. A module with an `export(dir)` method
writes the best checkpoint's weights to `<run>/export`, and copies it to the model's `publish_dir` when it has
one (where eval configs look for it by default). It ends with the exported epoch's validation figures beside the
untrained start and the last epoch, the epochs before a resume included (`hoprag/training/summary.py`,
`hoprag/training/checkpoints.py`; `verbose=true` also shows Lightning's own banners and tables). Returns
`optimized_metric` (the model's monitored metric) for sweepers. Secrets
(`*_key`, `*token`, ... settings) are redacted in everything written (hoprag/utils/secrets.py).

Data parallel (`trainer=ddp`): Lightning starts one process per device, each running this script again. The
datamodule prepares its data (what it caches: embeddings, indexes, outcome labels) before any of them starts
and before the model is built (`prepare_first`), so the others only read it and a labelling engine is gone
before the trained model loads; the config's batch size is the global one (hoprag/training/distributed.py).
Only the first process writes the run's bookkeeping, exports and prints the summary.
"""

from __future__ import annotations

import shutil
from contextlib import nullcontext
import sys
from pathlib import Path

import hydra
import lightning as L
import torch
from hydra.utils import instantiate
from lightning.pytorch.utilities import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from hoprag.config import check_config, register_resolvers, select_settings
from hoprag.evaluation.fingerprint import refuse_changed, save, save_hydra_files
from hoprag.training.checkpoints import Best, best_checkpoint, monitored, resume_note
from hoprag.training.progress_bar import LineProgressBar
from hoprag.training.summary import EpochHistory, training_summary
from hoprag.utils import progress, quiet, run_lock
from hoprag.utils.loggers import log_config
from hoprag.utils.refusals import reported
from hoprag.utils.run_dirs import leaves_no_empty_run

register_resolvers()

# A resume must match the checkpoint's run in these sections, except for the RESUMABLE keys: how long training
# goes on (a larger max_epochs extends a run), how it logs, and paths. Anything else (lr, data, sizes, seed,
# precision, devices, early stopping) would carry the old optimizer state and "best" score into other settings.
# (EarlyStopping restores its own patience from the checkpoint, so that one cannot change on resume either.)
TRAIN_SECTIONS = ("model", "trainer", "callbacks", "seed")
RESUMABLE = (
    "trainer.max_epochs", "trainer.max_steps", "trainer.max_time", "trainer.log_every_n_steps",
    "trainer.enable_progress_bar", "trainer.num_sanity_val_steps", "*.default_root_dir", "*.dirpath",
    "*.cache_dir", "*.data_dir", "*.root", "model.publish_dir", "*.embedder.device", "*.embedder.batch_size",
)  # fmt: skip


def require_model(cfg: DictConfig) -> None:
    """Stop with the list of models when the command line added none (`+model=` is how one is chosen)."""
    if cfg.get("model") is None:
        choices = sorted(p.stem for p in (Path(cfg.paths.root_dir) / "conf" / "model").glob("*.yaml"))
        raise SystemExit(f"choose a model: +model={{{','.join(choices)}}}")


def resume_path(cfg: DictConfig) -> str | None:
    """`ckpt_path: auto` resumes a killed run from its own last checkpoint, when there is one and the run was
    started with the same training settings (else `ResumeRefused`); a start from anything else records them
    (the first process does: DDP's others come to the same answer).
    An explicit `ckpt_path` is the user's choice (e.g. fine-tuning another run's weights) and is not checked."""
    output_dir = Path(cfg.paths.output_dir)
    fingerprint = select_settings(cfg, TRAIN_SECTIONS, RESUMABLE)
    last = output_dir / "checkpoints" / "last.ckpt"
    if cfg.ckpt_path == "auto" and last.exists():
        refuse_changed(output_dir, fingerprint, what="checkpoints", remedy="ckpt_path=null to train afresh here")
        print(resume_note(last, cfg.trainer.get("max_epochs")))
        return str(last)
    if rank_zero_only.rank == 0:
        save(output_dir, fingerprint)
    return None if cfg.ckpt_path == "auto" else cfg.ckpt_path


def prepare_first(datamodule: L.LightningDataModule, trainer: L.Trainer) -> None:
    """Run the datamodule's `prepare_data` (what it computes once and caches) here, before the model is built and
    before the trainer starts DDP's other processes: they find it done, and no process group is open yet, which
    an LLM engine labelling data (vLLM) must not meet. Only in the process that starts the others (or runs
    alone), on every node, or on the first alone where the datamodule prepares once for all; where a cluster
    starts every process itself (SLURM tasks, torchrun), Lightning's own call inside `fit` prepares, the other
    processes waiting for it."""
    environment = getattr(trainer.strategy, "cluster_environment", None)
    if environment is not None and environment.creates_processes_externally:
        return
    if datamodule.prepare_data_per_node or trainer.node_rank == 0:
        datamodule.prepare_data()


def export_best(module: L.LightningModule, best: Best | None, directory: Path) -> None:
    """Load the best checkpoint's weights into the module and let it write its own deployable folder."""
    if best:
        module.load_state_dict(torch.load(best.path, map_location="cpu", weights_only=False)["state_dict"])
    module.export(directory)
    print(f"exported {f'best weights (epoch {best.epoch})' if best else 'final weights'} to {directory}")


def publish(export: Path, target: str) -> None:
    """Copy the export where the evaluation configs look for it by default (the model's `publish_dir`)."""
    staging = Path(f"{target}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(export, staging)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # a reader never sees half a folder
    print(f"published {export} to {target}")


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
@reported
@leaves_no_empty_run
def main(cfg: DictConfig) -> float | None:
    # one writer per run directory; DDP's other ranks start this script again in rank 0's directory, which it holds
    with run_lock.hold(cfg.paths.output_dir, "train.py") if rank_zero_only.rank == 0 else nullcontext():
        return train(cfg)


def train(cfg: DictConfig) -> float | None:
    require_model(cfg)
    check_config(cfg)
    progress.configure(cfg.get("progress"))  # before anything that draws a bar
    quiet.configure(cfg.get("verbose"))
    ckpt_path = resume_path(cfg) if cfg.train else None  # refused before anything is built or written
    if rank_zero_only.rank == 0:
        save_hydra_files(cfg.paths.output_dir, cfg)
    if cfg.get("threads"):
        torch.set_num_threads(cfg.threads)
    L.seed_everything(cfg.seed, workers=True)

    datamodule: L.LightningDataModule = instantiate(cfg.model.datamodule)
    history = EpochHistory()
    callbacks = [instantiate(c) for c in (cfg.get("callbacks") or {}).values()] + [history]
    if progress.style() == progress.LINES:  # a log or a pipe: Lightning's bars as plain lines too
        callbacks.append(LineProgressBar())
    loggers = [instantiate(c) for c in (cfg.get("logger") or {}).values()]
    shown = {"enable_progress_bar": False} if progress.style() == progress.OFF else {}  # Lightning's bar too
    if not cfg.get("verbose") and "enable_model_summary" not in cfg.trainer:  # its table; modules name their size
        shown["enable_model_summary"] = False
    trainer: L.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers or False, **shown)
    prepare_first(datamodule, trainer)
    module: L.LightningModule = instantiate(cfg.model.module)
    for logger in loggers:
        log_config(logger, OmegaConf.to_container(cfg, resolve=True))

    if cfg.train:
        trainer.fit(module, datamodule=datamodule, ckpt_path=ckpt_path)
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}  # the last epoch's
    checkpoint = monitored(trainer)
    best = best_checkpoint(trainer)  # what is tested, exported and summed up
    if best is not None:
        metrics[f"best/{checkpoint.monitor}"] = best.score
    tested: dict[str, float] = {}
    if cfg.test and type(module).test_step is not L.LightningModule.test_step:
        verbose = bool(cfg.get("verbose"))  # Lightning's own table of the test figures; the summary shows them
        for results in trainer.test(module, datamodule=datamodule, ckpt_path=best and best.path, verbose=verbose):
            tested |= {k: float(v) for k, v in results.items()}
        metrics |= tested
    if cfg.export and hasattr(module, "export") and trainer.is_global_zero:
        export_best(module, best, Path(cfg.paths.output_dir) / "export")
        if cfg.model.get("publish_dir"):
            publish(Path(cfg.paths.output_dir) / "export", cfg.model.publish_dir)

    if "wandb" in sys.modules:  # one wandb run per Hydra job of a multirun
        sys.modules["wandb"].finish()
    monitor = checkpoint.monitor if checkpoint is not None else None
    if trainer.is_global_zero:
        print(training_summary(history, monitor, best, history.untrained, tested))
        print(f"run directory: {cfg.paths.output_dir}")
    return metrics.get(f"best/{cfg.optimized_metric}", metrics.get(cfg.optimized_metric))


if __name__ == "__main__":
    main()
