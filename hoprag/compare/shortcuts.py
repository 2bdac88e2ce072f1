"""Shortcut-controlled reporting (issue 46 item 3): every metric and paired test again on the genuinely
multi-hop questions, those that the shortcut probe did not flag.

    python eval.py +method=shortcut_probe data=<dataset> llm=<the compared runs' llm>     # once per dataset x LLM
    python compare.py <runs>... --shortcuts <probe run dir>... [--out DIR]

- **Probe.** A `shortcut_probe` eval run (hoprag/methods/shortcut_probe.py) flags a question when the LLM answers
  it closed-book, or from one gold paragraph alone, by its rule (default EM = 1; metrics.json's
  `run.shortcut_rule`); each record holds the flag as its figure `method/shortcut`. The probe's run directory is
  the cache: it is computed once per dataset and LLM, and resumes and refuses mixed settings as any eval run.
- **Named, not discovered.** Only the runs `--shortcuts` names are probes (run directories, multirun folders or
  globs, one per dataset compared); a probe run among the compared runs is compared as any run (its row is its
  closed-book answer).
- **Checks.** Each probe is a finished `shortcut_probe` run. Every compared eval run is matched to the probe over
  the same data (`run_fingerprint.json`'s `data` section: the dataset's settings and its files' content hashes,
  the question limit left out), whose LLM is the run's (the fingerprint's `llm` section: model, sampling
  defaults, input budget ..., the run-control keys such as caches, devices and batch sizes left out), and every
  question the run answered is in the probe alike (same id, question text and golds). Anything else is refused,
  naming the runs and the differing settings: a flag is the probe LLM's answer on the probe's questions.
- **The subset.** Each eval run is restricted to its questions not flagged (`restricted`): its row's figures are
  the means of its records' per-question figures over them, on the metrics.json scale, as a paired test's side is
  (`significance.column_mean`: passage recall micro over its own gold count; EFR from the same figures by
  `hoprag.metrics.evidence_forgetting_rate`). On those runs the main comparison's own code builds the table's
  columns and the paired tests against the same baseline (`comparison.tested`), and `render` and `page` show them
  with the main table's code, as a second table, "multi-hop only", with the counts of shortcut and multi-hop
  questions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hoprag.compare.columns import Column, table_columns
from hoprag.compare.comparison import Comparison, tested
from hoprag.compare.discovery import find_runs, is_train_run
from hoprag.compare.groups import Group
from hoprag.compare.runs import CompareError, Question, Run
from hoprag.compare.significance import column_mean
from hoprag.evaluation import fingerprint as fp
from hoprag.metrics import evidence_forgetting_rate

PROBE = "shortcut_probe"  # the probe method's registered name (metrics.json `run.method`)
FLAG, CLOSED_BOOK, SINGLE = "method/shortcut", "method/closed_book_correct", "method/single_paragraph_correct"
GOLD = "method/gold_paragraphs"  # how many gold paragraphs the probe asked about alone (0: closed-book only)
PROBE_COMMAND = "python eval.py +method=shortcut_probe data=<the runs' data> llm=<the runs' llm>"


@dataclass
class ShortcutSplit:
    """The compared questions split by the probes' flags: how many are shortcut questions (and of them, how many
    the closed-book and the single-paragraph probe answered), how many multi-hop, how many had no gold paragraph
    (flagged by the closed-book answer alone), and the comparison on the multi-hop ones (None when every question
    is a shortcut)."""

    probes: list[Run]
    rules: list[str]
    n_shortcut: int
    n_multihop: int
    closed_book: int
    single_paragraph: int
    multihop: Comparison | None
    without_gold: int = 0
    flagged: dict[str, bool] = field(default_factory=dict)  # each compared question: a shortcut question or not

    def summary(self) -> str:
        """The counts, the rule and the probes, in a sentence or two."""
        n = self.n_shortcut + self.n_multihop
        probes = ", ".join(str(p.path) for p in self.probes)
        are = "is a shortcut question" if self.n_shortcut == 1 else "are shortcut questions"
        return (f"Of the {n} compared questions, {self.n_shortcut} {are} ({self.closed_book} "
                f"answered closed-book, {self.single_paragraph} from a single gold paragraph) and {self.n_multihop} "
                f"multi-hop. Shortcut rule: {'; '.join(self.rules)}, by the runs' own LLM (probe: {probes})."
                + self._alone())  # fmt: skip

    def _alone(self) -> str:
        if not self.without_gold:
            return ""
        return (f" {self.without_gold} questions had no gold paragraph in their context: they are flagged by their "
                "closed-book answer alone.")  # fmt: skip

    def table_note(self) -> str:
        return (f"Each row: its runs' per-question figures averaged over the {self.n_multihop} multi-hop questions "
                "(those the probe did not flag), on the metrics.json scale.")  # fmt: skip


def load_probes(args: Iterable[str]) -> list[Run]:
    """The probe runs that `--shortcuts` names, each a finished `shortcut_probe` eval run."""
    paths = find_runs(args)
    probes = []
    for path in paths:
        run = None if is_train_run(path) else Run.load(path)
        if run is None or run.info.get("method") != PROBE:
            what = "a train run" if run is None else f"a {run.info.get('method', '?')} run"
            raise CompareError(f"--shortcuts {path} is {what}, not a {PROBE} run: make one with {PROBE_COMMAND}")
        probes.append(run)
    return probes


def _settings(run: Run) -> dict[str, Any]:
    """The run's `llm` and `data` settings as its fingerprint records them (run-control keys left out)."""
    saved = fp.load(run.path)
    if saved is None or "llm" not in saved or "data" not in saved:
        raise CompareError(
            f"{run.path} has no {fp.FINGERPRINT} with its llm and data settings (eval.py writes one when a run "
            "starts), so whether a shortcut probe used its LLM and questions cannot be checked: rerun it with eval.py"
        )
    return {"llm": saved["llm"], "data": saved["data"]}


