"""NLI pairs for training a cross-encoder verifier: sources, tokenisation and length-grouped batches.

Three roles, kept apart: `train` pairs fit the weights, `val` pairs select the checkpoint (and stop early), and
`test` pairs are scored once, with the selected checkpoint, for the figures to report. A file shared by two
roles must be sliced into disjoint index ranges; the datamodule refuses overlapping slices.

The shared MultiNLI/SNLI files are PTB-tokenised (`ca n't`, `it 's`, ` .`) while the verifier scores ordinary
text, so pairs are detokenised by default. Training batches are grouped by length (sorted within shuffled
pools, `hoprag.training.sampler`) so little compute goes to padding, which on CPU is most of the speed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader, Subset

from hoprag.data.nli import NLIPair, load_nli
from hoprag.paths import data_root
from hoprag.training.distributed import device_batch, whole_set
from hoprag.training.sampler import LengthGroupedSampler
from hoprag.utils.bundled import resolve_model_ref

_PTB_RULES = [
    (re.compile(r" (n't|'s|'re|'ve|'m|'ll|'d)\b", re.I), r"\1"),
    (re.compile(r" ([.,;:!?%)\]}])"), r"\1"),
    (re.compile(r"([(\[{$]) "), r"\1"),
    (re.compile(r"`` ?| ?''"), '"'),
    (re.compile(r" +"), " "),
]


def ptb_detokenize(text: str) -> str:
    """Undo PTB tokenisation for the common cases: `ca n't` → `can't`, `it 's` → `it's`, `word .` → `word.`."""
    for pattern, repl in _PTB_RULES:
        text = pattern.sub(repl, text)
    return text.strip()


def _span(spec: Mapping[str, Any]) -> tuple[int, float]:
    stop = spec.get("stop")
    return spec.get("start") or 0, float("inf") if stop is None else stop


def overlapping_slices(roles: Mapping[str, Mapping[str, Mapping[str, Any]]], root: Path) -> list[str]:
    """`role/name & role/name` for each two sources of different roles (train, val, test) that share indices
    of one file: a pair trained on, or selected on, must not be scored later. Negative indices count as
    overlapping (not supported)."""
    sources = [
        (role, f"{role}/{name}", (root / spec["file"]).resolve(), _span(spec))  # an absolute file replaces root
        for role, specs in roles.items()
        for name, spec in specs.items()
    ]
    clashes = []
    for i, (role, name, path, (start, stop)) in enumerate(sources):
        for other_role, other, other_path, (lo, hi) in sources[i + 1 :]:
            if role == other_role or path != other_path:
                continue
            if min(start, stop, lo, hi) < 0 or max(start, lo) < min(stop, hi):
                clashes.append(f"{name} & {other}")
    return clashes


def load_source(spec: Mapping[str, Any], root: Path, detokenize: bool) -> list[NLIPair]:
    """`{file, start, stop}` (a slice, so one file can feed both training and validation) → pairs."""
    path = Path(spec["file"])
    pairs = load_nli(path if path.is_absolute() else root / path)[spec.get("start") or 0 : spec.get("stop")]
    if detokenize:
        pairs = [NLIPair(ptb_detokenize(p.premise), ptb_detokenize(p.hypothesis), p.label, p.source) for p in pairs]
    return pairs


class TokenizedPairs(torch.utils.data.Dataset):
    def __init__(self, pairs: Sequence[NLIPair], tokenizer: Any, max_length: int) -> None:
        enc = tokenizer([p.premise for p in pairs], [p.hypothesis for p in pairs], truncation=True, max_length=max_length)
        self.features = [{k: enc[k][i] for k in enc.keys()} for i in range(len(pairs))]
        self.labels = [p.label for p in pairs]
        self.lengths = [len(f["input_ids"]) for f in self.features]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {**self.features[i], "labels": self.labels[i]}


class NLIDataModule(L.LightningDataModule):
    """Training pairs from `train` sources; one loader per `val` source (checkpoint selection) and per `test`
    source (scored only after fitting, so they cannot influence selection); accuracy is logged per source.

    Each source is `{file, start, stop}`, with `file` relative to the data root (`data_dir`, else
    `hoprag.paths.data_root()`). `val` and `test` map a short name (`heldout`, `matched`, `snli`) to a source;
    a file used in two roles must be sliced into disjoint parts (checked in `setup`).
    """

    def __init__(
        self,
        tokenizer: str,
        train: Sequence[Mapping[str, Any]],
        val: Mapping[str, Mapping[str, Any]],
        test: Mapping[str, Mapping[str, Any]] | None = None,
        data_dir: str | None = None,
        max_length: int = 128,
        batch_size: int = 32,
        eval_batch_size: int = 128,
        length_grouped: bool = True,
        detokenize: bool = True,
        num_workers: int = 0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        self.tokenizer_ref = tokenizer
        self.train_specs, self.val_specs, self.test_specs = list(train), dict(val), dict(test or {})
        self.data_dir, self.max_length, self.batch_size = data_dir, max_length, batch_size
        self.eval_batch_size, self.length_grouped, self.detokenize = eval_batch_size, length_grouped, detokenize
        self.num_workers, self.seed = num_workers, seed
        self.train_set: TokenizedPairs | None = None
        self.val_sets: dict[str, TokenizedPairs] = {}
        self.test_sets: dict[str, TokenizedPairs] = {}

    @property
    def val_names(self) -> list[str]:
        """Validation sources in dataloader order."""
        return list(self.val_specs)

    @property
    def test_names(self) -> list[str]:
        """Test sources in dataloader order."""
        return list(self.test_specs)

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(resolve_model_ref(self.tokenizer_ref))
        root = data_root(self.data_dir)
        roles = {"train": dict(enumerate(self.train_specs)), "val": self.val_specs, "test": self.test_specs}
        if clashes := overlapping_slices(roles, root):
            raise ValueError(f"NLI slices of different roles overlap: {', '.join(clashes)}")
        train = [p for spec in self.train_specs for p in load_source(spec, root, self.detokenize)]
        if not train:
            raise ValueError(f"the NLI training sources {self.train_specs} hold no pairs")
        self.train_set = TokenizedPairs(train, self.tokenizer, self.max_length)
        for specs, sets in ((self.val_specs, self.val_sets), (self.test_specs, self.test_sets)):
            for name, spec in specs.items():
                sets[name] = TokenizedPairs(load_source(spec, root, self.detokenize), self.tokenizer, self.max_length)

    def _collate(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return self.tokenizer.pad(features, return_tensors="pt")

    def train_dataloader(self) -> DataLoader:
        """`batch_size` pairs a step over all devices (Lightning shards the pairs, or the length-grouped batches,
        under DDP)."""
        assert self.train_set is not None
        batch_size = device_batch(self.batch_size, self.trainer, "pairs")
        if self.length_grouped:
            sampler = LengthGroupedSampler(self.train_set.lengths, batch_size, seed=self.seed)
            return DataLoader(self.train_set, batch_sampler=sampler, collate_fn=self._collate, num_workers=self.num_workers)
        return DataLoader(self.train_set, batch_size, shuffle=True, collate_fn=self._collate,
                          num_workers=self.num_workers)

    def val_dataloader(self) -> list[DataLoader]:
        return [self._eval_loader(self.val_sets[name]) for name in self.val_names]

    def test_dataloader(self) -> list[DataLoader]:
        return [self._eval_loader(self.test_sets[name]) for name in self.test_names]

    def _eval_loader(self, dataset: TokenizedPairs) -> DataLoader:
        """The whole set on every rank, in batches of similar length (the order does not change accuracy)."""
        by_length = Subset(dataset, sorted(range(len(dataset)), key=dataset.lengths.__getitem__))
        return DataLoader(by_length, self.eval_batch_size, sampler=whole_set(by_length), collate_fn=self._collate,
                          num_workers=self.num_workers)  # fmt: skip
