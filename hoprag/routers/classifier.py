"""A small classifier router: a frozen sentence embedder and a linear head over the option set's letters.

    python train.py +model=router_classifier        → <run>/export, copied to publish_dir

A cheap, trained reference point for the LLM routers (spec/pruningrag.md §5): it reads only the question,
as they do. Training uses the router-training split of `split_by_context` (gold labels: TAT-QA's
`answer_from`); a context-disjoint slice of that split selects the checkpoint, and the router-evaluation
split is scored only by the test loop. The question vectors are computed once (and cached on disk, keyed
by the embedder and the texts), so training itself takes seconds. `export(dir)` writes the head, the
embedder's config and the questions trained on; `ClassifierRouter.load(dir)` routes with them, and
evaluation refuses questions the export was trained on.

The same machinery learns any label a question file carries in its metadata (`label_field`, with `labels`
its classes): `python train.py +model=domain_classifier` learns CRAG's `domain`, and
`hoprag.training.classifier.LabelClassifier` predicts it (the API source's `domain=embedding`,
hoprag/sources/api/domain.py). Reading an export back (`read_export`, the head, the embedder) lives there too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from hoprag.cost import Cost, charge_evenly
from hoprag.data.dataset import QADataset
from hoprag.data.types import QAExample
from hoprag.metrics.routing import accuracy, macro_f1
from hoprag.paths import cache_root
from hoprag.retrieval.embedders import Embedder
from hoprag.routers.labels import gold_labels
from hoprag.routers.options import OptionSet, parse_option
from hoprag.routers.router import RouteDecision, check_none_policy, check_router_export, option_set
from hoprag.training.classifier import HEAD_FILE, load_embedder, read_export, top_classes
from hoprag.training.distributed import device_batch, report, whole_set, write_atomically
from hoprag.training.exports import SETTINGS_FILE, question_record
from hoprag.training.splits import check_disjoint, split_by_context
from hoprag.training.summary import parameter_line

log = logging.getLogger(__name__)


def vectors_path(questions: Sequence[str], embedder: Embedder, cache_dir: Path) -> Path:
    """`<cache_dir>/<embedder>-<digest>.npy`, named by the embedder and the texts."""
    key = json.dumps({"embedder": embedder.describe(), "query_prefix": embedder.query_prefix}, sort_keys=True)
    digest = hashlib.sha256(key.encode())
    digest.update("\n".join(questions).encode())
    return cache_dir / f"{embedder.name.replace('/', '_')}-{digest.hexdigest()[:16]}.npy"


def encode_cached(questions: Sequence[str], embedder: Embedder, cache_dir: Path) -> np.ndarray:
    """Question vectors, from their cache file (`vectors_path`) when the same embedder encoded the same texts; a
    file encoded here is written whole under a name of its own first, so a reader never meets half of one."""
    path = vectors_path(questions, embedder, cache_dir)
    if path.is_file():
        log.info("loaded cached question vectors from %s", path)
        return np.load(path)
    started = time.perf_counter()
    vectors = embedder.encode_queries(list(questions))
    seconds = time.perf_counter() - started
    print(f"router data: encoded {len(questions)} questions with {embedder.name} in {seconds:.1f} s")
    write_atomically(path, lambda f: np.save(f, vectors))
    return vectors


class RouterDataModule(L.LightningDataModule):
    """Question vectors and gold option letters: fit and select on the router-training split (its
    context-disjoint `val_fraction` slice selects), test on the router-evaluation split.

    `label_field` (with `labels`, its classes in order) learns that metadata field instead of the option
    letters, e.g. CRAG's `domain`; a question without one of `labels` there is refused."""

    def __init__(
        self,
        data: QADataset,
        embedder: Embedder,
        options: str = "tatqa",
        eval_fraction: float = 0.5,
        split_seed: int = 0,
        val_fraction: float = 0.2,
        batch_size: int = 64,
        cache_dir: str | None = None,
        label_field: str | None = None,
        labels: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        if (label_field is None) != (labels is None):
            raise ValueError("label_field and labels go together: the metadata field to learn and its classes")
        self.data = data
        self.embedder = embedder
        self.options = option_set(options)
        self.label_field = label_field
        self.classes: tuple[str, ...] = self.options.letters if labels is None else tuple(labels)
        self.eval_fraction = eval_fraction
        self.split_seed = split_seed
        self.val_fraction = val_fraction
        self.batch_size = batch_size
        self.cache_dir = Path(cache_dir) if cache_dir is not None else cache_root() / "routers"
        self.sets: dict[str, TensorDataset] = {}
        self.trained_on: list[QAExample] = []

    def prepare_data(self) -> None:
        """Encode the questions once when the cache lacks them: train.py calls this before DDP starts its other
        processes (Lightning again on each node's rank 0, the others waiting), so every rank's `setup` reads them."""
        questions = [ex.question for ex in self.data.examples]
        if not vectors_path(questions, self.embedder, self.cache_dir).is_file():
            encode_cached(questions, self.embedder, self.cache_dir)

    def setup(self, stage: str | None = None) -> None:
        if self.sets:
            return
        examples = self.data.examples
        train, evaluation = split_by_context(examples, self.eval_fraction, self.split_seed)
        fit, val = split_by_context(train, self.val_fraction, self.split_seed)
        self.trained_on = train  # the fit and selection questions both shape the exported head
        vectors = encode_cached([ex.question for ex in examples], self.embedder, self.cache_dir)
        row = {id(ex): i for i, ex in enumerate(examples)}
        for name, part in (("fit", fit), ("val", val), ("test", evaluation)):
            x = torch.from_numpy(vectors[[row[id(ex)] for ex in part]]).float()
            self.sets[name] = TensorDataset(x, torch.tensor(self.targets(part), dtype=torch.long))
        counts = {name: len(s) for name, s in self.sets.items()}
        target = f"options {self.options.name}" if self.label_field is None else f"labels of {self.label_field!r}"
        report(f"router data: {counts} questions (fit / select / evaluation), {target}")

    def targets(self, examples: Sequence[QAExample]) -> list[int]:
        """Each question's class index: its gold option letter, or its `label_field` value."""
        if self.label_field is None:
            return [self.classes.index(self.options.letter_of(s)) for s in gold_labels(examples)]
        found = [str(ex.metadata.get(self.label_field)) for ex in examples]
        bad = [(ex.id, label) for ex, label in zip(examples, found) if label not in self.classes]
        if bad:
            raise ValueError(f"{len(bad)} questions have no {self.label_field!r} among {list(self.classes)}, "
                             f"e.g. {bad[:3]}")  # fmt: skip
        return [self.classes.index(label) for label in found]

    def train_dataloader(self) -> DataLoader:
        """`batch_size` questions a step over all devices (Lightning shards them under DDP)."""
        batch_size = device_batch(self.batch_size, self.trainer, "questions")
        return DataLoader(self.sets["fit"], batch_size=batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._whole(self.sets["val"])

    def test_dataloader(self) -> DataLoader:
        return self._whole(self.sets["test"])

    @staticmethod
    def _whole(dataset: TensorDataset) -> DataLoader:
        """The set in one batch, on every rank."""
        return DataLoader(dataset, batch_size=len(dataset), sampler=whole_set(dataset))


class RouterClassifierModule(L.LightningModule):
    """A linear head (after dropout) from question vectors to option letters, trained with cross-entropy.

    `embedder` is the embedder's config (not an object): the export must rebuild the same embedder on its own.
    `class_weights="balanced"` weighs each class by the inverse of its training frequency (macro-F1 counts
    the rare "text only" class as much as "table only"). `labels` replaces the option letters by these
    classes (the datamodule's `label_field` values); `options` and `none_policy` then play no part.
    """

    def __init__(
        self,
        embedder: Mapping[str, Any],
        options: str = "tatqa",
        none_policy: str = "api",
        lr: float = 1e-2,
        weight_decay: float = 1e-4,
        dropout: float = 0.1,
        class_weights: str | None = "balanced",
        labels: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        from hydra.utils import instantiate
        from omegaconf import DictConfig, ListConfig, OmegaConf

        if isinstance(embedder, DictConfig):  # plain dicts in the checkpoint's hyperparameters
            embedder = OmegaConf.to_container(embedder, resolve=True)
        if isinstance(labels, ListConfig):
            labels = OmegaConf.to_container(labels)
        if class_weights not in (None, "balanced"):
            raise ValueError(f"class_weights must be 'balanced' or null, got {class_weights!r}")
        check_none_policy(none_policy)
        self.save_hyperparameters(logger=False)
        self.option_set = option_set(options)
        self.classes: tuple[str, ...] = self.option_set.letters if labels is None else tuple(labels)
        dim = instantiate(embedder).dim
        self.head = torch.nn.Sequential(torch.nn.Dropout(dropout), torch.nn.Linear(dim, len(self.classes)))
        frozen = embedder.get("name") or embedder.get("model") or "embedder"
        report(parameter_line("classifier", self.head, detail=f"; a linear head to {len(self.classes)} classes over "
                                                               f"{frozen}'s frozen vectors (not counted)"))
        self.register_buffer("weights", torch.ones(len(self.classes)))
        self.trained_on: list[dict[str, str]] = []
        self._seen: dict[str, tuple[list[int], list[int]]] = {}

    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is None:
            return
        if tuple(datamodule.classes) != self.classes:
            raise ValueError(f"the datamodule's classes {list(datamodule.classes)} are not the head's "
                             f"{list(self.classes)}")  # fmt: skip
        self.trained_on = [question_record(ex) for ex in datamodule.trained_on]
        if self.hparams.class_weights == "balanced":
            counts = torch.bincount(datamodule.sets["fit"].tensors[1], minlength=len(self.weights)).float()
            self.weights.copy_(torch.where(counts > 0, counts.sum() / (len(counts) * counts.clamp(min=1)), 0.0))

    def forward(self, vectors: torch.Tensor) -> torch.Tensor:
        return self.head(vectors)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self(x), y, weight=self.weights)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(y))
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._collect("val", batch)

    def test_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> None:
        self._collect("test", batch)

    def on_validation_epoch_end(self) -> None:
        self._log_epoch("val")

    def on_test_epoch_end(self) -> None:
        self._log_epoch("test")

    def _collect(self, stage: str, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        x, y = batch
        gold, pred = self._seen.setdefault(stage, ([], []))
        gold += y.tolist()
        pred += self(x).argmax(-1).tolist()

    def _log_epoch(self, stage: str) -> None:
        gold, pred = self._seen.pop(stage, ([], []))
        if gold:
            classes = range(len(self.classes))
            self.log(f"{stage}/acc", accuracy(gold, pred), prog_bar=True)
            self.log(f"{stage}/macro_f1", macro_f1(gold, pred, classes), prog_bar=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.head.parameters(), lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["trained_on"] = self.trained_on

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.trained_on = checkpoint.get("trained_on", [])

    def export(self, directory: str | Path) -> None:
        """`head.pt` (the linear layer's weights) and `router.json` (embedder config, option set and none
        policy or the labels, the questions trained on), which `ClassifierRouter.load` (or, for labels,
        `LabelClassifier.load`) reads."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        linear = self.head[-1]
        torch.save({k: v.detach().cpu() for k, v in linear.state_dict().items()}, directory / HEAD_FILE)
        settings: dict[str, Any] = {"embedder": self.hparams.embedder}
        if self.hparams.labels is None:
            settings |= {"options": self.option_set.name, "letters": list(self.option_set.letters),
                         "none_policy": self.hparams.none_policy}  # fmt: skip
        else:
            settings["labels"] = list(self.classes)
        settings["trained_on"] = self.trained_on
        (directory / SETTINGS_FILE).write_text(json.dumps(settings, indent=1, ensure_ascii=False), encoding="utf-8")


class ClassifierRouter:
    """Routes with an exported classifier: the embedder encodes the questions, the head picks a letter."""

    def __init__(
        self,
        embedder: Embedder,
        head: torch.nn.Linear,
        options: str = "tatqa",
        none_policy: str = "api",
        trained_on: Sequence[QAExample] = (),
        export: str | None = None,
    ) -> None:
        self.embedder = embedder
        self.head = head.eval()
        self.options = option_set(options)
        if head.out_features != len(self.options.letters):
            raise ValueError(f"a head of {head.out_features} outputs for the {len(self.options.letters)} options of "
                             f"{self.options.name}")  # fmt: skip
        self.none_policy = check_none_policy(none_policy)
        self.trained_on = list(trained_on)
        self.kind, self.export = "classifier", export  # what a run reports as `run.router` / `run.router_export`

    @classmethod
    def load(cls, directory: str | Path, options: str | OptionSet | None = None) -> ClassifierRouter:
        """The export in `directory`, refused unless it was trained for `options` (None: the option set it
        names) with that set's letters as they are now (`check_router_export`)."""
        directory = Path(directory)
        settings, head, trained_on = read_export(directory)
        if "options" not in settings:
            raise ValueError(f"{directory} classifies {settings.get('labels')}, not router options: "
                             "load it with LabelClassifier")  # fmt: skip
        wanted = option_set(settings["options"] if options is None else options)
        check_router_export(directory, settings, {"options": wanted.name, "letters": list(wanted.letters)})
        return cls(load_embedder(settings), head, wanted.name, settings["none_policy"], trained_on, str(directory))

    def check_unseen(self, examples: Sequence[QAExample]) -> None:
        """Refuse to evaluate on questions (or contexts, or question texts) this router was trained on."""
        check_disjoint(self.trained_on, examples)

    def route(self, questions: Sequence[str], costs: Sequence[Cost | None] | None = None) -> list[RouteDecision]:
        started = time.perf_counter()
        picks = top_classes(self.embedder, self.head, questions)
        share = charge_evenly(costs, time.perf_counter() - started)
        for cost in costs or ():
            if cost is not None:
                cost.seconds["route"] += share
        decisions = []
        for i in picks:
            letter = self.options.letters[i]
            sources, parsed = parse_option(letter, self.options, self.none_policy)
            decisions.append(RouteDecision(sources, letter, parsed))
        return decisions
