"""Compare finished `eval.py` runs: one table of quality and cost, and paired significance against a baseline.

    python -m hoprag.compare <run dir | multirun dir | glob>... [--baseline RUN] [--out DIR] [--intersect]

Each run is named by the Hydra overrides that set it apart from the others (`.hydra/overrides.yaml`), else by
its directory. Runs that differ only by `seed=` collapse to one row of mean ± std. Every other run is tested
against the baseline (the first run unless `--baseline` names one) over the questions both answered: a
paired bootstrap CI of the mean difference and a sign-flip permutation p-value per metric (`hoprag.stats`);
a seed group counts each question's mean over its seeds. Runs over different question sets are refused
unless `--intersect` asks for the shared ones. `--out` gets `table.csv`, `significance.csv` and `report.md`;
`build` returns the `Comparison` that any other rendering (an HTML report, plots) would start from.
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
import logging
import re
import statistics
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hoprag.evaluation.predictions import run_records
from hoprag.stats import RESAMPLES, PairedTest, paired_test

log = logging.getLogger(__name__)

METRICS = "metrics.json"
SEED = re.compile(r"^[+~]*seed=")
RECALL = re.compile(r"^retrieval/(answer|passage)_recall(@\d+)?$")


@dataclass(frozen=True)
class Column:
    """A table column: its key in metrics.json, the matching per-question figure (None: not paired-testable),
    its header, decimals, and the factor from the per-question figure to the metrics.json scale."""

    key: str
    per_question: str | None
    header: str
    digits: int
    scale: float = 1.0


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
COST = (
    Column("cost/mean/llm_calls", "llm_calls", "LLM calls", 2),
    Column("cost/mean/prompt_tokens", "prompt_tokens", "prompt tok", 1),
    Column("cost/mean/completion_tokens", "completion_tokens", "compl. tok", 1),
    Column("cost/mean/retrieval_calls", "retrieval_calls", "retrievals", 2),
    Column("cost/mean/seconds/total", "seconds", "s/question", 3),
)


class CompareError(ValueError):
    """Runs that cannot be compared as asked (missing, unfinished, or over different questions)."""


@dataclass
class Run:
    """One finished eval run: its directory, overrides, metrics.json and (read on demand) per-question figures."""

    path: Path
    overrides: list[str]
    info: dict[str, Any]
    metrics: dict[str, Any]
    _per_question: dict[str, dict[str, float]] | None = field(default=None, repr=False)

    @classmethod
    def load(cls, path: Path) -> Run:
        report = json.loads((path / METRICS).read_text())
        overrides_file = path / ".hydra" / "overrides.yaml"
        overrides = (yaml.safe_load(overrides_file.read_text()) or []) if overrides_file.is_file() else []
        return cls(path, [str(o) for o in overrides], report["run"], report["metrics"])

    @property
    def label(self) -> str:
        """The directory's name, with its parent's for a multirun job (named 0, 1, ...)."""
        return f"{self.path.parent.name}/{self.path.name}" if self.path.name.isdigit() else self.path.name

    def per_question(self) -> dict[str, dict[str, float]]:
        """Question id -> the figures that pair across runs: answer scores and cost."""
        if self._per_question is None:
            try:
                records = run_records(self.path)
            except FileNotFoundError as e:
                raise CompareError(f"{e}: paired tests read each question's scores from it") from e
            self._per_question = {r["id"]: _figures(r) for r in records}
        return self._per_question


def _figures(record: dict[str, Any]) -> dict[str, float]:
    cost = record["cost"]
    figures = {k: float(v) for k, v in record["scores"].items()}
    figures.update({k: float(cost[k]) for k in ("llm_calls", "prompt_tokens", "completion_tokens", "retrieval_calls")})
    figures["seconds"] = float(sum(cost["seconds"].values()))
    return figures


@dataclass
class Group:
    """Runs that differ only by seed (or a single run), shown as one row."""

    name: str
    runs: list[Run]

    def values(self, key: str) -> list[float]:
        return [float(r.metrics[key]) for r in self.runs if key in r.metrics]

    def question_ids(self, intersect: bool = False) -> set[str]:
        """The questions every run of the group answered; seeds over different questions are refused unless
        `intersect`."""
        sets = [set(r.per_question()) for r in self.runs]
        if any(s != sets[0] for s in sets) and not intersect:
            raise CompareError(
                f"the seeds of {self.name!r} answered different questions: rerun them alike or --intersect"
            )
        return set.intersection(*sets)

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
    groups: list[Group]
    baseline: Group
    columns: list[Column]
    significance: list[Significance]
    resamples: int


# -- finding runs ------------------------------------------------------------------------------------------------


def _natural(path: Path) -> list[Any]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def _jobs(folder: Path) -> list[Path]:
    """The finished runs directly under a multirun folder, in job order (unfinished ones skipped, with a word)."""
    jobs = []
    for sub in sorted((d for d in folder.iterdir() if d.is_dir()), key=_natural):
        if (sub / METRICS).is_file():
            jobs.append(sub)
        elif (sub / "predictions.jsonl").is_file():
            log.warning("skipping %s: no %s (the run has not finished)", sub, METRICS)
    return jobs


def find_runs(args: Iterable[str]) -> list[Path]:
    """The run directories that `args` name: run directories, multirun directories, or glob patterns."""
    found: list[Path] = []
    for arg in args:
        path = Path(arg)
        explicit = path.exists()
        matches = [path] if explicit else sorted((Path(m) for m in glob.glob(arg)), key=_natural)
        if not matches:
            raise CompareError(f"{arg}: no run directory, multirun directory or glob match")
        for match in matches:
            if (match / METRICS).is_file():
                found.append(match)
            elif match.is_dir() and (jobs := _jobs(match)):
                found.extend(jobs)
            elif explicit:
                what = "has not finished" if (match / "predictions.jsonl").is_file() else "is not an eval run"
                raise CompareError(f"{match} {what}: no {METRICS} in it or in its job folders")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise CompareError(f"no finished eval runs in {' '.join(args)}")
    return unique


# -- naming and grouping -----------------------------------------------------------------------------------------


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Collapse runs that differ only by `seed=`; name each group by the overrides no other run shares."""
    settings = [[o for o in r.overrides if not SEED.match(o)] for r in runs]
    common = set.intersection(*(set(s) for s in settings))
    groups: dict[Any, list[int]] = {}
    for i, (run, own) in enumerate(zip(runs, settings)):
        seeded = len(own) < len(run.overrides)
        groups.setdefault(tuple(own) if seeded else ("", str(run.path)), []).append(i)
    named = []
    for members in groups.values():
        own = settings[members[0]]
        name = ",".join(o for o in own if o not in common) or (",".join(own) if len(runs) == 1 else "")
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
    """The quality and cost columns that at least one run reports, recall metrics in the order runs list them."""
    present = dict.fromkeys(k for g in groups for r in g.runs for k in r.metrics)
    recall = [Column(k, None, k.removeprefix("retrieval/"), 1) for k in present if RECALL.match(k)]
    return [c for c in (*QUALITY, *recall, *LATE_QUALITY, *COST) if c.key in present]


