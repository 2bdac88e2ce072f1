"""The question explorer (`explorer.html` beside report.html): one self-contained page to browse the compared eval
runs question by question. No server, no external script, style or font: the data is embedded as JSON and read
by the page's own script (`hoprag.compare.explorer_assets`), so the file opens from disk.

The page filters the questions by outcome (each run right, wrong or either: "A right, B wrong" for any two runs),
by a text search (question, id, golds, answers), and by any per-question fields the caller plugs in (`extra`,
`tags`); for one question it shows the gold answers and supporting titles, and per run its answer (right or wrong),
scores, cost (LLM calls, tokens, retrievals, passages read, seconds), the passages it read in order (gold ones
marked, with the hop or tree node that retrieved them where the trace says, and the hop of the gold chain a gold
one supports where the record has one, `gold_hops`) and its tree or hops drawn (`hoprag.compare.explorer_trees`).

Right means an answer score of 1 (EM by default; the page can switch to Acc, Cover-EM, or F1 ≥ 0.5, whichever
the records hold). A passage is gold when its title is one of the record's supporting titles (`gold_titles`), or,
for a run that matched gold passages by token overlap (PruneRAG's rule), when it matches a gold passage by that
rule, as the run's scoring did.

Plugging in per-question fields (failure labels, the hop missed, a shortcut flag ...): `explorer_data(...,
extra=...)` takes `extra[question_id][run] = {field: value}`, `run` being a run's name on the page (its table row,
with `[directory]` for one seed of several), its row, or its directory (label or path); a value is a string,
number, boolean or a list of them. `tags[question_id]` is a list of strings for the question itself. The page
shows a filter per field, and the tag filter, only when some question has it.

The page keeps at most `LIMIT` questions (the first ones, in the baseline's order) and says so; passage texts are
cut at `PASSAGE_CHARS` characters (shown cut shorter, expanded on click) and traces as `explorer_trees` says.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from hoprag.compare.comparison import Comparison
from hoprag.compare.explorer_assets import SCRIPT, STYLE
from hoprag.compare.explorer_trees import cut, drawings, scalar
from hoprag.compare.runs import Run
from hoprag.evaluation.predictions import finished_records

LIMIT = 2000  # questions on one page
PASSAGE_CHARS = 1500  # characters of a passage's text kept in the page
COST = ("llm_calls", "prompt_tokens", "completion_tokens", "retrieval_calls", "passages_read")
RIGHT_RULES = (  # (score key, shown name, threshold): the first the records hold is the page's default
    ("em", "EM = 1", 1.0),
    ("acc", "Acc = 1", 1.0),
    ("cover_em", "Cover-EM = 1", 1.0),
    ("f1", "F1 ≥ 0.5", 0.5),
)

Extra = Mapping[str, Mapping[str, Mapping[str, Any]]]


def plugged(comparison: Comparison) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, list[str]]]:
    """The per-question fields compare's other analyses give the page (`extra`, `tags`): each run's failure label
    and first gold hop never read (`comparison.hops`, runs with gold chains), and each question's shortcut or
    multi-hop tag (`comparison.shortcuts`, with `--shortcuts`)."""
    extra: dict[str, dict[str, dict[str, Any]]] = {}
    if comparison.hops is not None:
        for group, attribution in comparison.hops.per_question:
            if attribution.label is None:
                continue
            missed = next((h.hop for h in attribution.hops if h.known and h.step is None), "none")
            extra.setdefault(attribution.id, {})[group] = {"failure": attribution.label, "hop missed": missed}
    tags: dict[str, list[str]] = {}
    if comparison.shortcuts is not None:
        tags = {q: ["shortcut" if shortcut else "multi-hop"] for q, shortcut in comparison.shortcuts.flagged.items()}
    return extra, tags


def run_names(comparison: Comparison) -> list[tuple[str, Run, list[str]]]:
    """Every eval run directory as (its name on the page, the run, the names `extra` may key it by)."""
    named = []
    for group in comparison.groups:
        for run in group.runs:
            name = group.name if len(group.runs) == 1 else f"{group.name} [{run.label}]"
            named.append((name, run, list(dict.fromkeys([name, group.name, run.label, str(run.path)]))))
    return named


def _gold_flags(record: Mapping[str, Any], run: Run) -> list[int]:
    """Per read passage, 1 when it is gold by the run's own rule (titles, or token overlap with a gold passage)."""
    flags = []
    titles, texts = set(record.get("gold_titles") or []), record.get("gold_passages") or []
    for p in record.get("retrieved") or []:
        if run.match is None:
            flags.append(int(p.get("title") in titles))
        else:
            contents = f"{p.get('title', '')}\n{p.get('text', '')}"
            flags.append(int(any(run.match(g, contents) for g in texts)))
    return flags


