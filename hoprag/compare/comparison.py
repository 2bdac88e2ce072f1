"""The comparison of a set of runs (`build`): find and read them, group eval and train runs apart, pick the
columns, and test every eval group against the baseline."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hoprag.compare.columns import Column, left_out, table_columns
from hoprag.compare.discovery import find_runs, is_train_run
from hoprag.compare.groups import Group, group_runs, pick_baseline, shared_questions
from hoprag.compare.provenance import Stamp
from hoprag.compare.runs import RECALL, Run, TrainRun
from hoprag.compare.significance import Significance, paired_tests
from hoprag.stats import RESAMPLES

if TYPE_CHECKING:  # matched imports plots, which imports this module
    from hoprag.compare.hops import HopReport
    from hoprag.compare.matched import Matched
    from hoprag.compare.shortcuts import ShortcutSplit  # shortcuts imports this module


@dataclass
class Comparison:
    """Eval groups with their columns and tests against `baseline` (None without eval runs), and train groups;
    `left_out` names the standard columns not shown and why, `stamp` when and how the comparison was made."""

    groups: list[Group]
    baseline: Group | None
    columns: list[Column]
    significance: list[Significance]
    resamples: int
    train: list[Group] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    stamp: Stamp | None = None
    matched: Matched | None = None  # the budget-matched comparison (`matched.match`; compare.py makes it)
    shortcuts: ShortcutSplit | None = None  # the multi-hop-only comparison (`shortcuts.split`; --shortcuts)
    hops: HopReport | None = None  # hop attribution over gold chains (`hops.hop_report`; compare.py makes it)


def build(
    args: Iterable[str],
    baseline: str | None = None,
    intersect: bool = False,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Find the runs, group eval and train runs apart, and test every eval group against the baseline on each
    paired metric."""
    paths = find_runs(args)
    evals = [Run.load(p) for p in paths if not is_train_run(p)]
    trains = [TrainRun.load(p) for p in paths if is_train_run(p)]
    groups = group_runs(evals) if evals else []
    train = group_runs(trains) if trains else []
    if not groups:
        return Comparison([], None, [], [], resamples, train)
    return tested(groups, pick_baseline(groups, baseline), intersect, resamples, seed, train)


def tested(
    groups: list[Group], base: Group, intersect: bool, resamples: int, seed: int, train: list[Group] | None = None
) -> Comparison:
    """`groups` compared with `base`: their table's columns and every other group's paired tests against it."""
    columns = table_columns(groups)
    tests, notes = [], mixed_passage_rules(groups)
    for group in groups:
        if group is base:
            continue
        ids, dropped = shared_questions(group, base, intersect)
        notes += dropped
        tests += paired_tests(group, base, ids, columns, resamples, seed)
    return Comparison(groups, base, columns, tests, resamples, train or [], list(dict.fromkeys(notes)),
                      left_out(groups, columns))  # fmt: skip


def mixed_passage_rules(groups: Sequence[Group]) -> list[str]:
    """A warning when runs with passage recall matched gold passages by different rules (e.g. PruneRAG's token
    overlap beside titles): their recall and EFR then count different things."""
    rules: dict[str, list[str]] = {}
    for g in groups:
        if any(RECALL.match(k) for r in g.runs for k in r.metrics):
            for rule in dict.fromkeys(r.passage_rule for r in g.runs):
                rules.setdefault(rule, []).append(g.name)
    if len(rules) < 2:
        return []
    by_rule = "; ".join(f"{rule}: {', '.join(names)}" for rule, names in rules.items())
    return [(f"Gold passages were matched by different rules ({by_rule}): passage recall and EFR are not "
             "comparable across them (metrics.passage_match=title puts a run on the default rule).")]  # fmt: skip
