"""The column catalogue: which metrics.json figures a table shows, in which order and scale, and which
per-question figure pairs each for the significance tests. CRAG's rates show with their judge in the header
(`CRAG acc@gpt-3.5-turbo`), one column per judge: runs judged apart never share a column, nor a test."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hoprag.compare.groups import Group
from hoprag.compare.runs import RECALL

SECONDS = "cost/mean/seconds/total"
# CRAG's headline rates, each named after its judge (hoprag.metrics.crag): Acc, Hall and Score as the paper
# tabulates them
CRAG_RATE = re.compile(r"^crag/(acc|hall|score)@(.+)$")
CRAG_ORDER = ("acc", "hall", "score")


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

LATE_QUALITY = (Column("efr", None, "EFR", 1),)

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


def table_columns(groups: Sequence[Group]) -> list[Column]:
    """The quality columns that at least one run reports (an F1 of 0 is a result; a run that generated no
    answer reports none), recall metrics in the order runs list them, CRAG's judged rates that any run reports,
    and the cost columns that at least one run reports nonzero (time always): `left_out` says what is not shown."""
    present = dict.fromkeys(k for g in groups for r in g.runs for k in r.metrics)
    spent = {k for g in groups for r in g.runs for k, v in r.metrics.items() if v or k == SECONDS}
    recall = [_recall_column(k) for k in present if RECALL.match(k)]
    shown = [c for c in (*QUALITY, *recall, *LATE_QUALITY) if c.key in present]
    return [*shown, *_crag_columns(groups), *(c for c in COST if c.key in spent)]


def left_out(groups: Sequence[Group], columns: Sequence[Column]) -> list[str]:
    """The standard columns the table leaves out, and why: answer metrics no run reports (no run generated
    answers), costs that are 0 in every run."""
    keys = {c.key for c in columns}
    present = {k for g in groups for r in g.runs for k in r.metrics}
    absent = [c.header for c in QUALITY if c.key not in present]
    zero = [c.header for c in COST if c.key not in keys]
    return [f"{', '.join(names)}: {why}" for names, why in ((absent, "reported by no run (no answers generated)"),
                                                             (zero, "0 in every run")) if names]  # fmt: skip


def _crag_columns(groups: Sequence[Group]) -> list[Column]:
    """Acc, Hall and Score of every judge some run reports (a rate of 0 included: a judge's Hall of 0 says
    something), by judge in the order runs list them; each pairs with the records' figure of that judge."""
    keys = [k for g in groups for r in g.runs for k in r.metrics if CRAG_RATE.match(k)]
    judges = dict.fromkeys(CRAG_RATE.match(k).group(2) for k in keys)  # type: ignore[union-attr]
    return [_crag_column(rate, judge) for judge in judges for rate in CRAG_ORDER if f"crag/{rate}@{judge}" in keys]


def _crag_column(rate: str, judge: str) -> Column:
    key = f"crag/{rate}@{judge}"
    return Column(key, key, f"CRAG {rate}@{judge}", 1, 100.0)


def _recall_column(key: str) -> Column:
    """Answer recall is a mean over questions; passage recall is micro: Σ hits / Σ gold (see `Column`)."""
    kind, at = RECALL.match(key).groups()  # type: ignore[union-attr]
    at = at or ""
    header = key.removeprefix("retrieval/")
    if kind == "answer":
        return Column(key, f"answer_recall{at}", header, 1, 100.0)
    return Column(key, f"passage_hits{at}", header, 1, 100.0, denominator="passage_gold")
