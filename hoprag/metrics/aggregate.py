"""One metric suite for every method, so all runs report the same keys the same way.

Values are percentages with one decimal, as FlashRAG and the papers report them. Keys follow `stage/name`:
answer metrics are bare (`em`, `f1`, `precision`, `recall`, `acc`, TreeRare's `cover_em`, plus PruneRAG's
`efr` and `forget_rate`, and `unicode_changed`, a count: the answered questions whose scores the Unicode
cleaning changed, `hoprag.metrics.answer`), retrieval metrics sit under `retrieval/` and keep the two recall
families apart (`passage_recall*` vs `answer_recall*`, with FlashRAG's looser `retrieval_recall_top{k}` beside
the latter), the ambiguous-question metrics sit under `asqa/` and
`ambigdocs/` (`hoprag.metrics.ambiguous`), averaged over the questions that carry their gold structure, and
CRAG's Acc / Hall / Miss / Score with their breakdowns sit under `crag/`, each named after its judge
(`crag/acc@exact`, `crag/acc@gpt-3.5-turbo`, ...; `hoprag.metrics.crag`). A
metric that is undefined for the rows (nothing retrieved, no gold passages, no question with all gold
retrieved, no ASQA question or no QA reader) is left out rather than reported as 0; so are the answer metrics
(EM, F1, EFR, CRAG's rates ...) of rows whose method generated no answer (`EvalRow.answered` false: a
retrieval-only run such as TreeHop's or `method.generate=false`), which are scored on retrieval alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from hoprag.data.types import Passage, QAExample
from hoprag.metrics.ambiguous import QAReader, TransformersReader, ambiguity_scores, asqa_disambig_f1
from hoprag.metrics.answer import answer_metrics, unicode_changed
from hoprag.metrics.crag import (
    OFFICIAL,
    OFFICIAL_TOKENIZER,
    PRUNINGRAG,
    Judge,
    Tokenizer,
    check_rules,
    crag_golds,
    crag_outcomes,
    entry_judge,
    judge_name,
    outcome_scores,
    summary,
)
from hoprag.metrics.retrieval import (
    Match,
    aggregate_passage_recall,
    all_gold_retrieved,
    answer_recall_at_k,
    evidence_forgetting_rate,
    retrieval_recall_top_k,
    token_overlap_match,
)

PASSAGE_MATCHES = ("title", "token_overlap")


@dataclass(frozen=True)
class EvalRow:
    """What the suite needs from one answered question.

    `retrieved` is every passage the method read: in rank order for one-shot retrieval, in retrieval order
    across hops and nodes for multi-hop methods. Repeats are dropped by passage id before any cut at k.
    `gold_titles` feed title-matched passage recall (TreeHop); `gold_passages` are gold passage texts for
    PruneRAG's token-overlap match. `ambiguity` is the gold structure of an ASQA or AmbigDocs question
    (`QAExample.metadata["ambiguity"]`, see `hoprag.metrics.ambiguous`), None for other datasets. `crag`
    holds a CRAG question's categories (`hoprag.metrics.crag.GROUPS`), and once `MetricSuite.judge` has
    judged the row its `outcome`, `judge_reply` and the `judge`'s name; None for questions without CRAG's
    metadata. `answered` is false when the method generated no answer (retrieval only): the row then has no
    answer scores at all, rather than an empty prediction's zeros.
    """

    prediction: str
    golds: Sequence[str]
    retrieved: Sequence[Passage] = ()
    gold_titles: Sequence[str] = ()
    gold_passages: Sequence[str] = ()
    ambiguity: Mapping[str, Any] | None = None
    question: str = ""
    crag: Mapping[str, Any] | None = None
    answered: bool = True

    @classmethod
    def from_example(
        cls, example: QAExample, prediction: str, retrieved: Sequence[Passage] = (), answered: bool = True
    ) -> EvalRow:
        """Gold titles are the supporting titles; gold passages are the texts of the example's context
        passages with a supporting title (empty for open-domain datasets without a context). An unanswered
        row carries no ambiguity or CRAG structure: both only score answers."""
        supporting = set(example.supporting_titles)
        return cls(
            prediction=prediction,
            golds=list(example.answers),
            retrieved=list(retrieved),
            gold_titles=list(example.supporting_titles),
            gold_passages=[p.text for p in example.context if p.title in supporting],
            ambiguity=example.metadata.get("ambiguity") if answered else None,
            question=example.question,
            crag=_crag_categories(example) if answered else None,
            answered=answered,
        )


def _load_tokenizer(name: str) -> Tokenizer:
    """The official CRAG trim's tokenizer, as its scorer loads it (`LlamaTokenizerFast`)."""
    from transformers import LlamaTokenizerFast

    return LlamaTokenizerFast.from_pretrained(name)


