"""Paired significance of one group against the baseline: per column, each side's per-question figures over
the shared questions, on the metrics.json scale, through `hoprag.stats.paired_test`."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from hoprag.compare.columns import Column
from hoprag.compare.groups import Group
from hoprag.stats import PairedTest, paired_test


@dataclass(frozen=True)
class Significance:
    """One metric of one run against the baseline, on the metrics.json scale."""

    run: str
    column: Column
    test: PairedTest


def _scale(column: Column, group: Group, ids: Sequence[str]) -> float | None:
    """The factor from the group's per-question figure to the metric: a micro average divides by the group's
    own denominator (None: no question has one)."""
    if column.denominator is None:
        return column.scale
    sizes = group.figure(column.denominator, ids)
    mean = statistics.fmean(sizes) if sizes else 0.0
    return column.scale / mean if mean > 0 else None


def column_mean(column: Column, group: Group, ids: Sequence[str]) -> float | None:
    """The group's value of `column` over `ids` on the metrics.json scale, from its per-question figures: what a
    paired test's side is (a question subset's table row, `hoprag.compare.shortcuts`); None when the column
    pairs no figure, a run lacks it, or a micro average has no denominator."""
    values = None if column.per_question is None else group.figure(column.per_question, ids)
    scale = _scale(column, group, ids) if values else None
    return None if values is None or scale is None else statistics.fmean(values) * scale


def paired_tests(
    group: Group, base: Group, ids: Sequence[str], columns: Sequence[Column], resamples: int, seed: int
) -> list[Significance]:
    """`group` against `base` on each paired column over `ids`, each side's values from its own records."""
    tests = []
    for column in columns:
        if column.per_question is None:
            continue
        a, b = base.figure(column.per_question, ids), group.figure(column.per_question, ids)
        scale_a, scale_b = _scale(column, base, ids), _scale(column, group, ids)
        if a is None or b is None or scale_a is None or scale_b is None:
            continue
        a, b = [x * scale_a for x in a], [x * scale_b for x in b]
        tests.append(Significance(group.name, column, paired_test(a, b, resamples=resamples, seed=seed)))
    return tests
