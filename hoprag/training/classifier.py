"""A frozen sentence embedder and a linear head over a question, served from its export: `head.pt` (the linear
layer) beside `router.json` (the embedder's config, the classes, the questions trained on).

`hoprag.routers.classifier` trains it (`python train.py +model=router_classifier` for router letters,
`+model=domain_classifier` for CRAG's domains) and routes with a router export (`ClassifierRouter`);
`LabelClassifier` predicts the labels of a label export, e.g. the API source's `domain=embedding`
(hoprag/sources/api/domain.py). Both refuse the questions an export was trained on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from hoprag.data.types import QAExample
from hoprag.retrieval.embedders import Embedder
from hoprag.training.exports import from_question_record, read_router_settings
from hoprag.training.splits import check_disjoint

HEAD_FILE = "head.pt"


class LabelClassifier:
    """Predicts labels with an export trained with `labels` (CRAG's domains: `train.py +model=domain_classifier`)."""

    def __init__(
        self, embedder: Embedder, head: torch.nn.Linear, labels: Sequence[str], trained_on: Sequence[QAExample] = ()
    ) -> None:
        if head.out_features != len(labels):
            raise ValueError(f"a head of {head.out_features} outputs for {len(labels)} labels")
        self.embedder = embedder
        self.head = head.eval()
        self.labels = tuple(labels)
        self.trained_on = list(trained_on)

    @classmethod
    def load(cls, directory: str | Path) -> LabelClassifier:
        directory = Path(directory)
        settings, head, trained_on = read_export(directory)
        if "labels" not in settings:
            raise ValueError(f"{directory} is a router export (options {settings.get('options')}): load it with "
                             "ClassifierRouter")  # fmt: skip
        return cls(load_embedder(settings), head, settings["labels"], trained_on)

    def check_unseen(self, examples: Sequence[QAExample]) -> None:
        """Refuse to predict for questions (or contexts, or question texts) this classifier was trained on."""
        check_disjoint(self.trained_on, examples)

    def predict(self, questions: Sequence[str]) -> list[str]:
        return [self.labels[i] for i in top_classes(self.embedder, self.head, questions)]


def read_export(directory: Path) -> tuple[dict[str, Any], torch.nn.Linear, list[QAExample]]:
    """An export's settings (`router.json`), its linear head (`head.pt`) and the questions it was trained on;
    `load_embedder(settings)` builds its embedder (after the caller has checked the export's kind)."""
    settings = read_router_settings(directory)
    state = torch.load(directory / HEAD_FILE, map_location="cpu", weights_only=True)
    head = torch.nn.Linear(state["weight"].shape[1], state["weight"].shape[0])
    head.load_state_dict(state)
    trained_on = [from_question_record(r) for r in settings.get("trained_on", [])]
    return settings, head, trained_on


def load_embedder(settings: Mapping[str, Any]) -> Embedder:
    from hydra.utils import instantiate

    return instantiate(settings["embedder"])


def top_classes(embedder: Embedder, head: torch.nn.Linear, questions: Sequence[str]) -> list[int]:
    """The head's top class for each question."""
    if not questions:
        return []
    vectors = torch.from_numpy(embedder.encode_queries(list(questions))).float()
    with torch.no_grad():
        return head(vectors).argmax(-1).tolist()