def _cost(cost: Mapping[str, Any]) -> dict[str, float]:
    out = {k: cost[k] for k in COST if isinstance(cost.get(k), (int, float)) and math.isfinite(cost[k])}
    seconds = cost.get("seconds")
    if isinstance(seconds, Mapping):
        out["seconds"] = round(sum(v for v in seconds.values() if isinstance(v, (int, float))), 3)
        out["stages"] = {k: round(v, 3) for k, v in seconds.items() if isinstance(v, (int, float))}
    return out


def _finite(value: Any) -> Any:
    """NaN and infinities as None: JSON has no such numbers, and the page's `JSON.parse` would refuse them."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """`extra` fields the page can filter on: scalars and lists of scalars (anything else shown as text)."""
    out = {}
    for key, value in values.items():
        if scalar(value) or (isinstance(value, (list, tuple)) and all(scalar(v) for v in value)):
            out[str(key)] = [_finite(v) for v in value] if isinstance(value, (list, tuple)) else _finite(value)
        else:
            out[str(key)] = cut(value)
    return out


def _run_entry(record: Mapping[str, Any], run: Run, passages: dict[str, list], extra: Mapping[str, Any]) -> dict:
    def title(pid: str) -> str:
        return passages[pid][0] if pid in passages else pid

    for p in record.get("retrieved") or []:
        if str(p.get("id")) not in passages:
            text = str(p.get("text", ""))
            cut_off = max(0, len(text) - PASSAGE_CHARS)
            passages[str(p.get("id"))] = [str(p.get("title", "")), text[:PASSAGE_CHARS], cut_off]
    views, hops = drawings(record.get("trace"), title)
    chain = {h.get("title"): k for k, h in enumerate(_chain(record), 1) if h.get("title")}
    read = [[str(p.get("id")), gold, hops.get(str(p.get("id")), ""), chain.get(p.get("title"), 0)]
            for p, gold in zip(record.get("retrieved") or [], _gold_flags(record, run))]  # fmt: skip
    entry: dict[str, Any] = {
        "a": str(record.get("prediction", "")),
        "s": {k: round(float(v), 4) for k, v in (record.get("scores") or {}).items()
              if isinstance(v, (int, float)) and math.isfinite(v)},
        "p": read,
        "c": _cost(record.get("cost") or {}),
        "t": views,
    }
    if record.get("parse_failed"):
        entry["f"] = 1
    if record.get("generated") is False:
        entry["g"] = 0  # retrieval only: no answer to be right or wrong
    if extra:
        entry["x"] = _fields(extra)
    return entry


def _chain(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The record's gold chain (`gold_hops`: each hop's question, answer and supporting title), [] without one."""
    hops = record.get("gold_hops")
    return [h for h in hops if isinstance(h, Mapping)] if isinstance(hops, list) else []


def _extra_for(extra: Extra | None, qid: str, keys: Sequence[str]) -> dict[str, Any]:
    by_run = (extra or {}).get(qid) or {}
    found: dict[str, Any] = {}
    for key in reversed(keys):  # the page name wins over the group's name, which wins over the directory
        found.update(by_run.get(key) or {})
    return found


