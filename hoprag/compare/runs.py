"""Reading one finished run: an eval run's metrics.json and, on demand, the per-question figures and questions
of its predictions.jsonl (`Run`); a train run's monitored metric from its latest Lightning CSV log (`TrainRun`).
A file that cannot be read is a `CompareError` naming its path and line."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
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
from hoprag.utils.refusals import Refusal

METRICS = "metrics.json"
CONFIG = Path(".hydra") / "config.yaml"
TRAIN_LOGS = "csv/version_*/metrics.csv"
RECALL = re.compile(r"^retrieval/(answer|passage)_recall(@\d+)?$")


class CompareError(Refusal, ValueError):
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
        """Question id -> the figures that pair across runs: answer scores, retrieval recall, cost and the method's
        own figures (`method/<key>`)."""
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
    # a method's own per-question figures, named as metrics.json averages them (`method/<key>`)
    figures.update({f"method/{k}": float(v) for k, v in record.get("stats", {}).items()})
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


def natural_order(path: Path) -> list[Any]:
    """A sort key that puts job `2` before job `10` (and `version_2` before `version_10`)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


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
        logs = sorted(path.glob(TRAIN_LOGS), key=natural_order)
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
