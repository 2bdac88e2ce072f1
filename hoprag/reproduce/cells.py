"""A table's figures from its finished runs, read by `hoprag.compare` (`Run`: metrics.json, and per question from
predictions.jsonl): each cell's paper figure beside hoprag's, each row's cost per question, and each row's paired
test against the table's baseline row on the questions both runs answered alike (`hoprag.compare.groups.pair`)."""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hoprag.compare import CompareError, Run
from hoprag.compare.groups import pair
from hoprag.evaluation.fingerprint import FINGERPRINT
from hoprag.reproduce.plan import Job
from hoprag.reproduce.spec import Figure, Reading, Row, Table
from hoprag.stats import PairedTest, paired_test

# metrics.json's recall keys and the per-question figures `Run.per_question` holds for them
RECALL = re.compile(r"^retrieval/(passage|answer)_recall(_macro)?(@\d+)?$")
NO_RECORD = "no record holds the figure per question (passages read)"
NO_SHARED = "no question both runs answered alike has the per-question figure on both sides"
SHARED_TIME = ("a run records each question's time as an equal share of a batched step, not as a measurement of "
               "its own, so the pairs carry no per-question variation")  # fmt: skip
COST = {"llm_calls": "cost/mean/llm_calls", "tokens": ("cost/mean/prompt_tokens", "cost/mean/completion_tokens"),
        "seconds": "cost/mean/seconds/total"}  # fmt: skip


@dataclass(frozen=True)
class Cell:
    """One table cell: the paper's figure, hoprag's (None when there is none: `status` says why, e.g. skipped,
    with `reason`), and for an average over groups how many of them ran (`partial`, "" when all)."""

    paper: Figure | None
    value: float | None
    digits: int
    status: str = ""
    reason: str = ""
    partial: str = ""

    @property
    def delta(self) -> float | None:
        if self.value is None or self.paper is None or self.paper.value is None:
            return None
        return self.value - self.paper.value


@dataclass(frozen=True)
class Paired:
    """A row against the baseline row in one column, over the questions both answered alike."""

    row: str
    group: str
    metric: str
    test: PairedTest
    digits: int


def unfinished(directory: Path) -> str:
    """What works for a job without a finished run: a run never started or stopped resumes with a rerun; one
    started under other settings (the table's rows changed since) is refused on every rerun, so overwrite=true."""
    if not (directory / FINGERPRINT).is_file():
        return f"no run in {directory} (see the multirun's output; rerun reproduce.py to run it)"
    return (f"no finished run in {directory}: rerun reproduce.py to resume it, or, if it was refused because the "
            "row's settings changed since it started (ResumeRefused in the multirun's output), overwrite=true "
            "to start it afresh")


class Results:
    """The finished runs of a table's jobs at a scale, each read once."""

    def __init__(self, table: Table, scale: str, jobs: Sequence[Job]) -> None:
        self.table, self.scale = table, scale
        self.jobs = {(j.row, j.group): j for j in jobs}
        self.runs = {(j.row, j.group): Run.load(j.directory) for j in jobs if not j.skip and j.finished()}

    def status(self, row: Row, group: str) -> tuple[str, str]:
        """Why `row` has no run in `group` here: (status, reason); ("", "") when it has one."""
        reason = (self.table.groups[group].skip[self.scale] or row.skip[self.scale]
                  or row.group_skip.get(group, {}).get(self.scale, ""))  # fmt: skip
        job = self.jobs[(row.run, group)]
        if reason or job.skip:
            return "skipped", reason or job.skip
        if (row.run, group) not in self.runs:
            return "not run", unfinished(job.directory)
        return "", ""

    def run(self, row: Row, group: str) -> Run | None:
        return None if self.status(row, group)[0] else self.runs[(row.run, group)]

    def cell(self, row: Row, group: str, metric: str) -> Cell:
        reading = self.table.reading(row, metric, self.scale)
        paper = row.paper.get((group, metric))
        members = self.table.groups[group].mean_of
        if members:
            cells = [self.cell(row, member, metric) for member in members]
            values = [c.value for c in cells if c.value is not None]
            if not values:
                return Cell(paper, None, reading.digits, cells[0].status or "no figure", cells[0].reason)
            partial = f"{len(values)}/{len(members)}" if len(values) < len(members) else ""
            return Cell(paper, statistics.fmean(values), reading.digits, partial=partial)
        status, reason = self.status(row, group)
        if status:
            return Cell(paper, None, reading.digits, status, reason)
        value = reading.value(self.runs[(row.run, group)].metrics)
        if value is None:
            return Cell(
                paper, None, reading.digits, "no figure", reading.missing or f"the run reports no {reading.key}"
            )
        return Cell(paper, value, reading.digits)

    def n(self, row: Row, group: str) -> int | None:
        run = self.run(row, group)
        return None if run is None else int(run.info.get("n", run.metrics.get("n", 0)))

    def cost(self, row: Row) -> dict[str, float | None]:
        """LLM calls, tokens (prompt + completion) and seconds per question, the mean over the row's runs."""
        runs = [r for g in self.table.run_groups() if (r := self.run(row, g)) is not None]
        out: dict[str, float | None] = {}
        for name, keys in COST.items():
            keys = (keys,) if isinstance(keys, str) else keys
            values = [sum(float(r.metrics.get(k, 0.0)) for k in keys) for r in runs]
            out[name] = statistics.fmean(values) if values else None
        return out

    def tested(self) -> list[tuple[str, str]]:
        """The (group, metric) pairs the paired tests cover: every column's, an average's in each group it
        averages."""
        pairs = [(member, m) for g, m in self.table.columns for member in self.table.groups[g].mean_of or (g,)]
        return list(dict.fromkeys(pairs))

    def paired(self, resamples: int, seed: int) -> tuple[list[Paired], list[str]]:
        """Every row against the baseline row in every column (an average's in each of its groups), over the
        questions both runs answered alike; and one note per reason some columns could not be tested, naming
        them."""
        base = self.table.row(self.table.baseline)
        tests: list[Paired] = []
        untested: dict[str, list[str]] = {}
        for row in self.table.rows:
            if row.id == base.id:
                continue
            for group, metric in self.tested():
                a_run, b_run = self.run(base, group), self.run(row, group)
                if a_run is None or b_run is None:
                    continue
                a_read, b_read = (self.table.reading(r, metric, self.scale) for r in (base, row))
                if a_read.value(a_run.metrics) is None or b_read.value(b_run.metrics) is None:
                    continue  # a cell without a figure (shown as such): nothing to test
                column = f"{row.name}, {self.table.groups[group].label} {self.table.metrics[metric].label}"
                if figure_of(a_read.key) is None or figure_of(b_read.key) is None:
                    untested.setdefault(NO_RECORD, []).append(column)
                    continue
                try:
                    sides = _paired_values(a_run, a_read, b_run, b_read)
                except CompareError as e:
                    untested.setdefault(str(e), []).append(column)
                    continue
                if sides is None:
                    untested.setdefault(NO_SHARED, []).append(column)
                    continue
                if _is_time(a_read.key, b_read.key) and any(len(s) > 1 and len(set(s)) == 1 for s in sides):
                    untested.setdefault(SHARED_TIME, []).append(column)
                    continue
                test = paired_test(*sides, resamples=resamples, seed=seed)
                tests.append(Paired(row.id, group, metric, test, b_read.digits))
        return tests, [f"Not tested against {base.name}: {'; '.join(cols)}: {why}." for why, cols in untested.items()]


