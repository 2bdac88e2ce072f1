"""Compare finished `eval.py` and `train.py` runs: tables of quality and cost, paired significance against a
baseline, and a self-contained HTML report with plots.

    python -m hoprag.compare <run dir | multirun dir | glob>... [--baseline RUN] [--out DIR] [--intersect]

Each run is named by the Hydra overrides that set it apart from the others (`.hydra/overrides.yaml`), else by
its directory. Runs that differ only by a seed (`seed=`, `model.datamodule.seed=`, any key named `seed`)
collapse to one row of mean ± std. A row's figures are its runs' own metrics.json, over their own questions.
Every other eval run is tested against the baseline (the first unless `--baseline` names one) over the
questions both answered alike: a paired bootstrap CI of the mean difference and a sign-flip permutation
p-value per metric (`hoprag.stats`), each side's value computed from its own records over those shared
questions; a seed group counts each question's mean over its seeds. Records pair when their id, question text
and golds agree (`Question`). Runs over different question sets, or whose shared ids hold different questions
or golds, are refused unless `--intersect` asks for the questions they hold alike (the report says how many it
dropped and why). A metrics.json or predictions.jsonl that cannot be read is refused naming its path and line.

A train run (no metrics.json; `.hydra/config.yaml` and Lightning's `csv/version_*/metrics.csv`) is a row of
the metric its checkpoint monitored (`model.monitor`, `model.mode`): its best value, that epoch, and the last
one, read from the latest CSV log. Train runs have no per-question scores, so they are never paired-tested.

`--out` gets `table.csv` and `significance.csv` (eval runs), `train.csv` (train runs), `report.md`, and
`report.html` (the tables and the plots of `hoprag.compare.plots`, inlined; matplotlib is imported there only).
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import logging
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from hoprag.data.records import DataFormatError
from hoprag.data.types import Passage
from hoprag.evaluation.predictions import finished_records
from hoprag.metrics import answer_in_top_k, passage_hits, token_overlap_match
from hoprag.metrics.retrieval import Match
from hoprag.stats import RESAMPLES, PairedTest, paired_test
from hoprag.utils.run_control import is_run_control

log = logging.getLogger(__name__)

METRICS = "metrics.json"
CONFIG = Path(".hydra") / "config.yaml"
TRAIN_LOGS = "csv/version_*/metrics.csv"
SEED = re.compile(r"^[+~]*(?:[\w-]+\.)*seed=")
SECONDS = "cost/mean/seconds/total"
RECALL = re.compile(r"^retrieval/(answer|passage)_recall(@\d+)?$")


@dataclass(frozen=True)
class Column:
    """A table column: its key in metrics.json, the matching per-question figure (None: not paired-testable),
    its header, decimals, and the factor from the per-question figure to the metrics.json scale. A micro
    average (Σ hits / Σ gold) names its `denominator` figure: the test then divides each side's figures by
    the mean of that side's own denominator over the shared questions, which makes the mean of its scaled
    figures its own micro average (two runs may count a question's gold apart, e.g. by another match rule)."""

    key: str
    per_question: str | None
    header: str
    digits: int
    scale: float = 1.0
    denominator: str | None = None


QUALITY = (
    Column("em", "em", "EM", 1, 100.0),
    Column("f1", "f1", "F1", 1, 100.0),
    Column("acc", "acc", "Acc", 1, 100.0),
)
LATE_QUALITY = (
    Column("efr", None, "EFR", 1),
    Column("crag/acc", "crag/acc", "CRAG acc", 1, 100.0),
    Column("crag/score", "crag/score", "CRAG score", 1, 100.0),
)
TRAIN = (
    Column("initial", None, "before training", 2),
    Column("best", None, "best", 2),
    Column("best_epoch", None, "best epoch", 1),
    Column("last", None, "last", 2),
    Column("epochs", None, "epochs", 1),
)
COST = (
    Column("cost/mean/llm_calls", "llm_calls", "LLM calls", 2),
    Column("cost/mean/prompt_tokens", "prompt_tokens", "prompt tok", 1),
    Column("cost/mean/completion_tokens", "completion_tokens", "compl. tok", 1),
    Column("cost/mean/retrieval_calls", "retrieval_calls", "retrievals", 2),
    Column("cost/mean/passages_read", "passages_read", "passages", 1),
    Column(SECONDS, "seconds", "s/question", 3),
)


class CompareError(ValueError):
    """Runs that cannot be compared as asked (missing, unfinished, unreadable, or over different questions)."""


@dataclass(frozen=True)
class Question:
    """What two runs' records of one id must agree on to be paired: the question text, and the golds as a set
    (every answer metric takes the best over the golds, so their order and repeats change no score)."""

    text: str
    golds: frozenset[str]

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Question:
        golds = record["golds"]
        if not isinstance(record["question"], str) or not isinstance(golds, list):
            raise TypeError("'question' must be a string and 'golds' a list")
        return cls(record["question"], frozenset(map(str, golds)))

    def difference(self, other: Question) -> str:
        """How `other` differs, as an error message shows it."""
        if self.text != other.text:
            return f"question {self.text!r} vs {other.text!r}"
        return f"golds {sorted(self.golds)} vs {sorted(other.golds)}"


def _overrides(path: Path) -> list[str]:
    overrides_file = path / ".hydra" / "overrides.yaml"
    return [str(o) for o in (yaml.safe_load(overrides_file.read_text()) or [])] if overrides_file.is_file() else []


def _config(path: Path) -> DictConfig | None:
    """The run's composed config (`.hydra/config.yaml`), None without one."""
    return OmegaConf.load(path / CONFIG) if (path / CONFIG).is_file() else None  # type: ignore[return-value]


def _setting(config: DictConfig | None, key: str, default: Any) -> Any:
    value = None if config is None else OmegaConf.select(config, key, default=None)
    return default if value is None else value


@dataclass
class RunDir:
    """What every run shows in a table: its directory, Hydra overrides and the figures its row averages."""

    path: Path
    overrides: list[str]
    metrics: dict[str, Any]

    @property
    def label(self) -> str:
        """The directory's name, with its parent's for a multirun job (named 0, 1, ...)."""
        return f"{self.path.parent.name}/{self.path.name}" if self.path.name.isdigit() else self.path.name


@dataclass
class Run(RunDir):
    """One finished eval run: metrics.json, the gold-passage match its scoring used, and (read on demand)
    per-question figures."""

    info: dict[str, Any] = field(default_factory=dict)
    match: Match | None = field(default=None, repr=False)
    passage_rule: str = "title"
    _per_question: dict[str, dict[str, float]] | None = field(default=None, repr=False)
    _questions: dict[str, Question] | None = field(default=None, repr=False)

    @classmethod
    def load(cls, path: Path) -> Run:
        report = _metrics_file(path / METRICS)
        config = _config(path)
        match, rule = None, "title"
        if _setting(config, "metrics.passage_match", "title") == "token_overlap":
            threshold = float(_setting(config, "metrics.overlap_threshold", 0.75))
            match, rule = partial(token_overlap_match, threshold=threshold), f"token overlap ≥ {threshold}"
        return cls(path, _overrides(path), report["metrics"], info=report["run"], match=match, passage_rule=rule)

    def retrieval_cuts(self) -> list[int | None]:
        """The cut-offs of the run's recall metrics (None: the whole retrieved list); none without them."""
        found = [RECALL.match(k) for k in self.metrics]
        cuts = {int(m.group(2)[1:]) if m.group(2) else None for m in found if m}
        return sorted(cuts, key=lambda k: -1 if k is None else k)

    def per_question(self) -> dict[str, dict[str, float]]:
        """Question id -> the figures that pair across runs: answer scores, retrieval recall and cost."""
        if self._per_question is None:
            self._read()
        return self._per_question  # type: ignore[return-value]

    def questions(self) -> dict[str, Question]:
        """Question id -> what a record must agree on to pair with this run's (`Question`)."""
        if self._questions is None:
            self._read()
        return self._questions  # type: ignore[return-value]

    def _read(self) -> None:
        """Read predictions.jsonl once, refusing a file metrics.json was not computed from or a record compare
        cannot read (named by path and line)."""
        try:
            numbered = finished_records(self.path)
        except FileNotFoundError as e:
            raise CompareError(f"{e}: paired tests read each question's scores from it") from e
        except DataFormatError as e:
            raise CompareError(str(e)) from e
        path, n = self.path / "predictions.jsonl", self.info.get("n", self.metrics.get("n"))
        if n is not None and n != len(numbered):
            raise CompareError(
                f"{self.path / METRICS} covers {n} questions but {path} holds {len(numbered)}: the run was resumed "
                "and has not finished (rerun it to the end), or one of the files comes from another run"
            )
        cuts, self._questions, self._per_question = self.retrieval_cuts(), {}, {}
        for line, record in numbered:
            try:
                self._questions[record["id"]] = Question.of(record)
                self._per_question[record["id"]] = _figures(record, cuts, self.match)
            except KeyError as e:
                raise CompareError(f"{path}, line {line}: the record has no {e.args[0]!r}, which compare reads") from e
            except (TypeError, ValueError, AttributeError) as e:
                raise CompareError(f"{path}, line {line}: a malformed record ({e})") from e


def _metrics_file(path: Path) -> dict[str, Any]:
    """metrics.json as the runner writes it, else a CompareError naming the path and the line or key."""
    try:
        report = json.loads(path.read_bytes())
    except json.JSONDecodeError as e:
        raise CompareError(f"{path}, line {e.lineno}: not JSON ({e.msg}): rerun the run to rewrite it") from e
    except ValueError as e:  # not UTF-8
        raise CompareError(f"{path}: not JSON text ({e}): rerun the run to rewrite it") from e
    for key in ("run", "metrics"):
        if not isinstance(report, dict) or not isinstance(report.get(key), dict):
            raise CompareError(f"{path}: no {key!r} object, which compare reads: not a metrics.json of eval.py")
    for key, value in report["metrics"].items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CompareError(f"{path}: metrics[{key!r}] is {value!r}, not a number")
    return report


def _figures(record: dict[str, Any], cuts: Sequence[int | None] = (), match: Match | None = None) -> dict[str, float]:
    cost = record["cost"]
    figures = {k: float(v) for k, v in record["scores"].items()}
    figures.update({k: float(cost[k]) for k in ("llm_calls", "prompt_tokens", "completion_tokens", "retrieval_calls")})
    if "passages_read" in cost:  # records written before it was counted lack it: that column is then not tested
        figures["passages_read"] = float(cost["passages_read"])
    figures["seconds"] = float(sum(cost["seconds"].values()))
    if cuts:
        figures.update(_recall_figures(record, cuts, match))
    return figures


def _recall_figures(record: dict[str, Any], cuts: Sequence[int | None], match: Match | None) -> dict[str, float]:
    """Per question, what the record's retrieval metrics average, scored as `MetricSuite` scores them (distinct
    passages in reading order, cut at each k): gold passages found (`passage_hits@k`) out of `passage_gold`,
    and whether a passage holds a gold answer (`answer_recall@k`)."""
    first: dict[str, Passage] = {}
    for p in record["retrieved"]:
        first.setdefault(p["id"], Passage(p["id"], p["title"], p["text"], p.get("origin", "")))
    passages = list(first.values())
    texts = [p.contents for p in passages]
    gold, retrieved = (
        (record["gold_titles"], [p.title for p in passages]) if match is None else (record["gold_passages"], texts)
    )
    figures = {"passage_gold": float(len(set(gold)))}
    for k in cuts:
        at = "" if k is None else f"@{k}"
        figures[f"passage_hits{at}"] = float(passage_hits(retrieved[:k], gold, match))
        figures[f"answer_recall{at}"] = float(answer_in_top_k(texts, record["golds"], k))
    return figures


@dataclass
class TrainRun(RunDir):
    """One `train.py` run: the metric its checkpoint monitored, that metric per validated epoch in its latest
    Lightning CSV log (`curve`), and in `metrics` the row's figures: `best` (by `mode`), `best_epoch` (the
    first epoch reaching it, the one the checkpoint keeps), `last`, `epochs`, and `initial` when a validation
    ran before the first epoch (a row with no epoch)."""

    monitor: str = ""
    mode: str = "max"
    curve: list[tuple[int, float]] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> TrainRun:
        config = _config(path)
        monitor = _setting(config, "model.monitor", None) or _setting(config, "optimized_metric", None)
        if not monitor:
            raise CompareError(f"{path / CONFIG} names no model.monitor nor optimized_metric to report")
        mode = str(_setting(config, "model.mode", "max"))
        if mode not in ("max", "min"):
            raise CompareError(f"{path / CONFIG}: model.mode must be max or min, not {mode!r}")
        logs = sorted(path.glob(TRAIN_LOGS), key=_natural)
        with open(logs[-1], newline="", encoding="utf-8") as f:
            rows = [r for r in csv.DictReader(f) if r.get(monitor)]
        by_epoch = {int(r["epoch"]): float(r[monitor]) for r in rows if r.get("epoch")}  # the epoch's last value
        if not by_epoch:
            raise CompareError(f"{logs[-1]} holds no epoch's {monitor} yet")
        curve = sorted(by_epoch.items())
        best_epoch, best = (max if mode == "max" else min)(curve, key=lambda point: point[1])
        metrics = {"best": best, "best_epoch": best_epoch, "last": curve[-1][1], "epochs": len(curve)}
        initial = [float(r[monitor]) for r in rows if not r.get("epoch")]
        if initial:
            metrics["initial"] = initial[0]
        return cls(path, _overrides(path), metrics, monitor=str(monitor), mode=mode, curve=curve)


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


@dataclass(frozen=True)
class Significance:
    """One metric of one run against the baseline, on the metrics.json scale."""

    run: str
    column: Column
    test: PairedTest


@dataclass
class Comparison:
    """Eval groups with their columns and tests against `baseline` (None without eval runs), and train groups."""

    groups: list[Group]
    baseline: Group | None
    columns: list[Column]
    significance: list[Significance]
    resamples: int
    train: list[Group] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# -- finding runs ------------------------------------------------------------------------------------------------


def _natural(path: Path) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def is_train_run(path: Path) -> bool:
    """A `train.py` run: no metrics.json, but a composed config and a Lightning CSV log."""
    return not (path / METRICS).is_file() and (path / CONFIG).is_file() and any(path.glob(TRAIN_LOGS))


def _finished(path: Path) -> bool:
    return (path / METRICS).is_file() or is_train_run(path)


def _jobs(folder: Path) -> list[Path]:
    """The finished runs directly under a multirun folder, in job order (unfinished ones skipped, with a word)."""
    jobs = []
    for sub in sorted((d for d in folder.iterdir() if d.is_dir()), key=_natural):
        if _finished(sub):
            jobs.append(sub)
        elif (sub / "predictions.jsonl").is_file():
            log.warning("skipping %s: no %s (the run has not finished)", sub, METRICS)
    return jobs


def find_runs(args: Iterable[str]) -> list[Path]:
    """The eval and train run directories that `args` name: run directories, multirun directories, or glob
    patterns."""
    found: list[Path] = []
    for arg in args:
        path = Path(arg)
        explicit = path.exists()
        matches = [path] if explicit else sorted((Path(m) for m in glob.glob(arg)), key=_natural)
        if not matches:
            raise CompareError(f"{arg}: no run directory, multirun directory or glob match")
        for match in matches:
            if _finished(match):
                found.append(match)
            elif match.is_dir() and (jobs := _jobs(match)):
                found.extend(jobs)
            elif explicit:
                what = "has not finished" if (match / "predictions.jsonl").is_file() else "is not an eval or train run"
                raise CompareError(f"{match} {what}: no {METRICS} nor {TRAIN_LOGS} in it or in its job folders")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise CompareError(f"no finished eval or train runs in {' '.join(args)}")
    return unique


# -- naming and grouping -----------------------------------------------------------------------------------------


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
        named.append(Group(name or runs[members[0]].label, [runs[i] for i in members]))
    counts: dict[str, int] = {}
    for g in named:
        counts[g.name] = counts.get(g.name, 0) + 1
    for g in named:  # the same settings run twice without a seed apart: told apart by directory
        if counts[g.name] > 1:
            g.name = f"{g.name} [{g.runs[0].label}]"
    return named


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


# -- building the comparison -------------------------------------------------------------------------------------


def table_columns(groups: Sequence[Group]) -> list[Column]:
    """The quality and cost columns that at least one run reports nonzero (a retrieval-only run's F1 and LLM
    calls are 0 and say nothing; time is always shown), recall metrics in the order runs list them."""
    present = dict.fromkeys(k for g in groups for r in g.runs for k, v in r.metrics.items() if v or k == SECONDS)
    recall = [_recall_column(k) for k in present if RECALL.match(k)]
    return [c for c in (*QUALITY, *recall, *LATE_QUALITY, *COST) if c.key in present]


def _recall_column(key: str) -> Column:
    """Answer recall is a mean over questions; passage recall is micro: Σ hits / Σ gold (see `Column`)."""
    kind, at = RECALL.match(key).groups()  # type: ignore[union-attr]
    at = at or ""
    header = key.removeprefix("retrieval/")
    if kind == "answer":
        return Column(key, f"answer_recall{at}", header, 1, 100.0)
    return Column(key, f"passage_hits{at}", header, 1, 100.0, denominator="passage_gold")


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


def _scale(column: Column, group: Group, ids: Sequence[str]) -> float | None:
    """The factor from the group's per-question figure to the metric: a micro average divides by the group's
    own denominator (None: no question has one)."""
    if column.denominator is None:
        return column.scale
    sizes = group.figure(column.denominator, ids)
    mean = statistics.fmean(sizes) if sizes else 0.0
    return column.scale / mean if mean > 0 else None


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
    base = pick_baseline(groups, baseline)
    columns = table_columns(groups)
    tests, notes = [], mixed_passage_rules(groups)
    for group in groups:
        if group is base:
            continue
        ids, dropped = shared_questions(group, base, intersect)
        notes += dropped
        tests += _tests(group, base, ids, columns, resamples, seed)
    return Comparison(groups, base, columns, tests, resamples, train, list(dict.fromkeys(notes)))


def _tests(
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
    return [f"Gold passages were matched by different rules ({by_rule}): passage recall and EFR are not "
            "comparable across them (metrics.passage_match=title puts a run on the default rule)."]  # fmt: skip


# -- rendering ---------------------------------------------------------------------------------------------------


def _cell(values: list[float], digits: int) -> tuple[str, str]:
    """(mean, std) as text; std is "" for one value, and both are "" when no run reports the metric."""
    if not values:
        return "", ""
    mean = f"{statistics.fmean(values):.{digits}f}"
    return mean, (f"{statistics.stdev(values):.{digits}f}" if len(values) > 1 else "")


def _n(group: Group) -> str:
    ns = sorted({int(r.metrics.get("n", r.info.get("n", 0))) for r in group.runs})
    return str(ns[0]) if len(ns) == 1 else f"{ns[0]}-{ns[-1]}"


def table_rows(comparison: Comparison) -> list[dict[str, str]]:
    """One row per group: run, runs, n, then every column's mean and `<key>_std` (as CSV writes them)."""
    rows = []
    for g in comparison.groups:
        row = {"run": g.name, "runs": str(len(g.runs)), "n": _n(g)}
        for c in comparison.columns:
            row[c.key], row[f"{c.key}_std"] = _cell(g.values(c.key), c.digits)
        rows.append(row)
    return rows


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def cell_text(row: dict[str, str], column: Column) -> str:
    """A table cell as shown: mean ± std, the mean alone for one run, "–" when no run reports it."""
    return f"{row[column.key]} ± {row[column.key + '_std']}" if row[column.key + "_std"] else row[column.key] or "–"


def table_header(comparison: Comparison) -> list[str]:
    seeded = any(len(g.runs) > 1 for g in comparison.groups)
    return ["run", *(["runs"] if seeded else []), "n", *(c.header for c in comparison.columns)]


def table_cells(comparison: Comparison) -> list[list[str]]:
    seeded = any(len(g.runs) > 1 for g in comparison.groups)
    return [[row["run"], *([row["runs"]] if seeded else []), row["n"], *(cell_text(row, c) for c in comparison.columns)]
            for row in table_rows(comparison)]  # fmt: skip


def markdown_table(comparison: Comparison) -> str:
    return _markdown(table_header(comparison), table_cells(comparison))


TRAIN_NOTE = "Train runs are not paired-tested: their logs hold no per-question scores."


def train_columns(comparison: Comparison) -> list[Column]:
    return [c for c in TRAIN if any(c.key in r.metrics for g in comparison.train for r in g.runs)]


def train_rows(comparison: Comparison) -> list[dict[str, str]]:
    """One row per train group: run, runs, the monitored metric and its mode, then each figure's mean and std."""
    rows = []
    for g in comparison.train:
        monitors = dict.fromkeys(f"{r.monitor} ({r.mode})" for r in g.runs)
        row = {"run": g.name, "runs": str(len(g.runs)), "metric": ", ".join(monitors)}
        for c in train_columns(comparison):
            row[c.key], row[f"{c.key}_std"] = _cell(g.values(c.key), c.digits)
        rows.append(row)
    return rows


def train_header(comparison: Comparison) -> list[str]:
    return ["run", "runs", "metric", *(c.header for c in train_columns(comparison))]


def train_cells(comparison: Comparison) -> list[list[str]]:
    columns = train_columns(comparison)
    return [[r["run"], r["runs"], r["metric"], *(cell_text(r, c) for c in columns)] for r in train_rows(comparison)]


def significance_rows(comparison: Comparison) -> list[dict[str, str]]:
    rows = []
    for s in comparison.significance:
        t, d = s.test, s.column.digits + 1
        rows.append({
            "run": s.run, "metric": s.column.key, "shared": str(t.n),
            "baseline": f"{t.mean_a:.{d}f}", "value": f"{t.mean_b:.{d}f}", "diff": f"{t.diff:+.{d}f}",
            "ci_low": f"{t.ci_low:+.{d}f}", "ci_high": f"{t.ci_high:+.{d}f}", "p": f"{t.p:.4f}",
        })  # fmt: skip
    return rows


TABLE_NOTE = "Each row holds its runs' own metrics.json figures, over their own n questions."


def significance_intro(comparison: Comparison, baseline: str) -> str:
    """What the paired tests compare, and over how many questions (`baseline`: the name as the page shows it)."""
    level = round(100 * comparison.significance[0].test.level)
    ns = sorted({s.test.n for s in comparison.significance})
    over = f"the {ns[0]} shared questions" if len(ns) == 1 else "the shared questions (column shared)"
    return (f"Paired against the baseline {baseline} over {over}, those both answered alike (same id, question "
            "text and golds); each side's value is its mean over them, from its own records: bootstrap "
            f"{level}% CI of the difference and sign-flip permutation p "
            f"({comparison.resamples} resamples).")  # fmt: skip


def significance_header(comparison: Comparison) -> list[str]:
    level = round(100 * comparison.significance[0].test.level)
    return ["run", "metric", "shared", "baseline on shared", "run on shared", "Δ", f"{level}% CI", "p"]


def significance_cells(comparison: Comparison) -> list[list[str]]:
    rows = zip(comparison.significance, significance_rows(comparison))
    return [[r["run"], s.column.header, r["shared"], r["baseline"], r["value"], r["diff"],
             f"[{r['ci_low']}, {r['ci_high']}]", r["p"]] for s, r in rows]  # fmt: skip


def markdown_significance(comparison: Comparison) -> str:
    if not comparison.significance:
        return f"(no run to test against the baseline {comparison.baseline.name!r})"
    intro = significance_intro(comparison, f"`{comparison.baseline.name}`")
    return intro + "\n\n" + _markdown(significance_header(comparison), significance_cells(comparison))


def report(comparison: Comparison) -> str:
    parts = [TABLE_NOTE, markdown_table(comparison), markdown_significance(comparison)] if comparison.groups else []
    parts = [*(f"**Note.** {n}" for n in comparison.notes), *parts]
    if comparison.train:
        parts += ["Train runs: the monitored metric's best value, its epoch, and the last value. " + TRAIN_NOTE,
                  _markdown(train_header(comparison), train_cells(comparison))]  # fmt: skip
    return "\n\n".join(parts) + "\n"


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["run"])
        writer.writeheader()
        writer.writerows(rows)


def write(comparison: Comparison, out: Path) -> None:
    """`table.csv` and `significance.csv` (eval runs), `train.csv` (train runs), `report.md`, `report.html` and
    each plot as `<name>.png` (for papers and READMEs) into `out`."""
    from hoprag.compare.page import PLOTS, figures, html_report  # matplotlib is imported for the report only

    out.mkdir(parents=True, exist_ok=True)
    if comparison.groups:
        _write_csv(out / "table.csv", table_rows(comparison))
        _write_csv(out / "significance.csv", significance_rows(comparison))
    if comparison.train:
        _write_csv(out / "train.csv", train_rows(comparison))
    (out / "report.md").write_text(report(comparison), encoding="utf-8")
    plots = figures(comparison)
    for name in PLOTS:  # a plot that no longer applies must not survive from an earlier report in `out`
        if name in plots:
            (out / f"{name}.png").write_bytes(plots[name][0])
        else:
            (out / f"{name}.png").unlink(missing_ok=True)
    (out / "report.html").write_text(html_report(comparison, plots), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hoprag.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="eval or train run directories, multirun directories or globs")
    parser.add_argument("--baseline", help="the run the others are tested against (default: the first)")
    parser.add_argument("--out", type=Path, help="folder for the CSV tables, report.md and report.html")
    parser.add_argument("--intersect", action="store_true", help="pair runs on the questions they hold alike")
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help="bootstrap and permutation resamples")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        comparison = build(args.runs, args.baseline, args.intersect, args.resamples, args.seed)
    except CompareError as e:  # the runs, not the command line, are at fault: the message alone, no usage
        parser.exit(2, f"{parser.prog}: error: {e}\n")
    print(report(comparison), end="")
    if args.out is not None:
        write(comparison, args.out)
        print(f"written to {args.out}")
    return 0

