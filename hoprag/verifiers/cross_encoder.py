"""A Hugging Face sequence-classification NLI model as a verifier (roberta-large-mnli, DeBERTa NLI, hoprag's own).

NLI checkpoints disagree on label order (roberta-large-mnli: contradiction, neutral, entailment; hoprag's
exported verifier: entailment, neutral, contradiction), so the column order is read from the model's
`config.id2label` and never assumed. A configured `labels` (the order the model card states) and, for
hoprag's own export, `base_model` (the backbone it was fine-tuned from, in its `verifier.json`) are checked
against the model: one that differs is refused naming each key, before any weights load where the model is a
local folder.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hoprag.utils.bundled import resolve_model_ref
from hoprag.utils.contract import refuse_mismatch
from hoprag.utils.device import resolve_device
from hoprag.verifiers.base import LABELS, Verifier

EXPORT_FILE = "verifier.json"  # written by hoprag's export: the labels it was trained with and its base model

# id2label names seen in NLI checkpoints → hoprag's label; matched on the lower-cased prefix
_NAME_PREFIXES = {"entail": "entailment", "neutral": "neutral", "contradict": "contradiction"}


def label_columns(id2label: dict[Any, str]) -> list[int]:
    """Model output column of each of `LABELS`, from a config's id2label (keys may be ints or strings)."""
    found: dict[str, int] = {}
    for idx, name in id2label.items():
        label = next((lab for pre, lab in _NAME_PREFIXES.items() if str(name).lower().startswith(pre)), None)
        if label is None or label in found:
            break
        found[label] = int(idx)
    if len(id2label) != 3 or set(found) != set(LABELS):
        raise ValueError(
            f"not a 3-way NLI model: config id2label is {dict(id2label)}; expected the labels "
            f"entailment, neutral and contradiction (any order, any case)"
        )
    return [found[label] for label in LABELS]


def label_map(id2label: Mapping[Any, str]) -> list[str]:
    """The labels in column order, named as hoprag names them where a known prefix matches."""
    names = [str(id2label[key]) for key in sorted(id2label, key=int)]
    return [next((lab for pre, lab in _NAME_PREFIXES.items() if n.lower().startswith(pre)), n) for n in names]


def check_verifier(
    path: str, id2label: Mapping[Any, str], labels: Sequence[str] | None, base_model: str | None
) -> None:
    """Refuse an NLI model whose label map (config.json's id2label, and for hoprag's export the labels of its
    `verifier.json`, which must agree) or base model differs from the configured `labels` / `base_model`
    (None: not configured), naming each differing key."""
    model = {"labels": label_map(id2label)}
    export = Path(path) / EXPORT_FILE
    if export.is_file():
        recorded = json.loads(export.read_text(encoding="utf-8"))
        refuse_mismatch(f"the verifier export {path}", recorded, model,
                        "its config.json was changed after the export: export it again",
                        ("verifier.json", "config.json"))  # fmt: skip
        model["base_model"] = recorded.get("base_model")
    configured = {"labels": None if labels is None else label_map(dict(enumerate(labels))), "base_model": base_model}
    refuse_mismatch(f"the NLI verifier {path}", model, {k: v for k, v in configured.items() if v is not None},
                    "set verifier.labels / verifier.base_model to the model's, or point verifier.model at the "
                    "model they describe", ("model", "config"))  # fmt: skip


class CrossEncoderVerifier(Verifier):
    """Scores (premise, hypothesis) pairs jointly with an NLI cross-encoder; softmax over its three labels.

    `model` is a local folder (e.g. `<run>/export` of `train.py +model=nli_verifier`), a hub id or a `pkg://`
    reference. Pairs are sorted by length and scored `batch_size` at a time, so padding stays small; pairs
    longer than `max_length` tokens are truncated (the longer side first). `labels` (the model's labels in
    column order) and `base_model` (hoprag's export: the backbone it was fine-tuned from) are checked against
    the model when given (`check_verifier`).
    """

    def __init__(
        self,
        model: str,
        device: str = "auto",
        batch_size: int = 32,
        max_length: int = 256,
        cache: bool = True,
        labels: Sequence[str] | None = None,
        base_model: str | None = None,
    ) -> None:
        super().__init__(cache)
        self.model = model
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.labels = list(labels) if labels is not None else None
        self.base_model = base_model
        self._loaded: tuple[Any, Any, list[int]] | None = None
        config = Path(resolve_model_ref(model)) / "config.json"
        if config.is_file():  # a local folder is checked now; a hub model once it loads
            self._check(json.loads(config.read_text(encoding="utf-8")).get("id2label", {}))

    def _check(self, id2label: Mapping[Any, str]) -> None:
        check_verifier(resolve_model_ref(self.model), id2label, self.labels, self.base_model)

    @property
    def columns(self) -> list[int]:
        """The model's output column for entailment, neutral and contradiction."""
        return self._load()[2]

    def _load(self) -> tuple[Any, Any, list[int]]:
        if self._loaded is None:
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            import hoprag.verifiers.mean_pool  # noqa: F401 - registers hoprag's mean-pooling classifier

            path = resolve_model_ref(self.model)
            if Path(path).is_absolute() and not Path(path).is_dir():
                raise FileNotFoundError(
                    f"NLI verifier folder {path} does not exist: train one with `python train.py +model=nli_verifier` "
                    f"and pass its `<run>/export` folder"
                )
            try:
                tokenizer = AutoTokenizer.from_pretrained(path)
                net = AutoModelForSequenceClassification.from_pretrained(path)
            except OSError as err:
                raise OSError(f"cannot load the NLI model {self.model!r} (offline, or not an HF model?): {err}") from err
            self._check(net.config.id2label)
            columns = label_columns(net.config.id2label)
            net.to(resolve_device(self.device)).eval()
            self._loaded = (tokenizer, net, columns)
        return self._loaded

    def _predict(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        import torch

        tokenizer, net, columns = self._load()
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        probs = np.empty((len(pairs), 3), dtype=np.float64)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            enc = tokenizer(
                [pairs[i][0] for i in batch],
                [pairs[i][1] for i in batch],
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            ).to(net.device)
            with torch.inference_mode():
                logits = net(**enc).logits.float()
            probs[batch] = torch.softmax(logits[:, columns], dim=-1).cpu().numpy()
        return probs

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"
