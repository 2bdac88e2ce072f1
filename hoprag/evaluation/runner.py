"""The QA evaluation runner behind `eval.py`: a method over a dataset's questions, in resumable batches.

Every answered batch is appended to `predictions.jsonl` before the next one starts, so a killed run resumes
where it stopped when rerun in the same run directory. Each record carries everything its scoring needs
(gold answers, gold titles, gold passage texts, the retrieved passages as they were, for ASQA and
AmbigDocs questions their gold structure under the optional key `ambiguity`, for CRAG questions their
categories and judged outcome under the optional key `crag`: the judge runs once, when the record is
written, never at summary time, `generated: false` when the method generated no answer, so that its
empty prediction is never scored as one, and `question_too_long: true` when the question alone overran the
LLM's input budget: its empty answer is scored as wrong, and the run goes on; for questions with a gold
decomposition (MuSiQue, 2Wiki) their chain under `gold_hops`, which hop attribution reads, and with `+oracle=`
what the oracle retriever did under `oracle`: `hoprag.retrieval.oracle`), so `metrics.json` is computed
from the records alone, in dataset order: a resumed run reports exactly what an uninterrupted one does (bar
the measured seconds), and today's files never rescore yesterday's answers.

A rerun is refused before anything in the directory changes when the directory was started with other
settings (`run_fingerprint.json`, see `hoprag.evaluation.fingerprint`), holds another method's answers,
questions this run does not ask, or records of an older format. `metrics.json` is replaced atomically at the
end only (`run.n`: the predictions it covers), so a refused or crashed run leaves the last one in place.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from numbers import Number
from pathlib import Path
from typing import Any

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from hoprag.config import apply_aids
from hoprag.cost import Cost
from hoprag.data.dataset import QADataset
from hoprag.data.types import Passage, QAExample
from hoprag.evaluation import fingerprint as fp
from hoprag.evaluation.judges import judge_info
from hoprag.evaluation.predictions import PredictionFile
from hoprag.llm.prompts import PromptTooLongError
from hoprag.methods.base import Method, MethodOutput
from hoprag.metrics.aggregate import EvalRow, MetricSuite
from hoprag.metrics.crag import rules_info
from hoprag.retrieval.oracle import ORACLE, Asking, OracleError, asking, oracle_metrics
from hoprag.utils import progress

log = logging.getLogger(__name__)

PREDICTIONS = "predictions.jsonl"
METRICS = "metrics.json"
RECORD_FIELDS = frozenset({
    "id", "method", "question", "prediction", "golds", "gold_titles", "gold_passages", "retrieved",
    "parse_failed", "scores", "cost", "stats", "trace",
})  # fmt: skip
OVERWRITE = "overwrite=true to start this one afresh"
TOO_LONG = "question_too_long"  # a record's key (and trace key) for a question too long for the LLM


def require_method(cfg: DictConfig) -> None:
    """Stop with the list of methods when the command line added none (`+method=` is how one is chosen)."""
    if cfg.get("method") is None:
        choices = sorted(p.stem for p in (Path(cfg.paths.root_dir) / "conf" / "method").glob("*.yaml"))
        raise SystemExit(f"choose a method: +method={{{','.join(choices)}}}")


def method_name(cfg: DictConfig) -> str:
    """The configured method's registered name, known before anything is built (`<name>+pruning` when
    `+pruning=` puts source pruning in front of it)."""
    name = get_class(cfg.method._target_).name
    return f"{name}+pruning" if cfg.get("pruning") is not None else name


def build(cfg: DictConfig, dataset: QADataset) -> Method:
    """The method with its components; the retriever (and its index over the dataset's corpus) only when
    the method needs one. With `+pruning=`, the pruning wraps the method (`hoprag.methods.WithPruning`). The
    small-model overlay is merged first (a no-op when eval.py already did: `hoprag.config.apply_aids`)."""
    apply_aids(cfg)
    check_settings(cfg)
    if cfg.get("oracle") is not None and not fp.uses_retriever(cfg):
        raise OracleError("+oracle= wraps the retriever, and this method (or its +pruning=) searches none")
    factory = instantiate(cfg.method)
    llm = instantiate(cfg.llm)
    if cfg.get("pruning") is not None:
        return instantiate(cfg.pruning)(framework=factory, llm=llm)
    if fp.uses_retriever(cfg):
        retriever = instantiate(cfg.retriever)(corpus=dataset.corpus())
        if cfg.get("oracle") is not None:  # +oracle=: gold passages injected or withheld (hoprag/retrieval/oracle.py)
            retriever = instantiate(cfg.oracle)(inner=retriever)
        return factory(llm=llm, retriever=retriever)
    return factory(llm=llm)


def check_settings(cfg: DictConfig) -> None:
    """The method's refusals that its settings alone decide (`Method.check_settings`), made before any model
    loads or index is built; with `+pruning=`, the framework's (`cfg.method`) and then the pruning's, given
    the framework's settings as `framework`."""
    settings = OmegaConf.to_container(cfg.method, resolve=True)
    get_class(cfg.method._target_).check_settings(settings)
    if cfg.get("pruning") is not None:
        pruning = OmegaConf.to_container(cfg.pruning, resolve=True)
        get_class(cfg.pruning._target_).check_settings({**pruning, "framework": settings})


def run(
    method: Method,
    examples: Sequence[QAExample],
    output_dir: str | Path,
    batch_size: int = 16,
    overwrite: bool = False,
    suite: MetricSuite | None = None,
    run_info: Mapping[str, Any] | None = None,
    fingerprint: Mapping[str, Any] | None = None,
    on_start: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Answer the questions not yet in `output_dir/predictions.jsonl`, then write and return the metrics.

    `fingerprint` (`fingerprint.eval_fingerprint(cfg)`) is saved when the run starts afresh and must match
    when it resumes; `run_info` and the method's `run_info()` go into metrics.json beside the metrics.
    Nothing in `output_dir` changes before the preflight has passed (the questions checked, the resume
    allowed, the LLM probed for what the method needs); then `on_start` is called (eval.py writes `.hydra/`)
    and `overwrite` discards the directory's predictions, metrics and fingerprint.
    """
    suite = suite or MetricSuite()
    repeated = [i for i, n in Counter(ex.id for ex in examples).items() if n > 1]
    if repeated:
        raise ValueError(f"the dataset has {len(repeated)} duplicate question ids, e.g. {repeated[:3]}")
    output_dir = Path(output_dir)
    store = PredictionFile(output_dir / PREDICTIONS)
    if not overwrite:
        refuse_mixing(store, method.name, examples, fingerprint)
    todo = list(examples) if overwrite else [ex for ex in examples if ex.id not in store.ids]
    if todo:  # e.g. a server without log-probs, or a router's training questions: refused before any
        method.check_questions(todo)  # question is asked or an old run removed
        method.check_capabilities()
    if on_start is not None:
        on_start()
    if overwrite:
        store.clear()
        for name in (METRICS, fp.FINGERPRINT):
            (output_dir / name).unlink(missing_ok=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    if fingerprint is not None and fp.load(output_dir) != fingerprint:  # a fresh start
        fp.save(output_dir, fingerprint)
    if len(todo) < len(examples):
        log.info("resuming: %d of %d answers kept in %s", len(examples) - len(todo), len(examples), store.path)
    started = time.perf_counter()
    spent: list[Cost] = []  # this run's cost records, for the bar's LLM calls and tokens so far
    with progress.bar(total=len(examples), initial=len(examples) - len(todo), desc=method.name, unit="q") as bar:
        for i in range(0, len(todo), batch_size):
            batch = todo[i : i + batch_size]
            outputs, costs = _answer(method, batch)
            spent += costs
            if len(outputs) != len(batch):
                raise RuntimeError(f"{method.name} answered {len(outputs)} of {len(batch)} questions")
            rows = suite.judge(
                [EvalRow.from_example(ex, o.prediction, o.retrieved, method.generates) for ex, o in zip(batch, outputs)]
            )
            store.append(_record(method.name, *answered, suite) for answered in zip(batch, rows, outputs, costs))
            bar.set_postfix(refresh=False, **progress.spent(spent))
            bar.update(len(batch))
    by_id = {r["id"]: r for r in store.records}
    records = [by_id[ex.id] for ex in examples]
    metrics = summarize(records, suite)
    info = {
        **(run_info or {}),
        **method.run_info(),
        **judge_info(suite.crag_judge),  # the judge that scored CRAG's answers: name, model, provenance
        **rules_info([r["crag"] for r in records if "crag" in r]),  # and the rules before it
        "method": method.name,
        "n": len(examples),
        "resumed_with": len(examples) - len(todo),
        "seconds": round(time.perf_counter() - started, 2),
    }
    _replace(output_dir / METRICS, json.dumps({"run": info, "metrics": metrics}, indent=2))
    return metrics


def _answer(method: Method, batch: Sequence[QAExample]) -> tuple[list[MethodOutput], list[Cost]]:
    """The batch's answers and cost records; when a prompt is over the LLM's input budget, each question's
    alone (afresh, costs too), so that a question too long for it fails alone (`_alone`)."""
    costs = [Cost() for _ in batch]
    try:
        with asking(batch, costs) as asked:  # an oracle retriever's searches know their questions
            return _oracle_noted(method.answer(batch, costs), asked), costs
    except PromptTooLongError:
        costs = [Cost() for _ in batch]
        return [_alone(method, example, cost) for example, cost in zip(batch, costs)], costs


def _alone(method: Method, example: QAExample, cost: Cost) -> MethodOutput:
    """One question's answer. A question whose prompt is over the budget only with the question in it (the
    prompt's other tokens fit) gets an empty answer, scored as wrong, and its record `question_too_long`; a
    prompt over it whatever the question is the config's fault, and refused."""
    try:
        with asking([example], [cost]) as asked:
            return _oracle_noted(method.answer([example], [cost]), asked)[0]
    except PromptTooLongError as error:
        if error.tokens - method.llm.count_tokens([example.question])[0] > error.limit:
            raise
        log.warning("question %r is too long for the LLM, left unanswered (%s): %s", example.id, TOO_LONG, error)
        return MethodOutput("", trace={TOO_LONG: str(error)})


def _oracle_noted(outputs: list[MethodOutput], asked: Asking) -> list[MethodOutput]:
    """The outputs, each with what an oracle retriever did for its question (if any) under `ORACLE` in its trace,
    which `_record` moves into the record."""
    for output, done in zip(outputs, asked.report()):
        if done is not None:
            output.trace[ORACLE] = done
    return outputs


def refuse_mixing(
    store: PredictionFile, method: str, examples: Sequence[QAExample], fingerprint: Mapping[str, Any] | None
) -> None:
    """Raise `ResumeRefused` unless resuming `store` with this method, these questions and these settings
    (when a fingerprint is given) would keep one run's answers apart from another's. Reads only."""
    if not store.records:  # nothing to protect: a first start, or one that died before its first batch
        return
    ways_out = f"use another run directory (hydra.run.dir=...) or {OVERWRITE}"
    if fingerprint is not None:
        fp.refuse_changed(store.path.parent, fingerprint, what="predictions and metrics", remedy=OVERWRITE)
    stale = [r["id"] for r in store.records if not RECORD_FIELDS <= r.keys()]
    if stale:
        raise fp.ResumeRefused(
            f"{store.path} holds {len(stale)} records of an older format, without the gold titles, gold "
            f"passages and retrieved passages that scoring reads from each record: {ways_out}"
        )
    foreign = store.ids - {ex.id for ex in examples}
    others = {r["method"] for r in store.records} - {method}
    if foreign or others:
        found = f"answers of {sorted(others)}" if others else f"{len(foreign)} questions that this run does not ask"
        raise fp.ResumeRefused(f"{store.path} holds {found} (another method, dataset or a smaller limit?): {ways_out}")


def _record(
    method: str, example: QAExample, row: EvalRow, output: MethodOutput, cost: Cost, suite: MetricSuite
) -> dict[str, Any]:
    record = {
        "id": example.id,
        "method": method,
        "question": example.question,
        "prediction": output.prediction,
        "golds": list(row.golds),
        "gold_titles": list(row.gold_titles),
        "gold_passages": list(row.gold_passages),
        "retrieved": [_evidence(p) for p in row.retrieved],
        "parse_failed": output.parse_failed,
        "scores": suite.answer_scores(row),
        "cost": cost.to_dict(),
        "stats": dict(output.stats),
        "trace": output.trace,
    }
    if row.ambiguity is not None:  # ASQA / AmbigDocs only: the other datasets' records stay as they were
        record["ambiguity"] = row.ambiguity
    if row.crag is not None:  # CRAG only, judged: categories, outcome and the judge's raw reply
        record["crag"] = row.crag
    if TOO_LONG in output.trace:  # left unanswered: the question alone overran the LLM's input budget
        record[TOO_LONG] = True
    if example.decomposition:  # the gold chain (MuSiQue, 2Wiki), for hop attribution (hoprag/compare/hops.py)
        record["gold_hops"] = [{"question": h.question, "answer": h.answer, "title": h.support_title}
                               for h in example.decomposition]  # fmt: skip
    if ORACLE in output.trace:  # +oracle=: what the oracle retriever did for this question
        record[ORACLE] = output.trace.pop(ORACLE)
    if not row.answered:  # retrieval only: no answer scores, and none in metrics.json
        record["generated"] = False
    return record


def _evidence(passage: Passage) -> dict[str, str]:
    """A read passage as the record keeps it: enough to score it without looking anything up again."""
    record = {"id": passage.id, "title": passage.title, "text": passage.text}
    if passage.origin:
        record["origin"] = passage.origin
    return record


def _row(record: Mapping[str, Any]) -> EvalRow:
    return EvalRow(
        prediction=record["prediction"],
        golds=record["golds"],
        retrieved=[Passage(p["id"], p["title"], p["text"], p.get("origin", "")) for p in record["retrieved"]],
        gold_titles=record["gold_titles"],
        gold_passages=record["gold_passages"],
        ambiguity=record.get("ambiguity"),
        crag=record.get("crag"),  # judged when the record was written
        answered=record.get("generated", True),
    )


def summarize(records: Sequence[Mapping[str, Any]], suite: MetricSuite) -> dict[str, float]:
    """The suite's metrics over the records alone, parse failures of the generated answers (none when
    nothing was generated), the questions left unanswered as too long for the LLM, those with an empty search,
    the methods' stats, and the mean and total per question of every numeric cost figure (and of the seconds
    of each stage)."""
    metrics: dict[str, float] = dict(suite([_row(r) for r in records]))
    answered = [r for r in records if r.get("generated", True)]
    if answered:
        failures = sum(bool(r["parse_failed"]) for r in answered)
        metrics["parse_failures"] = failures
        metrics["parse_failures_pct"] = round(100 * failures / len(answered), 1)
    too_long = sum(TOO_LONG in r for r in records)
    if too_long:  # questions left unanswered, too long for the LLM's input budget
        metrics["questions_too_long"] = too_long
    if any(r["cost"].get("retrieval_calls") for r in records):  # questions with a search that found no hit
        metrics["retrieval/empty_results"] = sum(r["cost"].get("empty_results", 0) > 0 for r in records)
    metrics.update(oracle_metrics(records))  # +oracle= runs only: what the oracle retriever did, in total

    totals: dict[str, float] = defaultdict(float)
    for r in records:
        for key, value in r["cost"].items():
            if isinstance(value, Number):  # a figure some questions lack counts 0 for them
                totals[key] += value
        for stage, seconds in r["cost"]["seconds"].items():
            totals[f"seconds/{stage}"] += seconds
            totals["seconds/total"] += seconds
    for key, total in sorted(totals.items()):
        digits = 4 if key.startswith("seconds/") else 2
        metrics[f"cost/mean/{key}"] = round(total / len(records), digits)
        metrics[f"cost/total/{key}"] = round(total, digits)
    stats: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for key, value in r["stats"].items():
            stats[key].append(float(value))
    for key, values in sorted(stats.items()):  # mean over the questions that report the figure
        metrics[f"method/{key}"] = round(sum(values) / len(values), 4)
    return metrics


def _replace(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a temporary file renamed over it)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
