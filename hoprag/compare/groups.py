"""Grouping runs into table rows and pairing their questions: runs that differ only by a seed are one group,
named by the overrides no other group shares; two groups are paired on the questions both hold alike (`pair`),
the rest refused or, with `--intersect`, dropped with a note."""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoprag.compare.runs import CompareError, Question, RunDir
from hoprag.utils.run_control import is_run_control

SEED = re.compile(r"^[+~]*(?:[\w-]+\.)*seed=")
# what a run's metrics.json `run` section says that its overrides may not (PruningRAG's router and domain)
QUALIFIERS = {
    "router": lambda value: f"router {value}" if value != "none" else "",
    "oracle_domain": lambda value: "oracle domain" if value else "",
    "router_labels": lambda value: f"labels@{value['judge']}" if isinstance(value, dict) and "judge" in value else "",
}


@dataclass
class Group:
    """Runs that differ only by seed (or a single run), shown as one row: all eval runs (`Run`) or all train
    runs (`TrainRun`)."""

    name: str
    runs: list[Any]

    def values(self, key: str) -> list[float]:
        return [float(r.metrics[key]) for r in self.runs if key in r.metrics]

    def questions(self, intersect: bool = False) -> tuple[dict[str, Question], str]:
        """The questions every run of the group answered alike, and a note on what `intersect` dropped ("" when
        nothing); seeds over different questions, or whose shared ids hold different ones, are refused unless
        `intersect`."""
        kept, unshared, differing = pair([(r.path, r.questions()) for r in self.runs], intersect)
        if unshared and not intersect:
            raise CompareError(
                f"the seeds of {self.name!r} answered different questions: rerun them alike or --intersect"
            )
        return kept, dropped_note(f"the seeds of {self.name!r}", len(kept), unshared, differing)

    def figure(self, key: str, ids: Sequence[str]) -> list[float] | None:
        """Per question of `ids`, the group's mean of figure `key` over its runs (None if any lacks it)."""
        tables = [r.per_question() for r in self.runs]
        if any(key not in t[i] for t in tables for i in ids):
            return None
        return [statistics.fmean(t[i][key] for t in tables) for i in ids]


def is_run_control_override(override: str) -> bool:
    """An override such as `show=0` or `+llm.generation_cache=null`: it changes nothing a run computes."""
    return is_run_control(override.lstrip("+~").split("=", 1)[0])


def group_runs(runs: Sequence[RunDir]) -> list[Group]:
    """Collapse runs that differ only by a seed (`SEED`); name each group by the overrides no other group shares
    (a lone group by all of its own), leaving out those that change nothing computed (`show=`, paths, caches)."""
    settings = [[o for o in r.overrides if not SEED.match(o) and not is_run_control_override(o)] for r in runs]
    common = set.intersection(*(set(s) for s in settings))
    groups: dict[Any, list[int]] = {}
    for i, (run, own) in enumerate(zip(runs, settings)):
        seeded = any(SEED.match(o) for o in run.overrides)
        groups.setdefault(tuple(own) if seeded else ("", str(run.path)), []).append(i)
    named = []
    for members in groups.values():
        own = settings[members[0]]
        name = ",".join(o for o in own if o not in common) or (",".join(own) if len(groups) == 1 else "")
        named.append(Group(qualified(name or runs[members[0]].label, runs[members[0]]), [runs[i] for i in members]))
    counts: dict[str, int] = {}
    for g in named:
        counts[g.name] = counts.get(g.name, 0) + 1
    for g in named:  # the same settings run twice without a seed apart: told apart by directory
        if counts[g.name] > 1:
            g.name = f"{g.name} [{g.runs[0].label}]"
    return named


def qualified(name: str, run: RunDir) -> str:
    """The name with what the run's `run` section says qualifies its figures (`QUALIFIERS`), e.g.
    "+method=pruningrag (router untuned)": an un-tuned router is never shown under the method's plain name."""
    info = getattr(run, "info", {})
    said = [text for key, describe in QUALIFIERS.items() if key in info and (text := describe(info[key]))]
    return f"{name} ({', '.join(said)})" if said else name


def pick_baseline(groups: Sequence[Group], baseline: str | None) -> Group:
    """The group named `baseline` (its name, a run directory's label, or its path); the first by default."""
    if baseline is None:
        return groups[0]
    for g in groups:
        if baseline == g.name or any(baseline in (r.label, r.path.name, str(r.path)) for r in g.runs):
            return g
        if Path(baseline).exists() and any(Path(baseline).resolve() == r.path for r in g.runs):
            return g
    names = "\n  ".join(g.name for g in groups)
    raise CompareError(f"--baseline {baseline!r} is none of the runs:\n  {names}")


def pair(
    sides: Sequence[tuple[Path, Mapping[str, Question]]], intersect: bool
) -> tuple[dict[str, Question], int, int]:
    """The questions every side (a run directory and its questions) holds alike, by id; how many ids not every
    side holds; and how many that every side holds, but not alike (another question text or other golds):
    those are refused, naming both directories and one example, unless `intersect`."""
    (first_dir, first), others = sides[0], sides[1:]
    shared = set(first).intersection(*(q for _, q in others))
    every = set(first).union(*(q for _, q in others))
    differing: set[str] = set()
    for other_dir, other in others:
        differ = sorted(i for i in first.keys() & other.keys() if first[i] != other[i])
        if differ and not intersect:
            raise CompareError(
                f"{first_dir} and {other_dir} hold {len(differ)} question ids whose question or golds differ, "
                f"e.g. {differ[0]!r}: {first[differ[0]].difference(other[differ[0]])}: they are not the same "
                "questions, so they are not paired; rerun on the same data, or --intersect keeps the questions "
                "held alike"
            )
        differing.update(differ)
    kept = {i: first[i] for i in sorted(shared - differing)}
    return kept, len(every - shared), len(shared & differing)


def dropped_note(what: str, kept: int, unshared: int, differing: int) -> str:
    """What `--intersect` dropped and why ("" when it dropped nothing)."""
    if not unshared and not differing:
        return ""
    return (f"--intersect: {what} are paired on {kept} questions, dropping {unshared} that not all of them "
            f"answered and {differing} whose question text or golds differ between them.")  # fmt: skip


def shared_questions(group: Group, baseline: Group, intersect: bool) -> tuple[list[str], list[str]]:
    """The questions `group` and `baseline` both answered alike, and the notes on what `intersect` dropped."""
    (base, base_note), (ids, own_note) = baseline.questions(intersect), group.questions(intersect)
    kept, unshared, differing = pair([(baseline.runs[0].path, base), (group.runs[0].path, ids)], intersect)
    if unshared and not intersect:
        raise CompareError(
            f"{group.name!r} answered {len(ids)} questions and the baseline {baseline.name!r} {len(base)}, "
            f"{len(kept)} of them shared: different question sets are not compared unless --intersect "
            "asks for the shared ones"
        )
    if not kept:
        raise CompareError(f"{group.name!r} and the baseline {baseline.name!r} share no question")
    note = dropped_note(f"{group.name!r} and the baseline {baseline.name!r}", len(kept), unshared, differing)
    return list(kept), [n for n in (base_note, own_note, note) if n]
