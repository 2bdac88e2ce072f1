"""Router labels from judged outcomes: the labelling run of spec/pruningrag.md §5.3 (P2).

Every router-training question is answered once per candidate source configuration (`fixed` sources, all
else the same), through the method's normal `answer` path (costs charged), each answer is judged with CRAG's
evaluator (`hoprag.metrics.crag`), and the sources whose answer was correct become the question's label
(`outcome_labels`: priority api > web > llm, and the similar-question back-off when none was correct).

Answers and outcomes are appended to a JSONL cache batch by batch, one line per (question, configuration),
so a rerun asks no LLM twice and a crashed run resumes where it stopped. A line carries two fingerprints:
`settings`, of what shapes that configuration's answer (the method config without the fixed sources and the
router, restricted to the configuration's own sources, and the LLM), and `judge`, of the judge, the golds it
reads and its prompt (`LLMJudge.prompt_id`). An answer is reused only under equal `settings`, its
outcome only under an equal `judge` too (a new judge, or a new prompt, re-judges cached answers without
answering again); lines of other settings stay, unused.
A configuration naming a source that is not available (a null source, e.g. the mock API offline) is
skipped and counted, and the back-off never picks its sources.
"""

from __future__ import annotations

import gc
import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hoprag.config import plain, select_settings
from hoprag.cost import Cost
from hoprag.data.records import DataFormatError
from hoprag.data.types import QAExample
from hoprag.metrics.crag import CORRECT, HALLUCINATION, MISSING, Judge, crag_golds, crag_outcomes, judge_name
from hoprag.routers.labels import CRAG_PRIORITY, outcome_labels
from hoprag.utils.run_control import LLM_TRANSPORT, RUN_CONTROL_ANYWHERE

log = logging.getLogger(__name__)

CACHE_FILE = "outcomes.jsonl"
OUTCOMES = (CORRECT, MISSING, HALLUCINATION)
# eval.py's run control, with the LLM's transport settings matched wherever an LLM sits (the judge's own too)
IGNORED = (*RUN_CONTROL_ANYWHERE, *(f"*.{key}" for key in LLM_TRANSPORT))
# method keys that do not shape a fixed-source answer: which sources are fixed, and the router
NOT_ANSWERING = ("strategy", "fixed", "router", "router_llm")
_FIELDS = {"id": str, "sources": list, "settings": str, "judge": str, "prediction": str, "outcome": str}

Configuration = tuple[str, ...]


class Answerer(Protocol):
    """A method (`hoprag.methods.Method`): one output with a `prediction` per question, costs charged."""

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> Sequence[Any]: ...


# factory(sources) -> the method answering from exactly those sources, or None where one is unavailable
MethodFactory = Callable[[Configuration], Answerer | None]


def fingerprint(settings: Any) -> str:
    """A short sha256 of JSON-serialisable settings (keys sorted)."""
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:16]


def name_of(configuration: Sequence[str]) -> str:
    return "+".join(configuration)


def crag_bucket(example: QAExample) -> tuple[Any, Any, Any]:
    """The "similar questions" of P2: CRAG's (domain, static_or_dynamic, question_type)."""
    return example.metadata.get("domain"), example.metadata.get("static_or_dynamic"), example.type


