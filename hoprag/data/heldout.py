"""What identifies a question to a model trained on questions (a source router, a domain classifier): its id,
the context it was asked of and its text. A trained model's export lists its training questions by these
(`router.json`'s `trained_on`), so that evaluation can refuse them (`hoprag.training.splits.check_disjoint`) or a
question set can leave them out up front (`QADataset(exclude_trained=<export>)`, `held_out`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from hoprag.data.types import QAExample

SETTINGS_FILE = "router.json"


def context_of(example: QAExample) -> str:
    """The context a question was asked of: TAT-QA's table uid, else the question itself."""
    return str(example.metadata.get("context_uid", example.id))


def question_key(example: QAExample) -> str:
    """The question text as a router reads it, up to case and spacing."""
    return " ".join(example.question.lower().split())


def trained_on(export: str | Path) -> list[dict[str, str]]:
    """The training question records (id, context, question) an export's `router.json` lists."""
    path = Path(export) / SETTINGS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: data.exclude_trained names a trained model's export folder "
                                "(train.py +model=source_router_crag, router_tatqa, router_classifier or "
                                "domain_classifier writes router.json beside its weights)")  # fmt: skip
    return list(json.loads(path.read_text(encoding="utf-8")).get("trained_on", []))


def held_out(examples: Sequence[QAExample], records: Sequence[Mapping[str, str]]) -> list[QAExample]:
    """The examples that share no id, context or question text with the training records: exactly those a
    model trained on them may be evaluated on."""
    ids = {r["id"] for r in records}
    contexts = {r["context"] for r in records}
    texts = {" ".join(r["question"].lower().split()) for r in records}
    return [ex for ex in examples
            if ex.id not in ids and context_of(ex) not in contexts and question_key(ex) not in texts]  # fmt: skip
