"""CRAG's answer evaluation (Meta KDD Cup 2024), by PruningRAG's rules (spec/pruningrag.md §2, §8) or CRAG's
official ones.

With PruningRAG's rules (`PRUNINGRAG`, the default: its evaluator, which its tables report) each answer is
one of three outcomes, decided in this order on stripped, lower-cased text:

1. **missing** when "i don't know" occurs anywhere in the prediction (a substring: "I don't know, maybe
   Paris" is missing, as in CRAG's script, P15);
2. **correct** when it equals a gold answer exactly, without asking the judge;
3. otherwise a judge decides, shown the stripped question, golds and prediction in their own case (as
   PruningRAG's evaluation sends them): a reply that is, lower-cased, one JSON object whose `accuracy` is
   true (or "true") is **correct**; any other reply, an unparsable one included (counted as a judge parse
   failure), is a **hallucination**. Without a judge every non-match is a hallucination, counted as
   `unjudged`.

CRAG's official scorer (`OFFICIAL`, facebookresearch/CRAG `local_evaluation.py`) differs in two ways. It
first trims the prediction to its first 75 tokens of the Llama 2 tokenizer (`hf-internal-testing/llama-tokenizer`,
the copy in CRAG's `tokenizer/`; the BOS token dropped, the rest decoded), so an "I don't know" after them is
no longer missing, and the judge sees the trimmed text. And after the exact match it reads "invalid": a
prediction and gold that both contain "invalid" are **correct**, and one that contains it without the other is
a **hallucination**, both without asking the judge (its prompt asks for an exact "invalid question" instead).
With several golds a prediction is correct when any gold makes it so, as the script loops over them; the
judge is asked once, about the golds that neither rule decided. Those "invalid" hallucinations count as
`unjudged`, as no judge saw them. The script as published does not run (it reads the lower-cased prediction
before setting it, and strips the gold list as one string); these are the rules it evidently means. Its
judge prompt (a 0/1 `score` with an explanation) is not offered: both rules use the judge above, on CRAG's
KDD Cup prompt. Every judged record carries its `rules`, and metrics.json's `run.crag_rules` names those that
scored a run (`rules_info`).

The golds are the question's `answer` only (the code's evaluator), or `[answer] + alt_ans` with
`alt_answers=True` (P14). Acc, Miss and Hall are the shares of the three outcomes, so Hall = 1 − Acc − Miss,
and Score = Acc − Hall.

Every rate names what decided it: `crag/acc@<judge>`, `crag/hall@<judge>`, `crag/miss@<judge>`,
`crag/score@<judge>`, and per category `crag/<group>/<value>/<rate>@<judge>` beside the category's count
`crag/<group>/<value>/n`; a plain `crag/acc` is never reported. `<judge>` is `exact` without a judge (every
non-match a hallucination), else the judge's `name`: `rule` for the offline `NormalizedMatchJudge`, the
model for an LLM judge (`gpt-3.5-turbo`, the paper's), `local-<model>` for one that runs here
(`hoprag.evaluation.judges`). Miss does not depend on the judge, but carries its name too, so that a run's
four rates are one family and read together. A `Judge` is any callable from (question, golds, prediction)
items to raw replies; the metric suite takes only one with a `name` (`judge_name`), which the judged records
keep, so a summary names its rates after the records, never after whatever suite reads them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

CORRECT, MISSING, HALLUCINATION = "correct", "missing", "hallucination"
# a question's CRAG categories, the metadata its breakdowns group by
GROUPS = ("domain", "static_or_dynamic", "question_type")
MISSING_MARK = "i don't know"
INVALID_MARK = "invalid"  # the official rules' false-premise check, a substring on both sides
# the rules that decide an outcome before (or instead of) the judge
PRUNINGRAG, OFFICIAL = "pruningrag", "official"
RULES = (PRUNINGRAG, OFFICIAL)
OFFICIAL_TOKENIZER = "hf-internal-testing/llama-tokenizer"
OFFICIAL_MAX_TOKENS = 75
# in the replies of a rule judge (`NormalizedMatchJudge`), so a run counts them as crag/rule_judged
RULE_MARK = '"judge": "normalized_match"'
# the judge name of a run without a judge: only "i don't know" and exact matches decide
EXACT = "exact"
# a judge name: lower-case, no "/" (the key's stages), no "@" (the key's judge) and no spaces
JUDGE_NAME = re.compile(r"[a-z0-9][a-z0-9._+-]*")

JudgeItem = tuple[str, Sequence[str], str]  # (question, golds, prediction)
# judge(items) -> one raw reply per item, in order
Judge = Callable[[list[JudgeItem]], list[str]]


def judge_name(judge: Judge | None) -> str:
    """What CRAG's rates are named after (`crag/acc@<name>`): `EXACT` without a judge, else the judge's own
    `name`. A judge without one is refused: a rate must say what decided it (give a plain function a `name`
    attribute, e.g. `judge.name = "my-rule"`)."""
    if judge is None:
        return EXACT
    name = getattr(judge, "name", None)
    if not isinstance(name, str):
        raise TypeError(
            f"the CRAG judge {judge!r} has no `name`: CRAG metrics carry their judge's name (crag/acc@<name>), so "
            "give it one (a `name` attribute), or use hoprag.evaluation.judges.LLMJudge / NormalizedMatchJudge"
        )
    if not JUDGE_NAME.fullmatch(name) or name == EXACT:
        raise ValueError(
            f"the CRAG judge's name {name!r} must be lower-case letters, digits and . _ + - (no / or @), and not "
            f"{EXACT!r}, the name of judging without a judge"
        )
    return name


def judged_key(rate: str, judge: str, group: str | None = None, value: Any = None) -> str:
    """`crag/<rate>@<judge>`, or `crag/<group>/<value>/<rate>@<judge>` for a category's rate."""
    return f"crag/{rate}@{judge}" if group is None else f"crag/{group}/{value}/{rate}@{judge}"


