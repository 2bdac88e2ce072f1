"""CRAG's evaluation (spec/pruningrag.md §8, behaviours 1–4): the outcome order (missing, exact match, judge),
judge replies, Acc / Hall / Miss / Score and their breakdowns, the gain helper, and metrics.json computed from
records that carry their judged outcome, so a summary never calls the judge."""

from __future__ import annotations

import json

import pytest
from hydra.utils import instantiate

from hoprag.data import QADataset
from hoprag.evaluation.judges import JUDGE_INSTRUCTIONS, LLMJudge, NormalizedMatchJudge
from hoprag.evaluation.runner import run, summarize
from hoprag.llm import ScriptedLLM
from hoprag.methods.base import Method, MethodOutput
from hoprag.metrics import EvalRow, MetricSuite, crag_outcomes, parse_judgement, relative_gain
from hoprag.metrics.crag import CORRECT, HALLUCINATION, MISSING, rates, summary

CATEGORIES = {"domain": "open", "static_or_dynamic": "static", "question_type": "simple"}


class RecordingJudge:
    """Replies from a table keyed by prediction; records every batch it is asked."""

    def __init__(self, replies: dict[str, str] | None = None) -> None:
        self.replies = replies or {}
        self.batches: list[list[tuple]] = []

    def __call__(self, items):
        self.batches.append(list(items))
        return [self.replies.get(prediction, '{"Accuracy": "False"}') for _, _, prediction in items]


def never_called(items):
    raise AssertionError(f"the judge was asked about {items}")


def row(prediction: str, golds=("paris",), **categories) -> EvalRow:
    return EvalRow(prediction, list(golds), question="q?", crag={**CATEGORIES, **categories})


def test_toy_counts_give_the_paper_identities():
    outcomes = [CORRECT] * 4 + [MISSING] * 3 + [HALLUCINATION] * 3
    r = rates(outcomes)
    assert r == pytest.approx({"acc": 0.4, "miss": 0.3, "hall": 0.3, "score": 0.1})
    assert r["acc"] + r["hall"] + r["miss"] == pytest.approx(1)
    assert r["score"] == pytest.approx(r["acc"] - r["hall"]) == pytest.approx((2 * 4 + 3) / 10 - 1)


def test_the_suite_reports_the_rates_as_percentages():
    rows = [row("paris")] * 4 + [row("i don't know")] * 3 + [row("lyon")] * 3
    metrics = MetricSuite()(rows)
    assert {k: metrics[k] for k in ("crag/acc", "crag/hall", "crag/miss", "crag/score")} == {
        "crag/acc": 40.0, "crag/hall": 30.0, "crag/miss": 30.0, "crag/score": 10.0,
    }  # fmt: skip
    assert metrics["crag/unjudged"] == 3  # no judge: the three non-matches are hallucinations, and say so


def test_missing_comes_first_and_an_exact_match_needs_no_judge():
    judge = RecordingJudge({"rome": "{not json"})
    items = [
        ("q1", ["paris"], "I don't know, maybe Paris"),  # missing, though it names the gold (P15)
        ("q2", ["paris"], "  Paris "),  # exact after strip + lower-case: correct
        ("q3", ["paris"], "Rome"),  # the judge's malformed reply: a hallucination
    ]
    assert crag_outcomes(items, judge) == [(MISSING, None), (CORRECT, None), (HALLUCINATION, "{not json")]
    assert judge.batches == [[("q3", ["paris"], "rome")]]  # one call, only for the non-match, lower-cased


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ('{"Accuracy": "True"}', True),
        ('{"accuracy": true}', True),
        ('{"ACCURACY": "TRUE"}', True),
        ('```json\n{"Accuracy": "True"}\n```', True),  # wrapped in a code fence
        ('The answer matches. {"Accuracy": "True"}', True),
        ('{"Accuracy": "False"}', False),
        ('{"accuracy": false}', False),
        ('{"accuracy": "maybe"}', False),
        ("True", None),
        ('{"score": 1}', None),
        ("", None),
    ],
)
def test_judge_replies_are_read_lower_cased(reply, verdict):
    assert parse_judgement(reply) is verdict


