"""The QA evaluation runner behind `eval.py`: a method over a dataset's questions, in resumable batches.

Every answered batch is appended to `predictions.jsonl` (id, method, question, prediction, golds,
retrieved passage ids, parse failure, per-question answer scores, cost and the method's trace) before the
next one starts, so a killed run resumes where it stopped when rerun in the same run directory; a directory
holding another method's answers or other questions is refused rather than mixed in. `metrics.json` is
always computed from the whole file, in dataset order, so a resumed run reports exactly what an
uninterrupted one does (bar the measured seconds).
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig
from tqdm import tqdm

from hoprag.data.dataset import QADataset
from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.cost import Cost
from hoprag.evaluation.predictions import PredictionFile
from hoprag.methods.base import Method, MethodOutput
from hoprag.metrics.aggregate import EvalRow, MetricSuite

PREDICTIONS = "predictions.jsonl"
METRICS = "metrics.json"
COUNTS = ("llm_calls", "llm_cache_hits", "prompt_tokens", "completion_tokens", "retrieval_calls", "passages_read")


def require_method(cfg: DictConfig) -> None:
    """Stop with the list of methods when the command line added none (`+method=` is how one is chosen)."""
    if cfg.get("method") is None:
        choices = sorted(p.stem for p in (Path(cfg.paths.root_dir) / "conf" / "method").glob("*.yaml"))
        raise SystemExit(f"choose a method: +method={{{','.join(choices)}}}")


def build(cfg: DictConfig) -> tuple[QADataset, Method]:
    """The dataset and the method with its components; the retriever (and its index over the dataset's
    corpus) only when the method needs one."""
    dataset = instantiate(cfg.data)
    factory = instantiate(cfg.method)
    components: dict[str, Any] = {}
    if factory.func.needs_retriever:
        components["retriever"] = instantiate(cfg.retriever)(corpus=dataset.corpus())
    components["llm"] = instantiate(cfg.llm)
    return dataset, factory(**components)


def run(
    method: Method,
    examples: Sequence[QAExample],
    output_dir: str | Path,
    batch_size: int = 16,
    overwrite: bool = False,
    suite: MetricSuite | None = None,
    passage: Callable[[str], Passage] | None = None,
    run_info: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    """Answer the questions not yet in `output_dir/predictions.jsonl`, then write and return the metrics.

    `passage` looks retrieved ids up again for the retrieval metrics (the retriever's `get`); `run_info`
    goes into metrics.json beside the metrics.
    """
    suite = suite or MetricSuite()
    repeated = [i for i, n in Counter(ex.id for ex in examples).items() if n > 1]
    if repeated:
        raise ValueError(f"the dataset has {len(repeated)} duplicate question ids, e.g. {repeated[:3]}")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    store = PredictionFile(output_dir / PREDICTIONS, overwrite=overwrite)
    foreign = store.ids - {ex.id for ex in examples}
    others = {r["method"] for r in store.records} - {method.name}
    if foreign or others:
        found = f"answers of {sorted(others)}" if others else f"{len(foreign)} questions that this run does not ask"
        raise ValueError(
            f"{store.path} holds {found} (another method, dataset or a larger limit?): "
            "use another run directory (hydra.run.dir=...) or overwrite=true"
        )
    todo = [ex for ex in examples if ex.id not in store.ids]
    if todo:  # metrics of an earlier state must not sit beside predictions still being written
        (output_dir / METRICS).unlink(missing_ok=True)
    started = time.perf_counter()
    with tqdm(total=len(examples), initial=len(examples) - len(todo), desc=method.name, unit="q") as bar:
        for i in range(0, len(todo), batch_size):
            batch = todo[i : i + batch_size]
            costs = [Cost() for _ in batch]
            outputs = method.answer(batch, costs)
            if len(outputs) != len(batch):
                raise RuntimeError(f"{method.name} answered {len(outputs)} of {len(batch)} questions")
            store.append(_record(method.name, *answered, suite) for answered in zip(batch, outputs, costs))
            bar.update(len(batch))
    metrics = summarize(store.records, examples, suite, passage)
    info = {
        **(run_info or {}),
        "method": method.name,
        "n": len(examples),
        "resumed_with": len(examples) - len(todo),
        "seconds": round(time.perf_counter() - started, 2),
    }
    (output_dir / METRICS).write_text(json.dumps({"run": info, "metrics": metrics}, indent=2))
    return metrics


def _record(method: str, example: QAExample, output: MethodOutput, cost: Cost, suite: MetricSuite) -> dict[str, Any]:
    return {
        "id": example.id,
        "method": method,
        "question": example.question,
        "prediction": output.prediction,
        "golds": list(example.answers),
        "retrieved": [p.id for p in output.retrieved],
        "parse_failed": output.parse_failed,
        "scores": suite.answer_scores(EvalRow(output.prediction, example.answers)),
        "cost": cost.to_dict(),
        "stats": dict(output.stats),
        "trace": output.trace,
    }


def summarize(
    records: Sequence[Mapping[str, Any]],
    examples: Sequence[QAExample],
    suite: MetricSuite,
    passage: Callable[[str], Passage] | None = None,
) -> dict[str, float]:
    """The suite's metrics over all questions, parse failures, and mean and total cost per question."""
    by_id = {r["id"]: r for r in records}
    missing = [ex.id for ex in examples if ex.id not in by_id]
    if missing:
        raise ValueError(f"{len(missing)} questions have no prediction, e.g. {missing[:3]}")
    records = [by_id[ex.id] for ex in examples]
    if passage is None and any(r["retrieved"] for r in records):
        raise ValueError("predictions name retrieved passages but no passage lookup was given")
    rows = [
        EvalRow.from_example(ex, r["prediction"], [passage(pid) for pid in r["retrieved"]])
        for ex, r in zip(examples, records)
    ]
    metrics: dict[str, float] = dict(suite(rows))
    failures = sum(bool(r["parse_failed"]) for r in records)
    metrics["parse_failures"] = failures
    metrics["parse_failures_pct"] = round(100 * failures / len(records), 1)

    totals: dict[str, float] = defaultdict(float)
    for r in records:
        for key in COUNTS:
            totals[key] += r["cost"].get(key, 0)  # older files lack newer counts
        for stage, seconds in r["cost"]["seconds"].items():
            totals[f"seconds/{stage}"] += seconds
            totals["seconds/total"] += seconds
    for key, total in sorted(totals.items()):
        digits = 4 if key.startswith("seconds/") else 2
        metrics[f"cost/mean/{key}"] = round(total / len(records), digits)
        metrics[f"cost/total/{key}"] = round(total, digits)
    stats: dict[str, list[float]] = defaultdict(list)
    for r in records:
        for key, value in r.get("stats", {}).items():
            stats[key].append(float(value))
    for key, values in sorted(stats.items()):  # mean over the questions that report the figure
        metrics[f"method/{key}"] = round(sum(values) / len(values), 4)
    return metrics


def format_summary(output_dir: str | Path, show: int = 0) -> str:
    """A readable report of a finished run: its first `show` predictions, then the metrics."""
    output_dir = Path(output_dir)
    report = json.loads((output_dir / METRICS).read_text())
    lines = []
    with open(output_dir / PREDICTIONS, encoding="utf-8") as f:
        for _, line in zip(range(show), f):
            r = json.loads(line)
            lines.append(f"Q: {r['question']}\n   predicted: {r['prediction']!r}   gold: {r['golds'][:3]}")
    run = report["run"]
    lines.append(f"{run['method']} on {run.get('dataset', '?')}: {run['n']} questions")
    lines.extend(f"  {key:<40} {value}" for key, value in report["metrics"].items())
    lines.append(f"written to {output_dir}")
    return "\n".join(lines)
