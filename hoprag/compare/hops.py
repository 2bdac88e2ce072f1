"""Hop-level attribution of eval runs over questions with a gold chain: per hop, whether (and at which step) a run
read the hop's gold passage, its intermediate answers against the gold sub-answers, and one failure label per
question, counted per run.

Gold chains come from the dataset: a question's decomposition (MuSiQue's `question_decomposition`, 2Wiki's
evidences; `QAExample.decomposition`), which eval.py writes into each record as `gold_hops` (question, answer and
the title of the hop's supporting passage). A run written before records carried it is read through its composed
config instead (`.hydra/config.yaml`'s `data`: the questions file, by id, through the project's loaders; a
question whose text differs there is left without a chain). A hop's gold passage is the passage with its title;
a hop whose title the dataset does not give is unknown, never guessed.

Per hop k: **read** when a passage with hop k's title is among the passages the run read (`retrieved`), **step**
the 1-based position of the first such passage in its reading order (distinct passages, as the recall metrics
count them: rank order for one search, retrieval order across hops and nodes). **Sub-answers**: the intermediate
answers a method's trace records (`SUB_ANSWERS`: Self-Ask's intermediate answers, PruneRAG's and ProbTree's
answers of their non-root nodes, TreeRare's SAG paragraphs of its nodes); they are not aligned to the gold hops by
position (methods decompose differently), so hop k scores the best of them against its gold sub-answer:
`contains` (the project's answer normalisation, gold contained), EM and F1 (`hoprag.metrics.answer`). Any other
method's run says "not produced".

The failure label, the first rule that holds, in this order (`label`):

1. `correct`: the record's EM is 1 (`CORRECT_BY`, the main answer metric).
2. `answer-format`: a gold answer is contained (normalised, `answer_contains`) in the prediction or in the final
   output the trace records (`trace.output`; Self-Ask's last turn): the answer was there, the extracted answer
   is wrong (its extraction or format lost it; a parse fallback, `parse_failed`, included).
3. `no-chain`: the question has no gold chain with a known passage (HotpotQA; a record without `gold_hops`).
4. `first-missed-hop-k`: hop k's gold passage was never read, k the first such hop (unknown hops skipped).
5. `bridge-wrong`: every known gold passage read; the trace records intermediate answers for the question, and
   for some hop before the last none of them contains that hop's gold sub-answer.
6. `reasoning`: every known gold passage read, and the answer is still wrong.

A record with no generated answer (retrieval only) gets no label; its reading still counts per hop. Seeds of one
setting (a group) are pooled: their questions counted once per run.
"""

from __future__ import annotations

import csv
import statistics
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from hoprag.compare.groups import Group
from hoprag.compare.runs import CONFIG, CompareError
from hoprag.data.loading import load_questions
from hoprag.data.records import DataFormatError
from hoprag.evaluation.predictions import finished_records
from hoprag.metrics.answer import answer_contains, exact_match, f1_score
from hoprag.paths import data_root

CORRECT_BY = "em"
CHAIN_FORMATS = (None, "musique", "2wikimultihopqa", "flashrag")  # data formats whose questions may carry a chain
FIXED = ("correct", "answer-format", "no-chain")
LATE = ("bridge-wrong", "reasoning")
NOT_PRODUCED = "not produced"


@dataclass(frozen=True)
class GoldHop:
    question: str
    answer: str
    title: str | None


# -- the intermediate answers each method's trace records --------------------------------------------------------