def crag_golds(golds: Sequence[str], alt_answers: bool = False) -> list[str]:
    """The answers a prediction is judged against: the first gold (CRAG's `answer`), or all of them."""
    return list(golds) if alt_answers else list(golds[:1])


def parse_judgement(reply: str) -> bool | None:
    """True / False from a judge reply, None when it is not one JSON object with an `accuracy` field.

    Read as CRAG's and PruningRAG's evaluation code reads it: the whole reply, lower-cased (so "Accuracy":
    "True" reads), parsed as JSON. An object wrapped in prose or a code fence is not read (None, a counted
    parse failure, which their code counts as a wrong answer too)."""
    try:
        parsed = json.loads(reply.lower())
    except json.JSONDecodeError:
        return None
    if isinstance(parsed, dict) and "accuracy" in parsed:
        return parsed["accuracy"] is True or parsed["accuracy"] == "true"
    return None


class Tokenizer(Protocol):
    """What the official trim needs of a Hugging Face tokenizer."""

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: list[int]) -> str: ...


def trim_prediction(prediction: str, tokenizer: Tokenizer, max_tokens: int = OFFICIAL_MAX_TOKENS) -> str:
    """The official scorer's `trim_predictions_to_max_token_length`: the first `max_tokens` tokens after the
    first (the BOS the Llama tokenizer adds), decoded."""
    return tokenizer.decode(tokenizer.encode(prediction)[1 : max_tokens + 1])


def check_rules(rules: str) -> None:
    if rules not in RULES:
        raise ValueError(f"CRAG's rules must be one of {RULES}, got {rules!r}")


def rule_outcome(prediction: str, golds: Sequence[str], rules: str = PRUNINGRAG) -> tuple[str, list[str] | None]:
    """(outcome, None) when `rules` decide a stripped prediction alone, else (HALLUCINATION, the golds to ask
    the judge about): "i don't know" → missing, an exact match → correct, then the official "invalid" rule."""
    prediction = prediction.lower()
    if MISSING_MARK in prediction:
        return MISSING, None
    lowered = [g.lower() for g in golds]
    if prediction in lowered:
        return CORRECT, None
    if rules == PRUNINGRAG:
        return HALLUCINATION, list(golds)
    if INVALID_MARK in prediction:  # correct with an "invalid" gold, else a hallucination of its own
        return (CORRECT if any(INVALID_MARK in g for g in lowered) else HALLUCINATION), None
    ask = [g for g, low in zip(golds, lowered) if INVALID_MARK not in low]
    return HALLUCINATION, ask or None