class OutcomeCache:
    """The labelling run's JSONL cache (`path`; None keeps it in memory only). A malformed line is an error
    naming the file and line, except a last line cut short by a kill (no newline): dropped with a warning,
    and cut off before the next append."""

    def __init__(self, path: str | os.PathLike | None) -> None:
        self.path = Path(path) if path is not None else None
        self._answers: dict[tuple, dict[str, Any]] = {}  # (id, sources, settings) -> the latest line
        self._judged: dict[tuple, dict[str, Any]] = {}  # (id, sources, settings, judge) -> the latest line
        self._keep_bytes: int | None = None  # where a truncated last line starts
        if self.path is not None and self.path.exists():
            self._load()

    def _load(self) -> None:
        raw = self.path.read_bytes()
        start = 0
        for n, line in enumerate(raw.split(b"\n"), 1):
            end = start + len(line)
            if line.strip():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError as err:
                    if end == len(raw):  # the last line, without its newline: a killed run was writing it
                        log.warning("%s, line %d: dropping a truncated last line", self.path, n)
                        self._keep_bytes = start
                        break
                    raise DataFormatError(f"{self.path}, line {n}: not JSON ({err.msg})") from None
                self._add(entry, f"{self.path}, line {n}")
            start = end + 1

    def _add(self, entry: Any, where: str) -> None:
        if not isinstance(entry, dict):
            raise DataFormatError(f"{where}: not a JSON object")
        for key, kind in _FIELDS.items():
            if not isinstance(entry.get(key), kind):
                raise DataFormatError(f"{where}: `{key}` missing or not a {kind.__name__}")
        if entry["outcome"] not in OUTCOMES:
            raise DataFormatError(f"{where}: outcome {entry['outcome']!r} is not one of {OUTCOMES}")
        answer_key = (entry["id"], tuple(entry["sources"]), entry["settings"])
        self._answers[answer_key] = entry
        self._judged[(*answer_key, entry["judge"])] = entry

    def answer(self, qid: str, sources: Configuration, settings: str) -> dict[str, Any] | None:
        return self._answers.get((qid, sources, settings))

    def judged(self, qid: str, sources: Configuration, settings: str, judge: str) -> dict[str, Any] | None:
        return self._judged.get((qid, sources, settings, judge))

    def append(self, entries: Sequence[dict[str, Any]]) -> None:
        """Add the lines and, with a file, write them (flushed and fsynced) before returning."""
        for entry in entries:
            self._add(entry, "new cache line")
        if self.path is None or not entries:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._keep_bytes is not None:
            with open(self.path, "r+b") as f:
                f.truncate(self._keep_bytes)
            self._keep_bytes = None
        text = "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


@dataclass
class OutcomeRun:
    """Per training question: the sources whose answer was correct and the label; and the run's counts."""

    correct: list[frozenset[str]]
    labels: list[tuple[str, ...]]
    summary: dict[str, Any]