def test_a_parse_failure_is_a_counted_hallucination():
    judge = RecordingJudge({"rome": "I think so", "milan": '{"Accuracy": "False"}', "paname": '{"accuracy": true}'})
    metrics = MetricSuite(crag_judge=judge)([row("rome"), row("milan"), row("paname")])
    assert metrics["crag/acc"] == 33.3 and metrics["crag/hall"] == 66.7
    assert metrics["crag/judge_parse_failures"] == 1 and metrics["crag/unjudged"] == 0
    assert len(judge.batches) == 1 and len(judge.batches[0]) == 3


def test_gains_are_relative_and_a_drop_in_hallucination_is_a_gain():
    assert round(relative_gain(39.97, 44.56), 2) == 11.48
    assert round(relative_gain(22.32, 21.23, lower_is_better=True), 2) == 4.88
    assert relative_gain(20.0, 25.0, lower_is_better=True) == pytest.approx(-25.0)


def test_the_judge_sees_the_answer_only_unless_alternatives_are_asked_for():
    judge = RecordingJudge()
    MetricSuite(crag_judge=judge)([row("nyc", golds=["New York City", "NYC"])])
    assert judge.batches == [[("q?", ["new york city"], "nyc")]]  # CRAG's code: `answer` only (P14)
    metrics = MetricSuite(crag_judge=never_called, crag_alt_answers=True)([row("nyc", golds=["New York City", "NYC"])])
    assert metrics["crag/acc"] == 100.0  # with alt_ans, an exact match of an alternative


def test_the_llm_judge_asks_once_for_the_whole_batch_with_crags_rules():
    llm = ScriptedLLM(rules=[(lambda text: text.endswith("Prediction: 8760 seconds"), '{"Accuracy": "True"}')])
    judge = LLMJudge(llm)
    items = [("how long is the film?", ["146 minutes"], "8760 seconds"), ("who wrote it?", ["marquez"], "llosa")]
    assert judge(items) == ['{"Accuracy": "True"}', ""]
    (call,) = llm.calls
    assert call.params.temperature == 0.0 and len(call.prompts) == 2
    system, user = call.prompts[0]
    assert system["content"] == JUDGE_INSTRUCTIONS
    assert user["content"] == 'Question: how long is the film?\nGround truth: ["146 minutes"]\nPrediction: 8760 seconds'
    for rule in ("invalid question", "does not know", '{"Accuracy": "True"}', "8760 seconds"):
        assert rule in JUDGE_INSTRUCTIONS


def test_rows_without_crag_metadata_report_no_crag_metrics():
    metrics = MetricSuite(crag_judge=never_called)([EvalRow("rome", ["paris"])])
    assert not [k for k in metrics if k.startswith("crag/")]


# -- on the bundled CRAG questions, through the runner -------------------------------------------------


@pytest.fixture(scope="module")
def crag():
    return QADataset("crag", "crag/crag_task1_dev_10.jsonl.bz2", format="crag")


class Replies(Method):
    """Answers each question with a fixed reply, in order."""

    name = "replies"
    needs_retriever = False

    def __init__(self, replies: list[str], ids: list[str]) -> None:
        super().__init__(ScriptedLLM())
        self.replies = dict(zip(ids, replies))

    def answer(self, examples, costs):
        return [MethodOutput(self.replies[ex.id]) for ex in examples]


REPLIES = [
    "Yes",  # open: exact
    "Salesforce (CRM)",  # finance: judged correct
    "I don't know",  # open: missing
    "English",  # movie: judged wrong
    "invalid question",  # sports: the judge's reply is not JSON
    "i don't know, maybe xerox",  # finance: missing
    "3,696 feet",  # open: judged correct
    "nan",  # finance: exact
    "Carol Forman",  # movie: judged correct
    "Universal Pictures",  # movie: exact
]
JUDGE_REPLIES = [
    ("Prediction: salesforce (crm)", '{"Accuracy": "True"}'),
    ("Prediction: english", '{"Accuracy": "False"}'),
    ("Prediction: invalid question", "That is wrong."),
    ("Prediction: 3,696 feet", '```json\n{"accuracy": true}\n```'),
    ("Prediction: carol forman", '{"Accuracy": "True"}'),
]


def scripted_judge() -> LLMJudge:
    return LLMJudge(ScriptedLLM(rules=[(lambda t, end=end: t.endswith(end), reply) for end, reply in JUDGE_REPLIES]))