def _value(tree: Mapping[str, Any], dotted: str, width: int = 40) -> str:
    node: Any = tree
    for part in dotted.split("."):
        node = node.get(part, fp.ABSENT) if isinstance(node, Mapping) else fp.ABSENT
    text = node if node == fp.ABSENT else json.dumps(node, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def _differences(probe: Mapping[str, Any], run: Mapping[str, Any], section: str, limit: int = 4) -> str:
    """The keys of `section` in which the probe's settings differ from the run's: `key: probe's vs run's`."""
    keys = fp.diff(probe[section], run[section], f"{section}.")
    shown = "; ".join(f"{k}: probe {_value(probe, k)} vs run {_value(run, k)}" for k in keys[:limit])
    return shown + (f"; and {len(keys) - limit} more" if len(keys) > limit else "")


def _probe_for(run: Run, probes: Sequence[Run], settings: Mapping[Path, dict[str, Any]]) -> Run:
    """The probe over the run's data with the run's LLM, else a refusal naming what differs."""
    own = settings[run.path]
    same_data = [p for p in probes if settings[p.path]["data"] == own["data"]]
    if not same_data:
        datasets = ", ".join(f"{p.path} ({p.info.get('dataset', '?')})" for p in probes)
        closest = _differences(settings[probes[0].path], own, "data")
        raise CompareError(
            f"no shortcut probe over the data of {run.path} ({run.info.get('dataset', '?')}); the probes: {datasets} "
            f"(e.g. {closest}): make one with {PROBE_COMMAND}"
        )
    same_llm = [p for p in same_data if settings[p.path]["llm"] == own["llm"]]
    if not same_llm:
        raise CompareError(
            f"the shortcut probe {same_data[0].path} was run with another LLM than {run.path} "
            f"({_differences(settings[same_data[0].path], own, 'llm')}): a flag says what one LLM answers without "
            f"multi-hop reasoning, so run the probe with the runs' llm= ({PROBE_COMMAND})"
        )
    if len(same_llm) > 1:
        raise CompareError(f"{same_llm[0].path} and {same_llm[1].path} both probe the data and LLM of {run.path}: "
                           "name one of them")  # fmt: skip
    return same_llm[0]


def _flags(run: Run, probe: Run) -> dict[str, bool]:
    """Per question of the run, the probe's flag; a question the probe does not hold alike is refused."""
    held: Mapping[str, Question] = probe.questions()
    flags = {}
    for qid, question in run.questions().items():
        if qid not in held:
            missing, n = len(run.questions().keys() - held.keys()), len(run.questions())
            raise CompareError(
                f"the shortcut probe {probe.path} holds {len(held)} questions, and {missing} of the {n} that "
                f"{run.path} answered are not among them (e.g. {qid!r}): rerun the probe in its directory with the "
                "runs' data.limit (it resumes)"
            )
        if held[qid] != question:
            raise CompareError(f"{probe.path} and {run.path} hold other questions under id {qid!r}: "
                               f"{held[qid].difference(question)}: rerun the probe on the runs' data")  # fmt: skip
        flags[qid] = probe.per_question()[qid][FLAG] > 0
    return flags


def subset_metrics(run: Run, ids: Sequence[str], columns: Sequence[Column] | None = None) -> dict[str, float]:
    """The run's figures over `ids` on the metrics.json scale: `n`, then each of `columns` (default: those the run
    alone shows) that its records pair, and EFR and the forget rate when it reports them."""
    group = Group(run.label, [run])
    metrics: dict[str, float] = {"n": len(ids)}
    for column in table_columns([group]) if columns is None else columns:
        value = column_mean(column, group, ids) if ids else None
        if value is not None:
            metrics[column.key] = value
    figures = [run.per_question()[i] for i in ids]
    if "efr" in run.metrics and all({"em", "passage_hits", "passage_gold"} <= f.keys() for f in figures):
        with_gold = [f for f in figures if f["passage_gold"] > 0]
        forgetting = evidence_forgetting_rate([f["passage_hits"] == f["passage_gold"] for f in with_gold],
                                              [f["em"] == 1.0 for f in with_gold])  # fmt: skip
        for key in ("efr", "forget_rate"):
            if forgetting[key] is not None:
                metrics[key] = 100 * forgetting[key]
    return metrics


def restricted(run: Run, ids: Sequence[str], columns: Sequence[Column] | None = None) -> Run:
    """The run as if it had answered only `ids` (in its own order): its figures (`subset_metrics`), questions and
    records."""
    keep = [i for i in run.questions() if i in set(ids)]
    per_question, questions = run.per_question(), run.questions()
    return replace(run, metrics=subset_metrics(run, keep, columns), info={**run.info, "n": len(keep)},
                   _per_question={i: per_question[i] for i in keep},
                   _questions={i: questions[i] for i in keep})  # fmt: skip


def split(comparison: Comparison, probe_args: Iterable[str], intersect: bool = False, seed: int = 0) -> ShortcutSplit:
    """The comparison's eval runs split by the probes' flags, and the comparison over the multi-hop rest (its
    baseline the main one's), tested as the main one is (`intersect`, `seed`: as `comparison.build`'s)."""
    if not comparison.groups or comparison.baseline is None:
        raise CompareError("--shortcuts splits eval runs' questions, and no eval run is compared")
    probes = load_probes(probe_args)
    runs = [r for g in comparison.groups for r in g.runs]
    settings = {r.path: _settings(r) for r in [*probes, *runs]}
    probe_of = {r.path: _probe_for(r, probes, settings) for r in runs}
    flags = {r.path: _flags(r, probe_of[r.path]) for r in runs}
    every: dict[str, bool] = {}
    for run in runs:
        every.update(flags[run.path])
    probes = [p for p in probes if any(p is used for used in probe_of.values())]
    shortcut = [q for q, flagged in every.items() if flagged]
    answered = {q: f for p in probes for q, f in p.per_question().items() if q in every}
    counts = dict(closed_book=sum(answered[q].get(CLOSED_BOOK, 0) > 0 for q in shortcut),
                  single_paragraph=sum(answered[q].get(SINGLE, 0) > 0 for q in shortcut),
                  without_gold=sum(answered[q].get(GOLD, 1) == 0 for q in every))  # fmt: skip
    rules = list(dict.fromkeys(str(p.info.get("shortcut_rule", "?")) for p in probes))
    multihop = None
    if len(shortcut) < len(every):
        kept = {r.path: [q for q, flagged in flags[r.path].items() if not flagged] for r in runs}
        groups = [Group(g.name, [restricted(r, kept[r.path], comparison.columns) for r in g.runs])
                  for g in comparison.groups]  # fmt: skip
        base = next(sub for sub, g in zip(groups, comparison.groups) if g is comparison.baseline)
        multihop = tested(groups, base, intersect, comparison.resamples, seed)
    return ShortcutSplit(probes, rules, len(shortcut), len(every) - len(shortcut), multihop=multihop, flagged=every,
                         **counts)  # fmt: skip
