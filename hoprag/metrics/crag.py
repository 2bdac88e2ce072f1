"""CRAG's answer evaluation (Meta KDD Cup 2024), as PruningRAG reports it (spec/pruningrag.md §2, §8).

Each answer is one of three outcomes, decided in this order on stripped, lower-cased text:

1. **missing** when "i don't know" occurs anywhere in the prediction (a substring: "I don't know, maybe
   Paris" is missing, as in CRAG's script, P15);
2. **correct** when it equals a gold answer exactly, without asking the judge;
3. otherwise a judge decides: a reply whose lower-cased JSON has `accuracy` true (or "true") is
   **correct**; any other reply, an unparsable one included (counted as a judge parse failure), is a
   **hallucination**. Without a judge every non-match is a hallucination, counted as `unjudged`.

The golds are the question's `answer` only (the code's evaluator), or `[answer] + alt_ans` with
`alt_answers=True` (P14). Acc, Miss and Hall are the shares of the three outcomes, so Hall = 1 − Acc − Miss,
and Score = Acc − Hall. A `Judge` is any callable from (question, golds, prediction) items to raw replies;
the judges themselves (CRAG's LLM judge, the offline `NormalizedMatchJudge`) are in `hoprag.evaluation.judges`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

CORRECT, MISSING, HALLUCINATION = "correct", "missing", "hallucination"
# a question's CRAG categories, the metadata its breakdowns group by
GROUPS = ("domain", "static_or_dynamic", "question_type")
MISSING_MARK = "i don't know"
# in the replies of a rule judge (`NormalizedMatchJudge`), so a run counts them as crag/rule_judged
RULE_MARK = '"judge": "normalized_match"'

JudgeItem = tuple[str, Sequence[str], str]  # (question, golds, prediction)
# judge(items) -> one raw reply per item, in order
Judge = Callable[[list[JudgeItem]], list[str]]

_OBJECT = re.compile(r"\{.*?\}", re.DOTALL)


def crag_golds(golds: Sequence[str], alt_answers: bool = False) -> list[str]:
    """The answers a prediction is judged against: the first gold (CRAG's `answer`), or all of them."""
    return list(golds) if alt_answers else list(golds[:1])


def parse_judgement(reply: str) -> bool | None:
    """True / False from a judge reply, None when it holds no JSON object with an `accuracy` field.

    The reply is lower-cased first (so "Accuracy": "True" reads); when the whole reply is not such an
    object, each {...} in it is tried in turn (a model that wraps its object in prose or a code fence)."""
    text = reply.strip().lower()
    candidates = [text, *(m.group(0) for m in _OBJECT.finditer(text))]
    for candidate in candidates:
        try:
            parsed = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(parsed, dict) and "accuracy" in parsed:
            return parsed["accuracy"] is True or parsed["accuracy"] == "true"
    return None


def crag_outcomes(items: Sequence[JudgeItem], judge: Judge | None = None) -> list[tuple[str, str | None]]:
    """(outcome, the judge's raw reply or None when it was not asked) per item; one judge call for all the
    items that need it."""
    cleaned = [(q, [g.strip().lower() for g in golds], p.strip().lower()) for q, golds, p in items]
    outcomes: list[tuple[str, str | None]] = []
    ask: list[int] = []
    for i, (_, golds, prediction) in enumerate(cleaned):
        if MISSING_MARK in prediction:
            outcomes.append((MISSING, None))
        elif prediction in golds:
            outcomes.append((CORRECT, None))
        else:
            outcomes.append((HALLUCINATION, None))
            ask.append(i)
    if judge is None or not ask:
        return outcomes
    replies = judge([cleaned[i] for i in ask])
    if len(replies) != len(ask):
        raise RuntimeError(f"the judge gave {len(replies)} replies to {len(ask)} items")
    for i, reply in zip(ask, replies):
        outcomes[i] = (CORRECT if parse_judgement(reply) else HALLUCINATION, reply)
    return outcomes


def outcome_scores(outcome: str) -> dict[str, float]:
    """One question's share of each rate; their means over questions are Acc, Hall, Miss and Score."""
    acc, hall = float(outcome == CORRECT), float(outcome == HALLUCINATION)
    return {"crag/acc": acc, "crag/hall": hall, "crag/miss": float(outcome == MISSING), "crag/score": acc - hall}


def rates(outcomes: Sequence[str]) -> dict[str, float]:
    """Acc, Hall, Miss and Score = Acc − Hall, as fractions of the outcomes (the three outcomes cover every
    answer, so Hall = 1 − Acc − Miss)."""
    n = len(outcomes)
    acc, hall, miss = (outcomes.count(outcome) / n for outcome in (CORRECT, HALLUCINATION, MISSING))
    return {"acc": acc, "hall": hall, "miss": miss, "score": acc - hall}


def summary(entries: Sequence[Mapping[str, Any]]) -> dict[str, float | int]:
    """The judge's counts and the per-category breakdowns of judged questions, each entry being a
    question's CRAG record (its `GROUPS`, `outcome` and `judge_reply`). Rates are percentages with one
    decimal under `crag/<group>/<value>/`, with the group's question count `n`."""
    out: dict[str, float | int] = {
        "crag/unjudged": sum(e["outcome"] == HALLUCINATION and e["judge_reply"] is None for e in entries),
        "crag/judge_parse_failures": sum(
            e["judge_reply"] is not None and parse_judgement(e["judge_reply"]) is None for e in entries
        ),
        "crag/rule_judged": sum(e["judge_reply"] is not None and RULE_MARK in e["judge_reply"] for e in entries),
    }
    for group in GROUPS:
        values = sorted({str(e.get(group)) for e in entries})
        for value in values:
            outcomes = [e["outcome"] for e in entries if str(e.get(group)) == value]
            out[f"crag/{group}/{value}/n"] = len(outcomes)
            out.update({f"crag/{group}/{value}/{k}": round(100 * v, 1) for k, v in rates(outcomes).items()})
    return out


def relative_gain(before: float, after: float, lower_is_better: bool = False) -> float:
    """The relative change from `before` to `after` in percent, as the paper's gain rows (P8: recomputed,
    not copied): Acc 39.97 → 44.56 is +11.48; with `lower_is_better` (Hall, Miss) a drop is a gain."""
    change = (after - before) / before * 100
    return -change if lower_is_better else change