def _filters(questions: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The `extra` fields some question has, with their values (a list's items counted one by one)."""
    values: dict[str, dict[str, None]] = {}
    for q in questions:
        for entry in q["r"]:
            for key, value in ((entry or {}).get("x") or {}).items():
                seen = values.setdefault(key, {})
                for v in value if isinstance(value, list) else [value]:
                    seen.setdefault(json.dumps(v), None)
    return [{"key": k, "values": [json.loads(v) for v in sorted(vs)][:200]} for k, vs in values.items()]


def explorer_data(
    comparison: Comparison,
    extra: Extra | None = None,
    tags: Mapping[str, Sequence[str]] | None = None,
    limit: int = LIMIT,
) -> dict[str, Any]:
    """The page's data: `runs` (name, method, directory), `questions` (id `i`, text `q`, golds `g`, supporting
    titles `st`, gold chain `gh` ([sub-question, answer, title] per hop, when the records have one), tags `tg`,
    and per run in `runs` order its entry `r` or None: answer `a`, scores `s`, passages read `p` as [id, gold,
    retrieving hop or node, gold chain hop or 0], cost `c`, drawn trace `t`, fields `x`), `passages` (id -> title,
    text, characters cut), the `rules` of "right", the `filters` of the plugged-in fields, and the counts."""
    named = run_names(comparison)
    order: dict[str, dict[str, Any]] = {}
    per_run: list[dict[str, dict[str, Any]]] = []
    for _, run, _ in named:
        records = {str(r["id"]): r for _, r in finished_records(run.path)}
        per_run.append(records)
        for qid in records:
            order.setdefault(qid, records[qid])
    total = len(order)
    passages: dict[str, list] = {}
    questions = []
    for qid, first in list(order.items())[:limit]:
        entries = []
        for (_, run, keys), records in zip(named, per_run):
            record = records.get(qid)
            entries.append(None if record is None else _run_entry(record, run, passages, _extra_for(extra, qid, keys)))
        question = {"i": qid, "q": str(first.get("question", "")), "g": [str(g) for g in first.get("golds") or []],
                    "st": [str(t) for t in first.get("gold_titles") or []], "r": entries}  # fmt: skip
        chain = _chain(first)
        if chain:
            question["gh"] = [[str(h.get("question", "")), str(h.get("answer", "")), str(h.get("title") or "")]
                              for h in chain]  # fmt: skip
        if tags and tags.get(qid):
            question["tg"] = [str(t) for t in tags[qid]]
        questions.append(question)
    held = {k for q in questions for e in q["r"] if e for k in e["s"]}
    methods = [next((str(r.get("method", "")) for r in records.values()), "") for records in per_run]
    return {
        "runs": [{"name": name, "method": m, "dir": str(run.path)} for (name, run, _), m in zip(named, methods)],
        "baseline": comparison.baseline.name if comparison.baseline else None,
        "stamp": comparison.stamp.line() if comparison.stamp else "",
        "questions": questions,
        "passages": passages,
        "rules": [{"key": k, "name": n, "at": at} for k, n, at in RIGHT_RULES if k in held],
        "filters": _filters(questions),
        "tags": sorted({t for q in questions for t in q.get("tg", [])}),
        "total": total,
        "limit": limit,
        "passage_chars": PASSAGE_CHARS,
    }


def embedded_json(data: Any) -> str:
    """JSON that is safe inside a `<script type="application/json">` element (no `</script>`, no `<!--`)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def explorer_page(
    comparison: Comparison,
    extra: Extra | None = None,
    tags: Mapping[str, Sequence[str]] | None = None,
    limit: int = LIMIT,
) -> str:
    """The whole explorer page: `explorer_data` embedded, with its style and script inlined."""
    data = explorer_data(comparison, extra, tags, limit)
    title = "hoprag question explorer"
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>\n'
        f'<body><header><h1>{escape(title)}</h1><p id="summary"></p></header>\n'
        '<noscript><p>This page draws its questions with JavaScript, which is turned off.</p></noscript>\n'
        '<section id="filters"></section>\n<main><section id="list"></section><section id="detail"></section></main>\n'
        f'<script type="application/json" id="data">{embedded_json(data)}</script>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )
