"""What a trained question model's export records beside its weights: `router.json`, with the settings it was
trained for and the questions it was trained on (the LoRA router's, the classifier router's and the domain
classifier's exports alike), so that a run can check both before it uses the export."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hoprag.data.heldout import SETTINGS_FILE, context_of
from hoprag.data.types import QAExample


def question_record(ex: QAExample) -> dict[str, str]:
    """What the leakage check needs of a training question: its id, context and text."""
    return {"id": ex.id, "context": context_of(ex), "question": ex.question}


def from_question_record(record: Mapping[str, str]) -> QAExample:
    """A stand-in question for `check_disjoint`, rebuilt from its record."""
    return QAExample(record["id"], record["question"], [], metadata={"context_uid": record["context"]})


def read_router_settings(directory: str | Path) -> dict[str, Any]:
    """A router export's `router.json`: what it was trained for (option set, prompt version, base model or
    embedder) and on (`trained_on`, question records)."""
    path = Path(directory) / SETTINGS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: a router export (train.py +model=router_tatqa or source_router_crag, "
                                "+model=router_classifier) writes it beside its weights")  # fmt: skip
    return json.loads(path.read_text(encoding="utf-8"))