def _batches(items: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    return (items[i : i + size] for i in range(0, len(items), size))


def collect_outcomes(
    examples: Sequence[QAExample],
    configurations: Sequence[Sequence[str]],
    factory: MethodFactory,
    settings: Mapping[Configuration, str],
    cache: OutcomeCache,
    judge: Judge | None = None,
    judge_settings: str = "",
    batch_size: int = 16,
    alt_answers: bool = False,
) -> tuple[list[set[str]], dict[str, Any]]:
    """(per question, the sources of every configuration whose answer was judged correct; counts).

    Per configuration: outcomes cached under its `settings[configuration]` and `judge_settings` are read;
    cached answers without such an outcome are judged; the rest are answered by `factory(configuration)`
    (built only when something is left to answer; None: the configuration is unavailable and skipped) in
    batches of `batch_size`, each batch judged and appended to `cache` before the next one starts."""
    correct: list[set[str]] = [set() for _ in examples]
    counts: dict[str, Any] = {"answered": {}, "cached": {}, "rejudged": {}, "unavailable": [], "outcomes": {},
                              "answer_llm_calls": 0}  # fmt: skip
    for configuration in (tuple(c) for c in configurations):
        name = name_of(configuration)
        run = _Configuration(configuration, settings[configuration], cache, judge, judge_settings, alt_answers)
        rejudge, todo = run.read(examples)
        counts["cached"][name] = len(run.outcome)
        method = factory(configuration) if todo else None
        if todo and method is None:
            counts["unavailable"].append(name)
            log.info("router labels: %s is not available, skipped (%d questions)", name, len(todo))
            continue
        for batch in _batches(rejudge, batch_size):
            run.store([ex for ex, _ in batch], [prediction for _, prediction in batch], [None] * len(batch))
        for batch in _batches(todo, batch_size):
            costs = [Cost() for _ in batch]
            outputs = method.answer(batch, costs)
            if len(outputs) != len(batch):
                raise RuntimeError(f"{name}: {len(outputs)} answers to {len(batch)} questions")
            counts["answer_llm_calls"] += sum(c.llm_calls - c.llm_cache_hits for c in costs)
            run.store(batch, [o.prediction for o in outputs], costs)
        counts["answered"][name], counts["rejudged"][name] = len(todo), len(rejudge)
        counts["outcomes"][name] = dict(Counter(run.outcome[ex.id] for ex in examples))
        for i, ex in enumerate(examples):
            if run.outcome[ex.id] == CORRECT:
                correct[i].update(configuration)
    return correct, counts


@dataclass
class _Configuration:
    """One configuration's outcomes under one setting and judge: what the cache holds, and storing more."""

    sources: Configuration
    settings: str
    cache: OutcomeCache
    judge: Judge | None
    judge_settings: str
    alt_answers: bool
    outcome: dict[str, str] = field(default_factory=dict)  # question id -> outcome, cached or judged now

    def read(self, examples: Sequence[QAExample]) -> tuple[list[tuple[QAExample, str]], list[QAExample]]:
        """Fill `outcome` from the cache; return (cached answers to judge, questions to answer)."""
        rejudge, todo = [], []
        for ex in examples:
            if entry := self.cache.judged(ex.id, self.sources, self.settings, self.judge_settings):
                self.outcome[ex.id] = entry["outcome"]
            elif entry := self.cache.answer(ex.id, self.sources, self.settings):
                rejudge.append((ex, entry["prediction"]))
            else:
                todo.append(ex)
        return rejudge, todo

    def store(self, batch: Sequence[QAExample], predictions: Sequence[str], costs: Sequence[Cost | None]) -> None:
        """Judge the batch's answers (one judge call) and append their lines to the cache."""
        items = [(ex.question, crag_golds(ex.answers, self.alt_answers), p) for ex, p in zip(batch, predictions)]
        results = crag_outcomes(items, self.judge)
        lines = []
        for ex, prediction, (outcome, reply), cost in zip(batch, predictions, results, costs):
            self.outcome[ex.id] = outcome
            lines.append({"id": ex.id, "sources": list(self.sources), "settings": self.settings,
                          "judge": self.judge_settings, "prediction": prediction, "outcome": outcome,
                          "judge_reply": reply, "cost": cost.to_dict() if cost else None})  # fmt: skip
        self.cache.append(lines)


def label_by_outcomes(
    examples: Sequence[QAExample],
    configurations: Sequence[Sequence[str]],
    factory: MethodFactory,
    settings: Mapping[Configuration, str],
    cache: OutcomeCache,
    judge: Judge | None = None,
    judge_settings: str = "",
    batch_size: int = 16,
    alt_answers: bool = False,
    mode: str = "single",
    priority: Sequence[str] = CRAG_PRIORITY,
    bucket: Callable[[QAExample], Sequence[Any]] = crag_bucket,
) -> OutcomeRun:
    """`collect_outcomes`, then `outcome_labels` over the sources of the available configurations only (in
    `priority` order), so no label names a source that was never tried. The summary counts questions,
    answers made now / read from the cache / re-judged per configuration, unavailable configurations,
    outcomes per configuration, correct answers per source, labels and how many came from the back-off."""
    started = time.perf_counter()
    correct, counts = collect_outcomes(examples, configurations, factory, settings, cache, judge,
                                       judge_settings, batch_size, alt_answers)  # fmt: skip
    tried = {s for c in configurations if name_of(c) not in counts["unavailable"] for s in c}
    order = [s for s in priority if s in tried]
    if not order:
        raise ValueError(f"no configuration of {[name_of(c) for c in configurations]} is available: nothing to label")
    labels = outcome_labels(correct, [bucket(ex) for ex in examples], mode, order)
    summary = {
        "questions": len(examples),
        **counts,
        "correct": {s: sum(s in c for c in correct) for s in order},
        "backoff": sum(not c for c in correct),
        "labels": dict(Counter(name_of(label) for label in labels)),
        "seconds": round(time.perf_counter() - started, 2),
    }
    log.info("router labels from outcomes: %s", json.dumps(summary))
    return OutcomeRun([frozenset(c) for c in correct], labels, summary)


class OutcomeLabeller:
    """The labelling run from configs: `method` a PruningRAG config (`_partial_`, as conf/method/pruningrag.yaml),
    `llm` the answering LLM's config, `judge` a CRAG judge's config (null: exact match only, every other
    answer a hallucination). Nothing is built until something is left to answer or judge, so a fully cached
    rerun loads no model, and `release` lets go of whatever was built. Called with the router-training questions,
    it returns their `OutcomeRun`. The cache is `cache_dir/outcomes.jsonl` (null: in memory only), read at the
    first call and kept: a second call answers nothing the first did."""

    def __init__(
        self,
        method: Mapping[str, Any],
        llm: Mapping[str, Any],
        judge: Mapping[str, Any] | None = None,
        configurations: Sequence[Sequence[str]] = (("web",), ("api",), ("llm",)),
        cache_dir: str | None = None,
        batch_size: int = 16,
        mode: str = "single",
        priority: Sequence[str] = CRAG_PRIORITY,
        alt_answers: bool = False,
    ) -> None:
        self.method_cfg, self.llm_cfg, self.judge_cfg = plain(method), plain(llm), plain(judge)
        self.configurations = [tuple(c) for c in configurations]
        self.cache_path = Path(cache_dir) / CACHE_FILE if cache_dir is not None else None
        self.batch_size, self.mode, self.priority, self.alt_answers = batch_size, mode, tuple(priority), alt_answers
        self.llm: Any = None  # the answering LLM, once something needed answering
        self._partial: Any = None
        self._judge: Judge | None = None
        self._cache: OutcomeCache | None = None

    def available(self, configuration: Configuration) -> bool:
        sources = self.method_cfg.get("sources") or {}
        return all(sources.get(s) is not None for s in configuration)

    def settings(self, configuration: Configuration) -> str:
        """The fingerprint of what shapes this configuration's answers: the method config without the
        fixed sources, the router and the other sources, and the LLM, both without run-control keys."""
        method = {k: v for k, v in self.method_cfg.items() if k not in NOT_ANSWERING}
        method["sources"] = {s: v for s, v in (method.get("sources") or {}).items() if s in configuration}
        return fingerprint(select_settings({"method": method, "llm": self.llm_cfg}, ("method", "llm"), IGNORED))

    def judge_settings(self) -> str:
        judge = select_settings({"judge": self.judge_cfg}, ("judge",), IGNORED)
        return fingerprint({**judge, "alt_answers": self.alt_answers, "judge_prompt": self.judge_prompt()})

    def judge_prompt(self) -> str | None:
        """The judge's prompt id (`hoprag.evaluation.judges.LLMJudge.prompt_id`; None for a judge without a
        prompt, or none), read off its class without building it."""
        if self.judge_cfg is None:
            return None
        from hydra.utils import get_class

        return getattr(get_class(self.judge_cfg["_target_"]), "prompt_id", None)

    def method(self, configuration: Configuration) -> Answerer | None:
        """PruningRAG answering from exactly `configuration` (the LLM and sources built once, on first use)."""
        if not self.available(configuration):
            return None
        from hydra.utils import instantiate

        if self._partial is None:
            self.llm, self._partial = instantiate(self.llm_cfg), instantiate(self.method_cfg)
        return self._partial(llm=self.llm, strategy="fixed", fixed=list(configuration))

    def provenance(self) -> dict[str, Any]:
        """How the labels are made, for the router's export (and every run that routes with it): outcome labels,
        the answering LLM, the configurations tried and the judge's name (`exact`, `rule` for the offline aid,
        the judge model otherwise; `hoprag.metrics.crag.judge_name`)."""
        from hydra.utils import get_class

        llm = self.llm_cfg.get("name") or self.llm_cfg.get("model") or get_class(self.llm_cfg["_target_"]).name
        return {"labels": "outcome", "judge": self.judge_name(), "answering_llm": llm,
                "configurations": [list(c) for c in self.configurations]}  # fmt: skip

    def judge_name(self) -> str:
        """The judge's name without building the judge (an API judge's key is needed only to judge): its class's
        `name`, or for an LLM judge the name its LLM gives it (`name_for`)."""
        if self.judge_cfg is None:
            return judge_name(None)
        from hydra.utils import get_class, instantiate

        judge_class = get_class(self.judge_cfg["_target_"])
        if hasattr(judge_class, "name_for"):
            return judge_class.name_for(instantiate(self.judge_cfg["llm"]))  # an LLM object: no weights load
        return judge_name(judge_class())

    def judge(self, items: list) -> list[str]:
        if self._judge is None:
            from hydra.utils import instantiate

            self._judge = instantiate(self.judge_cfg)
        return self._judge(items)

    def release(self) -> None:
        """Let go of the answering LLM, the method (its sources: a web embedder) and the judge, and give their GPU
        memory back (in-process vLLM engines, process-wide Hugging Face models): the model trained on the labels
        comes next, and a GPU holds one model at a time."""
        if self.llm is None and self._judge is None:
            return
        import torch

        from hoprag.llm import release_engines
        from hoprag.llm.hf_loading import clear_model_cache

        self.llm = self._partial = self._judge = None
        release_engines()
        clear_model_cache()
        gc.collect()
        torch.cuda.empty_cache()  # a no-op without CUDA

    def __call__(self, examples: Sequence[QAExample]) -> OutcomeRun:
        if self._cache is None:
            self._cache = OutcomeCache(self.cache_path)
        return label_by_outcomes(
            examples, self.configurations, self.method,
            {c: self.settings(c) for c in self.configurations}, self._cache,
            judge=self.judge if self.judge_cfg is not None else None, judge_settings=self.judge_settings(),
            batch_size=self.batch_size, alt_answers=self.alt_answers, mode=self.mode, priority=self.priority,
        )  # fmt: skip