def _crag_categories(example: QAExample) -> dict[str, Any] | None:
    """A CRAG question's categories, told by CRAG's `domain` and `static_or_dynamic` metadata."""
    meta = example.metadata
    if "domain" not in meta or "static_or_dynamic" not in meta:
        return None
    return {"domain": meta["domain"], "static_or_dynamic": meta["static_or_dynamic"], "question_type": example.type}


def _distinct(passages: Sequence[Passage]) -> list[Passage]:
    first: dict[str, Passage] = {}
    for p in passages:
        first.setdefault(p.id, p)
    return list(first.values())


def _at(k: int | None) -> str:
    return "" if k is None else f"@{k}"


def _pct(x: float) -> float:
    return round(100 * x, 1)


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


@dataclass(frozen=True)
class MetricSuite:
    """Scores a list of `EvalRow`s into a flat dict (see the module docstring for the keys).

    `ks` are the cut-offs of the `@k` retrieval metrics; the whole retrieved list is always scored too
    (keys without `@k`), which is what multi-hop methods report. `passage_match` picks how gold passages
    are matched: `title` (exact title, TreeHop) or `token_overlap` (PruneRAG's rule on texts, with
    `overlap_threshold`). Micro passage recall is the headline `passage_recall`; macro is `_macro`.
    `cover_em` checks the first gold answer only (TreeRare's script), or every alias with
    `cover_em_aliases`. `qa_reader` (a `QAReader`, or a SQuAD 2.0 checkpoint name or path for a
    `TransformersReader`) enables ASQA's `asqa/disambig_f1`; without one it is not reported.
    `crag_judge` decides CRAG answers that are neither missing nor an exact match (`hoprag.metrics.crag`;
    None: they count as hallucinations, reported as `crag/unjudged`), against the first gold answer only,
    or every alias with `crag_alt_answers`; CRAG's rates carry its `name` (`crag/acc@<name>`, `@exact`
    without a judge), and a judge without one is refused here, before any question is asked.
    `crag_rules` are the rules that decide before the judge: `pruningrag` (its evaluator) or `official` (CRAG's
    scorer: the prediction trimmed to 75 tokens of `crag_tokenizer`, a hub name or local path, loaded here, or
    a tokenizer; and its "invalid" rule; `hoprag.metrics.crag`).
    """

    ks: Sequence[int] = (5,)
    passage_match: str = "title"
    overlap_threshold: float = 0.75
    cover_em_aliases: bool = False
    qa_reader: QAReader | str | None = None
    crag_judge: Judge | None = None
    crag_alt_answers: bool = False
    crag_rules: str = PRUNINGRAG
    crag_tokenizer: Tokenizer | str = OFFICIAL_TOKENIZER

    def __post_init__(self) -> None:
        object.__setattr__(self, "ks", tuple(int(k) for k in self.ks))
        if isinstance(self.qa_reader, str):
            object.__setattr__(self, "qa_reader", TransformersReader(self.qa_reader))
        if any(k < 1 for k in self.ks):
            raise ValueError(f"ks must be positive, got {self.ks}")
        if self.passage_match not in PASSAGE_MATCHES:
            raise ValueError(f"passage_match must be one of {PASSAGE_MATCHES}, got {self.passage_match!r}")
        judge_name(self.crag_judge)  # refused now rather than when the first CRAG answer is scored
        check_rules(self.crag_rules)
        if self.crag_rules == OFFICIAL and isinstance(self.crag_tokenizer, str):
            object.__setattr__(self, "crag_tokenizer", _load_tokenizer(self.crag_tokenizer))

    @property
    def crag_judge_name(self) -> str:
        """What CRAG's rates are named after (`hoprag.metrics.crag.judge_name`)."""
        return judge_name(self.crag_judge)

    def answer_scores(self, row: EvalRow) -> dict[str, float]:
        """Per-question answer metrics as fractions (for traces and paired significance tests), with the
        reader-free ambiguous-question metrics when the row carries their gold structure; none for a row
        without an answer."""
        if not row.answered:
            return {}
        scores = answer_metrics(row.prediction, row.golds, self.cover_em_aliases)
        if row.ambiguity is not None:
            scores.update(ambiguity_scores(row.prediction, row.ambiguity))
        if row.crag is not None and "outcome" in row.crag:
            scores.update(outcome_scores(row.crag["outcome"], entry_judge(row.crag)))
        return scores

    def judge(self, rows: Sequence[EvalRow]) -> list[EvalRow]:
        """The rows with every CRAG question's outcome decided (one judge call for all that need it), the
        judge's name and the rules; rows already judged, as the runner's records are, are kept as they are."""
        todo = [i for i, row in enumerate(rows) if row.crag is not None and "outcome" not in row.crag]
        items = [(rows[i].question, crag_golds(rows[i].golds, self.crag_alt_answers), rows[i].prediction) for i in todo]
        judged, name = list(rows), self.crag_judge_name
        tokenizer = self.crag_tokenizer if self.crag_rules == OFFICIAL else None
        for i, (outcome, reply) in zip(todo, crag_outcomes(items, self.crag_judge, self.crag_rules, tokenizer)):
            verdict = {"outcome": outcome, "judge_reply": reply, "judge": name, "rules": self.crag_rules}
            judged[i] = replace(rows[i], crag={**rows[i].crag, **verdict})
        return judged

    def _match(self) -> Match | None:
        if self.passage_match == "title":
            return None
        return partial(token_overlap_match, threshold=self.overlap_threshold)

    def _gold_and_retrieved(self, row: EvalRow, passages: list[Passage]) -> tuple[list[str], list[str]]:
        if self.passage_match == "title":
            return list(row.gold_titles), [p.title for p in passages]
        return list(row.gold_passages), [p.contents for p in passages]

    def __call__(self, rows: Sequence[EvalRow]) -> dict[str, float | int]:
        if not rows:
            raise ValueError("no rows to score")
        rows = self.judge(rows)
        per_question = [self.answer_scores(row) for row in rows]
        out: dict[str, float | int] = {"n": len(rows)}
        for name in dict.fromkeys(name for scores in per_question for name in scores):
            out[name] = _pct(_mean([scores[name] for scores in per_question if name in scores]))
        generated = [row for row in rows if row.answered]
        if generated:
            changed = [unicode_changed(r.prediction, r.golds, self.cover_em_aliases) for r in generated]
            out["unicode_changed"] = sum(changed)
        asqa = [row for row in rows if row.ambiguity is not None and "qa_pairs" in row.ambiguity]
        if asqa and self.qa_reader is not None:
            f1s = [asqa_disambig_f1(row.prediction, row.ambiguity, self.qa_reader) for row in asqa]
            out["asqa/disambig_f1"] = _pct(_mean(f1s))
        crag = [row.crag for row in rows if row.crag is not None]
        if crag:
            out.update(summary(crag))

        passages = [_distinct(row.retrieved) for row in rows]
        if not any(passages):
            return out
        out["retrieval/passages_read"] = round(_mean([len(p) for p in passages]), 2)
        texts = [[p.contents for p in question] for question in passages]
        golds = [row.golds for row in rows]
        for k in (None, *self.ks):
            out[f"retrieval/answer_recall{_at(k)}"] = _pct(answer_recall_at_k(texts, golds, k))
        for k in self.ks:
            out[f"retrieval/retrieval_recall_top{k}"] = _pct(retrieval_recall_top_k(texts, golds, k))

        match = self._match()
        gold, retrieved = zip(*(self._gold_and_retrieved(r, p) for r, p in zip(rows, passages)))
        if not any(gold):
            return out
        for k in (None, *self.ks):
            recall = aggregate_passage_recall(retrieved, gold, k, match)
            out[f"retrieval/passage_recall{_at(k)}"] = _pct(recall.micro)
            out[f"retrieval/passage_recall_macro{_at(k)}"] = _pct(recall.macro)
        out["retrieval/n_without_gold"] = recall.n_without_gold

        with_gold = [i for i, g in enumerate(gold) if g]
        complete = {i: all_gold_retrieved(retrieved[i], gold[i], match) for i in with_gold}
        answered = [i for i in with_gold if rows[i].answered]  # EFR weighs the answer's EM
        if answered:
            efr = evidence_forgetting_rate([complete[i] for i in answered], [per_question[i]["em"] == 1.0 for i in answered])
            if efr["efr"] is not None:
                out["efr"] = _pct(efr["efr"])
            out["forget_rate"] = _pct(efr["forget_rate"])
        out["retrieval/all_gold_retrieved"] = _pct(_mean([float(complete[i]) for i in with_gold]))
        return out