def _tree(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for child in node.get("children", []):
        yield from _tree(child)


def _self_ask(trace: Mapping[str, Any]) -> list[str]:
    return [t["intermediate_answer"] for t in trace.get("turns", []) if t.get("intermediate_answer")]


def _prunerag(trace: Mapping[str, Any]) -> list[str]:
    nodes = list(_tree(trace["tree"]))[1:] if "tree" in trace else []
    return [n["answer"] for n in nodes if n.get("answer")]


def _probtree(trace: Mapping[str, Any]) -> list[str]:
    nodes = list(_tree(trace["tree"]))[1:] if "tree" in trace else []
    chosen = (next((c for c in n.get("candidates", []) if c["kind"] == n.get("chosen")), None) for n in nodes)
    return [c["answer"] for c in chosen if c and c.get("answer")]


def _treerare(trace: Mapping[str, Any]) -> list[str]:
    return [n["sag_output"] for n in trace.get("tree", {}).get("nodes", []) if n.get("sag_output")]


SUB_ANSWERS: dict[str, Callable[[Mapping[str, Any]], list[str]]] = {
    "self_ask": _self_ask, "prunerag": _prunerag, "probtree": _probtree, "treerare": _treerare,
}  # fmt: skip


def sub_answers(record: Mapping[str, Any]) -> list[str] | None:
    """The intermediate answers the record's trace holds, None when its method records none ("not produced")."""
    read = SUB_ANSWERS.get(str(record.get("method", "")))
    return None if read is None else read(record.get("trace") or {})


def final_outputs(record: Mapping[str, Any]) -> list[str]:
    """The prediction and the final raw output the trace records (answer-format looks for a gold answer in them)."""
    trace = record.get("trace") or {}
    texts = [record.get("prediction") or "", trace.get("output") if isinstance(trace.get("output"), str) else ""]
    turns = trace.get("turns")
    if isinstance(turns, list) and turns and isinstance(turns[-1], Mapping):
        texts += [str(turns[-1].get("forced_final") or turns[-1].get("output") or "")]
    return [t for t in texts if t]


# -- one question -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HopResult:
    """Hop `hop` (1-based) of one question: whether its gold passage is known and at which step it was first read
    (None: never), and its sub-answer's best scores (None when the method produces none)."""

    hop: int
    known: bool
    step: int | None
    contains: float | None = None
    em: float | None = None
    f1: float | None = None


@dataclass(frozen=True)
class Attribution:
    id: str
    label: str | None
    hops: tuple[HopResult, ...]
    produced: bool  # the method records intermediate answers


def chain_of(record: Mapping[str, Any]) -> list[GoldHop]:
    return [GoldHop(h["question"], str(h["answer"]), h.get("title")) for h in record.get("gold_hops") or []]


def reading_steps(record: Mapping[str, Any]) -> dict[str, int]:
    """Title -> the 1-based position of its first passage in the record's reading order (distinct passage ids)."""
    steps: dict[str, int] = {}
    seen: set[str] = set()
    for p in record["retrieved"]:
        if p["id"] not in seen:
            seen.add(p["id"])
            steps.setdefault(p["title"], len(seen))
    return steps


def attribute(record: Mapping[str, Any], chain: Sequence[GoldHop] | None = None) -> Attribution:
    """One record's hops and failure label (module docstring); `chain` defaults to the record's `gold_hops`."""
    chain = chain_of(record) if chain is None else list(chain)
    steps, answers = reading_steps(record), sub_answers(record)
    hops = []
    for k, hop in enumerate(chain, start=1):
        scores: dict[str, float | None] = {}
        if answers is not None:
            scores = {
                "contains": max((answer_contains(a, hop.answer) for a in answers), default=0.0),
                "em": max((exact_match(a, hop.answer) for a in answers), default=0.0),
                "f1": max((f1_score(a, hop.answer) for a in answers), default=0.0),
            }
        hops.append(HopResult(k, bool(hop.title), steps.get(hop.title) if hop.title else None, **scores))
    return Attribution(str(record["id"]), label(record, hops, answers), tuple(hops), answers is not None)


def label(record: Mapping[str, Any], hops: Sequence[HopResult], answers: Sequence[str] | None) -> str | None:
    """The failure label, the module docstring's rule exactly, in its order."""
    if record.get("generated", True) is False:
        return None
    if float(record["scores"].get(CORRECT_BY, 0.0)) == 1.0:
        return "correct"
    if any(answer_contains(text, record["golds"]) for text in final_outputs(record)):
        return "answer-format"
    known = [h for h in hops if h.known]
    if not known:
        return "no-chain"
    missed = next((h for h in known if h.step is None), None)
    if missed is not None:
        return f"first-missed-hop-{missed.hop}"
    if answers and any(h.contains == 0.0 for h in hops[:-1]):
        return "bridge-wrong"
    return "reasoning"


# -- gold chains of runs written before records carried them ------------------------------------------------------


def config_chains(run_dir: Path) -> tuple[dict[str, tuple[str, list[GoldHop]]] | None, str]:
    """Question id -> (question text, chain) from the questions file the run's composed config names, and a note
    on where they came from or why not ("" when the config names no dataset with chains: nothing to say)."""
    if not (run_dir / CONFIG).is_file():
        return None, ""
    try:
        config = OmegaConf.load(run_dir / CONFIG)

        def setting(key: str) -> Any:
            return OmegaConf.select(config, f"data.{key}", default=None)

        questions, fmt = setting("questions"), setting("format")
        if not isinstance(questions, str) or not questions or fmt not in CHAIN_FORMATS:
            return None, ""
        root = data_root(setting("root"))
        path = Path(questions) if Path(questions).is_absolute() else root / questions
        if not path.is_file():
            return None, f"{run_dir.name}: its records carry no gold chains and its questions file {path} is not here"
        examples = load_questions(path, format=fmt, split=setting("split"))
    except (DataFormatError, OmegaConfBaseException, OSError, ValueError, KeyError) as e:  # the note says why
        return None, f"{run_dir.name}: its records carry no gold chains, and its config's data could not be read ({e})"
    chains = {ex.id: (ex.question, [GoldHop(h.question, h.answer, h.support_title) for h in ex.decomposition])
              for ex in examples}  # fmt: skip
    return chains, f"{run_dir.name}: gold chains read from {path} (its records predate `gold_hops`)"


def run_attributions(run_dir: Path) -> tuple[list[Attribution], list[str]]:
    """Every record's attribution, and notes (chains read from the config, questions whose text differs there)."""
    try:
        records = [r for _, r in finished_records(run_dir)]
    except (FileNotFoundError, DataFormatError) as e:  # hop_report notes it and goes on without the run
        raise CompareError(str(e)) from e
    notes: list[str] = []
    chains = None
    if not any("gold_hops" in r for r in records):
        chains, note = config_chains(run_dir)
        notes += [note] if note else []
    found, differ = [], 0
    for r in records:
        chain = None
        if chains is not None:
            text, chain = chains.get(r["id"], (r["question"], []))
            if text != r["question"]:
                differ, chain = differ + 1, []
        found.append(attribute(r, chain))
    if differ:
        notes.append(f"{run_dir.name}: {differ} questions differ from its questions file's text: left without a chain")
    return found, notes


# -- per group -----------------------------------------------------------------------------------------------------


@dataclass
class HopRow:
    """One group's figures: label counts, and per hop the questions with a known gold passage, those read, their
    steps, and (when produced) the sub-answer scores of every question with that hop."""

    name: str
    labelled: int = 0
    labels: Counter = field(default_factory=Counter)
    known: Counter = field(default_factory=Counter)
    read: Counter = field(default_factory=Counter)
    steps: dict[int, list[int]] = field(default_factory=dict)
    produced: bool = False
    sub: dict[int, list[tuple[float, float, float]]] = field(default_factory=dict)

    def add(self, a: Attribution) -> None:
        if a.label is not None:
            self.labelled += 1
            self.labels[a.label] += 1
        self.produced = self.produced or a.produced
        for h in a.hops:
            if h.known:
                self.known[h.hop] += 1
                if h.step is not None:
                    self.read[h.hop] += 1
                    self.steps.setdefault(h.hop, []).append(h.step)
            if h.contains is not None:
                self.sub.setdefault(h.hop, []).append((h.contains, h.em or 0.0, h.f1 or 0.0))


@dataclass
class HopReport:
    rows: list[HopRow]
    hops: int  # the longest chain's hops
    notes: list[str] = field(default_factory=list)
    per_question: list[tuple[str, Attribution]] = field(default_factory=list)  # (group name, attribution)


def hop_report(groups: Sequence[Group]) -> HopReport | None:
    """The attribution of every eval group's questions; None when no run has a question with a gold chain."""
    rows, notes, per_question = [], [], []
    for g in groups:
        row = HopRow(g.name)
        for run in g.runs:
            try:
                found, said = run_attributions(run.path)
            except (CompareError, KeyError, TypeError, AttributeError) as e:  # the section is optional: say why
                notes.append(f"{run.path.name}: left out of the hop attribution, its records could not be read ({e})")
                continue
            notes += said
            for a in found:
                row.add(a)
                per_question.append((g.name, a))
        rows.append(row)
    hops = max((h for r in rows for h in r.known), default=0)
    return HopReport(rows, hops, list(dict.fromkeys(notes)), per_question) if hops else None


def labels_header(report: HopReport) -> list[str]:
    present = {k for r in report.rows for k in r.labels}
    missed = [f"first-missed-hop-{k}" for k in range(1, report.hops + 1)]
    return ["run", "n", *(k for k in (*FIXED[:2], *missed, *LATE, FIXED[2]) if k in present)]


def labels_cells(report: HopReport) -> list[list[str]]:
    header = labels_header(report)[2:]
    return [[r.name, str(r.labelled), *(_share(r.labels[k], r.labelled) for k in header)] for r in report.rows]


def recall_header(report: HopReport) -> list[str]:
    return ["run", *(f"hop {k}" for k in range(1, report.hops + 1))]


def recall_cells(report: HopReport) -> list[list[str]]:
    def cell(r: HopRow, k: int) -> str:
        if not r.known[k]:
            return "–"
        step = f", step {statistics.median(r.steps[k]):g}" if r.steps.get(k) else ""
        return f"{100 * r.read[k] / r.known[k]:.1f} ({r.read[k]}/{r.known[k]}{step})"

    return [[r.name, *(cell(r, k) for k in range(1, report.hops + 1))] for r in report.rows]


def sub_cells(report: HopReport) -> list[list[str]]:
    def cell(r: HopRow, k: int) -> str:
        if not r.produced:
            return NOT_PRODUCED
        scores = r.sub.get(k)
        if not scores:
            return "–"
        means = [100 * statistics.fmean(s[i] for s in scores) for i in range(3)]
        return " / ".join(f"{m:.1f}" for m in means) + f" ({len(scores)})"

    return [[r.name, *(cell(r, k) for k in range(1, report.hops + 1))] for r in report.rows]


def _share(count: int, n: int) -> str:
    return f"{count} ({100 * count / n:.1f}%)" if n else str(count)


LABELS_INTRO = (
    "Failure labels per run (questions with a generated answer; the first rule that holds, in this order: correct "
    "(EM 1), answer-format (a gold answer in the output, the extracted answer wrong), no-chain (no gold chain with a "
    "known passage), first-missed-hop-k "
    "(hop k's gold passage never read), bridge-wrong (every gold read, an intermediate answer wrong for a hop before "
    "the last), reasoning (every gold read, the answer wrong); hoprag/compare/hops.py states the rule):"
)
RECALL_INTRO = (
    "Per-hop gold-passage recall: % of the questions with a known hop-k gold passage whose passage the run read "
    "(read/questions, median step: the 1-based position of its first reading in the run's reading order):"
)
SUB_INTRO = (
    "Intermediate answers against the gold sub-answers, the best of each question's recorded intermediate answers "
    "(not aligned by position): contains / EM / F1 % (questions); not produced: the method's trace records none:"
)


def write_csv(report: HopReport | None, out: Path) -> None:
    """`hops.csv`: one row per run and question: its label and per hop the step its gold passage was first read at
    ("" never, "?" unknown); removed when there is no report, so a stale one never survives in `out`."""
    path = out / "hops.csv"
    if report is None:
        path.unlink(missing_ok=True)
        return
    hops = [f"hop{k}_step" for k in range(1, report.hops + 1)]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["run", "id", "label", *hops])
        for name, a in report.per_question:
            steps = {h.hop: ("" if h.step is None else str(h.step)) if h.known else "?" for h in a.hops}
            writer.writerow([name, a.id, a.label or "", *(steps.get(k, "") for k in range(1, report.hops + 1))])