def crag_outcomes(
    items: Sequence[JudgeItem],
    judge: Judge | None = None,
    rules: str = PRUNINGRAG,
    tokenizer: Tokenizer | None = None,
) -> list[tuple[str, str | None]]:
    """(outcome, the judge's raw reply or None when it was not asked) per item; one judge call for all the
    items that need it, each sent stripped but in its own case (official rules: trimmed by `tokenizer` first)."""
    check_rules(rules)
    if rules == OFFICIAL:
        if tokenizer is None:
            raise ValueError(f"CRAG's official rules trim with a tokenizer ({OFFICIAL_TOKENIZER}): none given")
        items = [(q, golds, trim_prediction(p, tokenizer)) for q, golds, p in items]
    stripped = [(q.strip(), [g.strip() for g in golds], p.strip()) for q, golds, p in items]
    outcomes: list[tuple[str, str | None]] = []
    ask: list[tuple[int, JudgeItem]] = []
    for i, (question, golds, prediction) in enumerate(stripped):
        outcome, judge_golds = rule_outcome(prediction, golds, rules)
        outcomes.append((outcome, None))
        if judge_golds is not None:
            ask.append((i, (question, judge_golds, prediction)))
    if judge is None or not ask:
        return outcomes
    replies = judge([item for _, item in ask])
    if len(replies) != len(ask):
        raise RuntimeError(f"the judge gave {len(replies)} replies to {len(ask)} items")
    for (i, _), reply in zip(ask, replies):
        outcomes[i] = (CORRECT if parse_judgement(reply) else HALLUCINATION, reply)
    return outcomes


def outcome_scores(outcome: str, judge: str) -> dict[str, float]:
    """One question's share of each rate, named after its `judge`; their means over questions are Acc, Hall,
    Miss and Score."""
    acc, hall = float(outcome == CORRECT), float(outcome == HALLUCINATION)
    shares = {"acc": acc, "hall": hall, "miss": float(outcome == MISSING), "score": acc - hall}
    return {judged_key(rate, judge): share for rate, share in shares.items()}


def rates(outcomes: Sequence[str]) -> dict[str, float]:
    """Acc, Hall, Miss and Score = Acc − Hall, as fractions of the outcomes (the three outcomes cover every
    answer, so Hall = 1 − Acc − Miss)."""
    n = len(outcomes)
    acc, hall, miss = (outcomes.count(outcome) / n for outcome in (CORRECT, HALLUCINATION, MISSING))
    return {"acc": acc, "hall": hall, "miss": miss, "score": acc - hall}


def entry_judge(entry: Mapping[str, Any]) -> str:
    """The judge name a judged CRAG record carries (records written before rates named their judge have
    none: their run is rerun, not guessed at)."""
    if "judge" not in entry:
        raise ValueError(
            "a CRAG record judged before CRAG metrics named their judge (no `judge` beside its `outcome`): "
            "rerun it (overwrite=true) so that its rates say what decided them"
        )
    return entry["judge"]


def entry_rules(entry: Mapping[str, Any]) -> str:
    """The rules a judged CRAG record was scored by; a record without `rules` predates the official ones,
    when PruningRAG's were the only rules."""
    return entry.get("rules", PRUNINGRAG)


def rules_info(entries: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """What metrics.json's `run` records of the rules that scored these judged CRAG records: `crag_rules`,
    nothing without a CRAG record."""
    rules = sorted({entry_rules(e) for e in entries})
    if len(rules) > 1:
        raise ValueError(f"CRAG records scored by several rules {rules}: one run's rates have one set of rules")
    return {"crag_rules": rules[0]} if rules else {}


def summary(entries: Sequence[Mapping[str, Any]]) -> dict[str, float | int]:
    """The judge's counts and the per-category breakdowns of judged questions, each entry being a
    question's CRAG record (its `GROUPS`, `outcome`, `judge_reply`, `judge` and `rules`, each one for all).
    Rates are percentages with one decimal under `crag/<group>/<value>/<rate>@<judge>`, beside the
    group's question count `crag/<group>/<value>/n`."""
    judges = sorted({entry_judge(e) for e in entries})
    if len(judges) > 1:
        raise ValueError(f"CRAG records judged by several judges {judges}: one run's rates have one judge")
    rules_info(entries)  # refuses records of several rules
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
            for rate, share in rates(outcomes).items():
                out[judged_key(rate, judges[0], group, value)] = round(100 * share, 1)
    return out


def relative_gain(before: float, after: float, lower_is_better: bool = False) -> float:
    """The relative change from `before` to `after` in percent, as the paper's gain rows (P8: recomputed,
    not copied): Acc 39.97 → 44.56 is +11.48; with `lower_is_better` (Hall, Miss) a drop is a gain."""
    change = (after - before) / before * 100
    return -change if lower_is_better else change