def test_metrics_json_reports_crag_from_records_judged_once(crag, tmp_path):
    judge = scripted_judge()
    method = Replies(REPLIES, [ex.id for ex in crag.examples])
    metrics = run(method, crag.examples, tmp_path, batch_size=4, suite=MetricSuite(crag_judge=judge))

    assert [len(call.prompts) for call in judge.llm.calls] == [2, 2, 1]  # one call per batch, non-matches only
    assert {k: metrics[k] for k in ("crag/acc", "crag/hall", "crag/miss", "crag/score")} == {
        "crag/acc": 60.0, "crag/hall": 20.0, "crag/miss": 20.0, "crag/score": 40.0,
    }  # fmt: skip
    assert metrics["crag/judge_parse_failures"] == 1 and metrics["crag/unjudged"] == 0
    assert {k: v for k, v in metrics.items() if k.startswith("crag/domain/")} == {
        "crag/domain/finance/n": 3, "crag/domain/finance/acc": 66.7, "crag/domain/finance/hall": 0.0,
        "crag/domain/finance/miss": 33.3, "crag/domain/finance/score": 66.7,
        "crag/domain/movie/n": 3, "crag/domain/movie/acc": 66.7, "crag/domain/movie/hall": 33.3,
        "crag/domain/movie/miss": 0.0, "crag/domain/movie/score": 33.3,
        "crag/domain/open/n": 3, "crag/domain/open/acc": 66.7, "crag/domain/open/hall": 0.0,
        "crag/domain/open/miss": 33.3, "crag/domain/open/score": 66.7,
        "crag/domain/sports/n": 1, "crag/domain/sports/acc": 0.0, "crag/domain/sports/hall": 100.0,
        "crag/domain/sports/miss": 0.0, "crag/domain/sports/score": -100.0,
    }  # fmt: skip
    assert metrics["crag/static_or_dynamic/real-time/n"] == 3 and metrics["crag/question_type/multi-hop/acc"] == 100.0

    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert records[4]["crag"] == {
        "domain": "sports", "static_or_dynamic": "fast-changing", "question_type": "false_premise",
        "outcome": "hallucination", "judge_reply": "That is wrong.",
    }  # fmt: skip
    assert [r["crag"]["outcome"] for r in records[:3]] == ["correct", "correct", "missing"]
    assert records[0]["crag"]["judge_reply"] is None and records[1]["scores"]["crag/score"] == 1.0
    assert summarize(records, MetricSuite(crag_judge=never_called)) == metrics  # no judge at summary time
    assert json.loads((tmp_path / "metrics.json").read_text())["metrics"] == metrics


def test_without_a_judge_every_non_match_is_an_unjudged_hallucination(crag, tmp_path):
    metrics = run(Replies(REPLIES, [ex.id for ex in crag.examples]), crag.examples, tmp_path, suite=MetricSuite())
    assert (metrics["crag/acc"], metrics["crag/hall"], metrics["crag/miss"]) == (30.0, 50.0, 20.0)
    assert metrics["crag/unjudged"] == 5 and metrics["crag/judge_parse_failures"] == 0


def test_the_eval_config_has_no_judge_by_default_and_takes_one(compose_cfg):
    assert instantiate(compose_cfg("eval", ["data=crag"]).metrics).crag_judge is None
    judge = "{_target_:hoprag.evaluation.judges.LLMJudge,llm:{_target_:hoprag.llm.ScriptedLLM}}"
    suite = instantiate(compose_cfg("eval", ["data=crag", f"metrics.crag_judge={judge}"]).metrics)
    assert isinstance(suite.crag_judge, LLMJudge) and isinstance(suite.crag_judge.llm, ScriptedLLM)


def test_normalized_match_judge_decides_case_and_punctuation_and_is_counted():
    judge = NormalizedMatchJudge()
    items = [("q?", ["Universal Pictures"], "Universal Pictures."), ("q?", ["146 minutes"], "8760 seconds")]
    outcomes = crag_outcomes(items, judge)
    assert [o for o, _ in outcomes] == [CORRECT, HALLUCINATION]
    entries = [{"outcome": o, "judge_reply": r, **CATEGORIES} for o, r in outcomes]
    counts = summary(entries)
    assert counts["crag/rule_judged"] == 2 and counts["crag/unjudged"] == 0 and counts["crag/judge_parse_failures"] == 0