def shared_questions(group: Group, baseline: Group, intersect: bool) -> list[str]:
    ids, base = group.question_ids(intersect), baseline.question_ids(intersect)
    shared = sorted(ids & base)
    if ids != base and not intersect:
        raise CompareError(
            f"{group.name!r} answered {len(ids)} questions and the baseline {baseline.name!r} {len(base)}, "
            f"{len(shared)} of them shared: different question sets are not compared unless --intersect "
            "asks for the shared ones"
        )
    if not shared:
        raise CompareError(f"{group.name!r} and the baseline {baseline.name!r} share no question")
    return shared


def build(
    args: Iterable[str],
    baseline: str | None = None,
    intersect: bool = False,
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> Comparison:
    """Find the runs, group them, and test every group against the baseline on each paired metric."""
    groups = group_runs([Run.load(p) for p in find_runs(args)])
    base = pick_baseline(groups, baseline)
    columns = table_columns(groups)
    tests = []
    for group in groups:
        if group is base:
            continue
        ids = shared_questions(group, base, intersect)
        for column in columns:
            if column.per_question is None:
                continue
            a, b = base.figure(column.per_question, ids), group.figure(column.per_question, ids)
            if a is None or b is None:
                continue
            a, b = [x * column.scale for x in a], [x * column.scale for x in b]
            tests.append(Significance(group.name, column, paired_test(a, b, resamples=resamples, seed=seed)))
    return Comparison(groups, base, columns, tests, resamples)


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


def markdown_table(comparison: Comparison) -> str:
    seeded = any(len(g.runs) > 1 for g in comparison.groups)
    header = ["run", *(["runs"] if seeded else []), "n", *(c.header for c in comparison.columns)]
    body = []
    for row in table_rows(comparison):
        cells = [f"{row[c.key]} ± {row[c.key + '_std']}" if row[c.key + "_std"] else row[c.key] or "–"
                 for c in comparison.columns]  # fmt: skip
        body.append([row["run"], *([row["runs"]] if seeded else []), row["n"], *cells])
    return _markdown(header, body)


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


def markdown_significance(comparison: Comparison) -> str:
    if not comparison.significance:
        return f"(no run to test against the baseline {comparison.baseline.name!r})"
    level = round(100 * comparison.significance[0].test.level)
    intro = (f"Paired against the baseline `{comparison.baseline.name}` over shared questions: "
             f"bootstrap {level}% CI of the difference and sign-flip permutation p ({comparison.resamples} resamples).")  # fmt: skip
    header = ["run", "metric", "shared", "baseline", "run value", "Δ", f"{level}% CI", "p"]
    rows = zip(comparison.significance, significance_rows(comparison))
    body = [[r["run"], s.column.header, r["shared"], r["baseline"], r["value"], r["diff"],
             f"[{r['ci_low']}, {r['ci_high']}]", r["p"]] for s, r in rows]  # fmt: skip
    return intro + "\n\n" + _markdown(header, body)


def report(comparison: Comparison) -> str:
    return markdown_table(comparison) + "\n\n" + markdown_significance(comparison) + "\n"


def _write_csv(path: Path, rows: list[dict[str, str]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["run"])
        writer.writeheader()
        writer.writerows(rows)


def write(comparison: Comparison, out: Path) -> None:
    """`table.csv`, `significance.csv` and `report.md` into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(out / "table.csv", table_rows(comparison))
    _write_csv(out / "significance.csv", significance_rows(comparison))
    (out / "report.md").write_text(report(comparison), encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hoprag.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="eval run directories, multirun directories or glob patterns")
    parser.add_argument("--baseline", help="the run the others are tested against (default: the first)")
    parser.add_argument("--out", type=Path, help="folder for table.csv, significance.csv and report.md")
    parser.add_argument("--intersect", action="store_true", help="compare runs over their shared questions")
    parser.add_argument("--resamples", type=int, default=RESAMPLES, help="bootstrap and permutation resamples")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resampling")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        comparison = build(args.runs, args.baseline, args.intersect, args.resamples, args.seed)
    except CompareError as e:
        parser.error(str(e))
    print(report(comparison), end="")
    if args.out is not None:
        write(comparison, args.out)
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