def figure_of(key: str) -> tuple[str, str | None, bool, float] | None:
    """The per-question figure behind a metrics.json key: (figure, its denominator, whether the metric is the
    mean of figure / denominator per question (macro) rather than a ratio of means (micro), and the factor to
    the metrics.json scale); None for a retrieval count that no record holds per question (passages read)."""
    match = RECALL.match(key)
    if match:
        kind, macro, at = match.group(1), bool(match.group(2)), match.group(3) or ""
        if kind == "answer":
            return f"answer_recall{at}", None, False, 100.0
        return f"passage_hits{at}", "passage_gold", macro, 100.0
    if key.startswith("cost/mean/"):
        name = key.removeprefix("cost/mean/")
        return ("seconds" if name == "seconds/total" else name), None, False, 1.0
    if key.startswith("method/"):  # the mean of the method's per-question figure, as it is
        return key, None, False, 1.0
    if key.startswith("retrieval/"):
        return None
    return key, None, False, 100.0  # an answer score: a fraction per question, a percentage in metrics.json


def _is_time(*keys: str) -> bool:
    """Whether a reading is a time per question (the run's, or a method's own per step)."""
    return any(k == "cost/mean/seconds/total" or k.endswith("/seconds") for k in keys)


def _paired_values(a: Run, a_read: Reading, b: Run, b_read: Reading) -> tuple[list[float], list[float]] | None:
    """Each side's per-question figures of its reading, on the cell's scale, over the questions both answered
    alike and both have the figure for (None: no such question)."""
    if a.path == b.path:
        shared = list(a.questions())
    else:
        shared = list(pair([(a.path, a.questions()), (b.path, b.questions())], intersect=True)[0])
    plans = [(run, read, _plan(read)) for run, read in ((a, a_read), (b, b_read))]
    ids = [i for i in shared if all(_has(run.per_question()[i], plan) for run, _, plan in plans)]
    if not ids:
        return None
    return tuple(_values(run.per_question(), read, plan, ids) for run, read, plan in plans)  # type: ignore[return-value]


def _plan(reading: Reading) -> tuple[str, str | None, bool, float]:
    name, denominator, macro, factor = figure_of(reading.key)  # type: ignore[misc]  # checked by the caller
    if reading.per is not None:  # a ratio of two metrics.json means: micro, each side by its own mean
        return name, figure_of(reading.per)[0], False, factor  # type: ignore[index]
    return name, denominator, macro, factor


def _has(figures: Mapping[str, float], plan: tuple[str, str | None, bool, float]) -> bool:
    name, denominator, macro, _ = plan
    if name not in figures or (denominator is not None and denominator not in figures):
        return False
    return not macro or figures[denominator] > 0  # type: ignore[index]


def _values(
    table: Mapping[str, Mapping[str, float]],
    reading: Reading,
    plan: tuple[str, str | None, bool, float],
    ids: list[str],
) -> list[float]:
    name, denominator, macro, factor = plan
    scale = factor * reading.scale
    if denominator is None:
        return [scale * table[i][name] for i in ids]
    if macro:
        return [scale * table[i][name] / table[i][denominator] for i in ids]
    mean = statistics.fmean(table[i][denominator] for i in ids)
    return [scale * table[i][name] / mean if mean > 0 else 0.0 for i in ids]
