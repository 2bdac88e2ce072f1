"""Classification metrics of a knowledge-source router: accuracy, per-class and macro F1, confusion.

Gold and predicted labels are option letters (or any hashable labels). A prediction outside `classes` (a
reply that named no option) is simply wrong: it costs its gold class recall. Macro-F1 averages the F1 of
the given classes; a class that is neither gold nor predicted anywhere (CRAG's "none", which is never a
training label) has no F1 and is left out of the average rather than counted as 0.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from typing import Any


def _paired(gold: Sequence[Hashable], pred: Sequence[Hashable]) -> None:
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold labels for {len(pred)} predictions")
    if not gold:
        raise ValueError("no labels to score")


def accuracy(gold: Sequence[Hashable], pred: Sequence[Hashable]) -> float:
    """Share of predictions equal to their gold label."""
    _paired(gold, pred)
    return sum(g == p for g, p in zip(gold, pred)) / len(gold)


def class_scores(gold: Sequence[Hashable], pred: Sequence[Hashable], classes: Sequence[Hashable]) -> dict:
    """Per class: precision, recall, F1 (None where undefined: no gold and no prediction) and support."""
    _paired(gold, pred)
    hits = Counter(g for g, p in zip(gold, pred) if g == p)
    support, predicted = Counter(gold), Counter(pred)
    scores = {}
    for c in classes:
        precision = hits[c] / predicted[c] if predicted[c] else 0.0
        recall = hits[c] / support[c] if support[c] else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        defined = support[c] or predicted[c]
        scores[c] = {"precision": precision, "recall": recall, "f1": f1 if defined else None, "support": support[c]}
    return scores


def macro_f1(gold: Sequence[Hashable], pred: Sequence[Hashable], classes: Sequence[Hashable]) -> float:
    """The mean F1 over `classes` that occur as gold or prediction."""
    f1s = [s["f1"] for s in class_scores(gold, pred, classes).values() if s["f1"] is not None]
    return sum(f1s) / len(f1s) if f1s else 0.0


def confusion(gold: Sequence[Hashable], pred: Sequence[Hashable], classes: Sequence[Hashable]) -> dict:
    """`confusion[gold][predicted]` counts; predictions outside `classes` are counted under "other"."""
    _paired(gold, pred)
    table = {g: {p: 0 for p in [*classes, "other"]} for g in classes}
    for g, p in zip(gold, pred):
        if g not in table:
            raise ValueError(f"gold label {g!r} is not one of the classes {list(classes)}")
        table[g][p if p in classes else "other"] += 1
    return table


def routing_report(gold: Sequence[Hashable], pred: Sequence[Hashable], classes: Sequence[Hashable]) -> dict[str, Any]:
    """Everything above for one router: n, accuracy, macro-F1, per-class scores and the confusion matrix."""
    return {
        "n": len(gold),
        "accuracy": accuracy(gold, pred),
        "macro_f1": macro_f1(gold, pred, classes),
        "per_class": class_scores(gold, pred, classes),
        "confusion": confusion(gold, pred, classes),
    }
