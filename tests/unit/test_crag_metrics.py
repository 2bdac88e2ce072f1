"""CRAG's evaluation (spec/pruningrag.md §8, behaviours 1–4): the outcome order (missing, exact match, judge),
judge replies, Acc / Hall / Miss / Score and their breakdowns, each named after its judge (issue 30, item 3),
CRAG's judge prompt, the gain helper, and metrics.json computed from records that carry their judged outcome
and judge, so a summary never calls the judge."""

from __future__ import annotations

import json
import re

import pytest
from hydra.utils import instantiate

from hoprag.data import QADataset
from hoprag.evaluation.judges import JUDGE_EXAMPLES, JUDGE_INSTRUCTIONS, JUDGE_SYSTEM, LLMJudge, NormalizedMatchJudge
from hoprag.evaluation.objective import objective
from hoprag.evaluation.runner import run, summarize
from hoprag.llm import OpenAICompatLLM, ScriptedLLM
from hoprag.methods.base import Method, MethodOutput
from hoprag.metrics import EvalRow, MetricSuite, crag_outcomes, parse_judgement, relative_gain
from hoprag.metrics.crag import CORRECT, HALLUCINATION, MISSING, rates, summary

CATEGORIES = {"domain": "open", "static_or_dynamic": "static", "question_type": "simple"}


class RecordingJudge:
    """Replies from a table keyed by prediction; records every batch it is asked."""

    name = "recording"

    def __init__(self, replies: dict[str, str] | None = None) -> None:
        self.replies = replies or {}
        self.batches: list[list[tuple]] = []

    def __call__(self, items):
        self.batches.append(list(items))
        return [self.replies.get(prediction.lower(), '{"Accuracy": "False"}') for _, _, prediction in items]


def never_called(items):
    raise AssertionError(f"the judge was asked about {items}")


never_called.name = "never-called"  # type: ignore[attr-defined]
PLAIN = re.compile(r"^crag/(.+/)?(acc|hall|miss|score)$")  # a CRAG rate without its judge


def assert_named_only(metrics, judge):
    """Every CRAG rate is named after `judge`, and none is plain."""
    assert not [k for k in metrics if PLAIN.match(k)]
    rates_ = [k for k in metrics if re.match(r"^crag/(.+/)?(acc|hall|miss|score)@", k)]
    assert rates_ and all(k.endswith(f"@{judge}") for k in rates_)


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
    assert {k: metrics[k] for k in ("crag/acc@exact", "crag/hall@exact", "crag/miss@exact", "crag/score@exact")} == {
        "crag/acc@exact": 40.0, "crag/hall@exact": 30.0, "crag/miss@exact": 30.0, "crag/score@exact": 10.0,
    }  # fmt: skip
    assert metrics["crag/unjudged"] == 3  # no judge: the three non-matches are hallucinations, and say so
    assert_named_only(metrics, "exact")


def test_missing_comes_first_and_an_exact_match_needs_no_judge():
    judge = RecordingJudge({"rome": "{not json"})
    items = [
        ("q1", ["paris"], "I don't know, maybe Paris"),  # missing, though it names the gold (P15)
        ("q2", ["paris"], "  Paris "),  # exact after strip + lower-case: correct
        ("q3", ["paris"], "Rome"),  # the judge's malformed reply: a hallucination
    ]
    assert crag_outcomes(items, judge) == [(MISSING, None), (CORRECT, None), (HALLUCINATION, "{not json")]
    assert judge.batches == [[("q3", ["paris"], "Rome")]]  # one call, only for the non-match, in its own case


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ('{"Accuracy": "True"}', True),
        ('{"accuracy": true}', True),
        ('{"ACCURACY": "TRUE"}', True),
        (' {"Accuracy": "True"}\n', True),  # JSON around which only whitespace stands
        ('```json\n{"Accuracy": "True"}\n```', None),  # wrapped in a code fence: CRAG's code reads no object
        ('The answer matches. {"Accuracy": "True"}', None),  # nor one in prose
        ("Accuracy: True", None),  # the examples' own layout, which is not JSON
        ('{"Accuracy": "False"}', False),
        ('{"accuracy": false}', False),
        ('{"accuracy": "maybe"}', False),
        ("True", None),
        ('{"score": 1}', None),
        ("", None),
    ],
)
def test_judge_replies_are_read_whole_and_lower_cased_as_crags_code_reads_them(reply, verdict):
    assert parse_judgement(reply) is verdict


def test_a_parse_failure_is_a_counted_hallucination():
    judge = RecordingJudge({"rome": "I think so", "milan": '{"Accuracy": "False"}', "paname": '{"accuracy": true}'})
    metrics = MetricSuite(crag_judge=judge)([row("rome"), row("milan"), row("paname")])
    assert metrics["crag/acc@recording"] == 33.3 and metrics["crag/hall@recording"] == 66.7
    assert metrics["crag/judge_parse_failures"] == 1 and metrics["crag/unjudged"] == 0
    assert len(judge.batches) == 1 and len(judge.batches[0]) == 3


def test_gains_are_relative_and_a_drop_in_hallucination_is_a_gain():
    assert round(relative_gain(39.97, 44.56), 2) == 11.48
    assert round(relative_gain(22.32, 21.23, lower_is_better=True), 2) == 4.88
    assert relative_gain(20.0, 25.0, lower_is_better=True) == pytest.approx(-25.0)


def test_the_judge_sees_the_answer_only_unless_alternatives_are_asked_for():
    judge = RecordingJudge()
    MetricSuite(crag_judge=judge)([row("nyc", golds=["New York City", "NYC"])])
    assert judge.batches == [[("q?", ["New York City"], "nyc")]]  # CRAG's code: `answer` only (P14)
    metrics = MetricSuite(crag_judge=never_called, crag_alt_answers=True)([row("nyc", golds=["New York City", "NYC"])])
    assert metrics["crag/acc@never-called"] == 100.0  # with alt_ans, an exact match of an alternative


def test_the_llm_judge_asks_once_for_the_whole_batch_in_crags_layout():
    llm = ScriptedLLM(rules=[(lambda text: text.endswith("Prediction: 8760 seconds\n"), '{"Accuracy": "True"}')])
    judge = LLMJudge(llm)
    items = [("How long is the film?", ["146 minutes"], "8760 seconds"), ("Who wrote it?", ["Marquez", "GGM"], "Llosa")]
    assert judge(items) == ['{"Accuracy": "True"}', ""]
    (call,) = llm.calls
    assert call.params.temperature == 0.0 and len(call.prompts) == 2
    system, user = call.prompts[0]  # the instructions and examples as the system message, the item as the user's
    assert (
        system == {"role": "system", "content": JUDGE_INSTRUCTIONS + JUDGE_EXAMPLES}
        and JUDGE_SYSTEM == system["content"]
    )
    assert user == {
        "role": "user",
        "content": "Question: How long is the film?\n Ground truth: 146 minutes\n Prediction: 8760 seconds\n",
    }
    several = call.prompts[1][1]["content"]  # several golds (alt_answers, our option): their JSON list
    assert several == 'Question: Who wrote it?\n Ground truth: ["Marquez", "GGM"]\n Prediction: Llosa\n'


def test_the_llm_judge_holds_crags_official_instructions_and_examples():
    """Re-typed from CRAG's KDD Cup 2024 judge as PruningRAG's code carries it (hoprag/evaluation/judges.py cites
    the commit): each line as there, trailing spaces included."""
    instructions = [
        "",
        "# Task: ",
        (
            "You are given a Question, a model Prediction, and a list of Ground Truth answers, judge whether the "
            "model Prediction matches any answer from the list of Ground Truth answers. Follow the instructions "
            "step by step to make a judgement. "
        ),
        (
            '1. If the model prediction matches any provided answers from the Ground Truth Answer list, "Accuracy" '
            'should be "True"; otherwise, "Accuracy" should be "False".'
        ),
        (
            "2. If the model prediction says that it couldn't answer the question or it doesn't have enough "
            'information, "Accuracy" should always be "False".'
        ),
        (
            '3. If the Ground Truth is "invalid question", "Accuracy" is "True" only if the model prediction is '
            'exactly "invalid question".'
        ),
        "# Output: ",
        'Respond with only a single JSON string with an "Accuracy" field which is "True" or "False".',
        "",
    ]
    examples = [
        "", "# Examples:",
        "Question: how many seconds is 3 minutes 15 seconds?", 'Ground truth: ["195 seconds"]',
        "Prediction: 3 minutes 15 seconds is 195 seconds.", "Accuracy: True", "",
        "Question: Who authored The Taming of the Shrew (published in 2002)?",
        'Ground truth: ["William Shakespeare", "Roma Gill"]',
        "Prediction: The author to The Taming of the Shrew is Roma Shakespeare.", "Accuracy: False", "",
        "Question: Who played Sheldon in Big Bang Theory?", 'Ground truth: ["Jim Parsons", "Iain Armitage"]',
        "Prediction: I am sorry I don't know.", "Accuracy: False", "",
    ]  # fmt: skip
    assert JUDGE_INSTRUCTIONS == "\n".join(instructions) and JUDGE_EXAMPLES == "\n".join(examples)


@pytest.mark.parametrize(
    ("base_url", "name"),
    [
        ("https://api.openai.com/v1", "gpt-3.5-turbo"),  # the paper's judge: its model
        ("http://localhost:8000/v1", "local-gpt-3.5-turbo"),  # the same name served here is not the paper's
        ("http://127.0.0.1:8080/v1", "local-gpt-3.5-turbo"),
        ("http://[::1]:8000/v1", "local-gpt-3.5-turbo"),
        ("http://192.168.1.20:8000/v1", "local-gpt-3.5-turbo"),  # a private network
        ("http://vllm:8000/v1", "local-gpt-3.5-turbo"),  # a host name without a dot (a container's)
        ("http://gpu.local:8000/v1", "local-gpt-3.5-turbo"),
    ],
)
def test_an_llm_judge_is_named_after_its_model_and_labelled_local_when_it_runs_here(base_url, name):
    llm = OpenAICompatLLM("gpt-3.5-turbo", base_url=base_url, api_key="sk-test", probe=False,
                          capabilities={"logprobs": False, "n": True, "prefill": False})  # fmt: skip
    assert LLMJudge(llm).name == name


def test_an_in_process_llm_judge_is_local():
    assert LLMJudge(ScriptedLLM()).name == "local-scripted"
    smollm = ScriptedLLM()
    smollm.name = "SmolLM2-135M-Instruct"  # as an in-process HF or vLLM model names itself
    assert LLMJudge(smollm).name == "local-smollm2-135m-instruct"
    served = OpenAICompatLLM("Qwen/Qwen2.5-7B-Instruct", name="qwen2.5-7b-instruct", probe=False,
                             capabilities={"logprobs": False, "n": True, "prefill": False})  # fmt: skip
    assert LLMJudge(served).name == "local-qwen2.5-7b-instruct"  # served here: its short name


def test_a_remote_judge_without_an_api_key_is_refused_when_built(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    remote = OpenAICompatLLM("gpt-3.5-turbo", base_url="https://api.openai.com/v1", probe=False,
                             capabilities={"logprobs": False, "n": True, "prefill": False})  # fmt: skip
    with pytest.raises(ValueError, match="gpt-3.5-turbo at https://api.openai.com/v1 .*OPENAI_API_KEY"):
        LLMJudge(remote)
    local = OpenAICompatLLM("m", probe=False, capabilities={"logprobs": False, "n": True, "prefill": False})
    assert LLMJudge(local).name == "local-m"  # a server here needs no key


def test_each_kind_of_judge_names_every_rate_and_no_rate_is_plain():
    rows = [row("paris"), row("i don't know"), row("Paris.", domain="movie")]
    remote = OpenAICompatLLM("gpt-3.5-turbo", base_url="https://api.openai.com/v1", api_key="sk-test", probe=False,
                             capabilities={"logprobs": False, "n": True, "prefill": False})  # fmt: skip
    for judge, name in ((None, "exact"), (NormalizedMatchJudge(), "rule"), (LLMJudge(ScriptedLLM()), "local-scripted")):
        metrics = MetricSuite(crag_judge=judge)(rows)
        assert_named_only(metrics, name)
        assert metrics[f"crag/domain/movie/acc@{name}"] == (100.0 if name == "rule" else 0.0)  # "Paris." by rule
        assert metrics["crag/domain/movie/n"] == 1 and f"crag/score@{name}" in metrics
    paper = MetricSuite(crag_judge=LLMJudge(remote))(rows[:2])  # nothing to judge: no request is sent
    assert_named_only(paper, "gpt-3.5-turbo")
    assert paper["crag/acc@gpt-3.5-turbo"] == 50.0 and paper["crag/miss@gpt-3.5-turbo"] == 50.0


def test_a_judge_without_a_usable_name_is_refused_before_anything_is_scored():
    with pytest.raises(TypeError, match="has no `name`"):
        MetricSuite(crag_judge=lambda items: ['{"Accuracy": "True"}'] * len(items))
    for bad in ("GPT/3.5", "a@b", "exact", ""):
        judge = RecordingJudge()
        judge.name = bad
        with pytest.raises(ValueError, match="must be lower-case"):
            MetricSuite(crag_judge=judge)


def test_records_judged_without_a_judge_name_or_by_several_judges_are_refused():
    old = EvalRow("rome", ["paris"], crag={**CATEGORIES, "outcome": HALLUCINATION, "judge_reply": None})
    with pytest.raises(ValueError, match="before CRAG metrics named their judge"):
        MetricSuite()([old])
    mixed = [{**CATEGORIES, "outcome": CORRECT, "judge_reply": None, "judge": j} for j in ("exact", "rule")]
    with pytest.raises(ValueError, match="several judges"):
        summary(mixed)


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
    ("Prediction: Salesforce (CRM)\n", '{"Accuracy": "True"}'),
    ("Prediction: English\n", '{"Accuracy": "False"}'),
    ("Prediction: invalid question\n", "That is wrong."),
    ("Prediction: 3,696 feet\n", '{"accuracy": true}'),
    ("Prediction: Carol Forman\n", '{"Accuracy": "True"}'),
]
RATES = ("crag/acc@local-scripted", "crag/hall@local-scripted", "crag/miss@local-scripted", "crag/score@local-scripted")


def scripted_judge() -> LLMJudge:
    return LLMJudge(ScriptedLLM(rules=[(lambda t, end=end: t.endswith(end), reply) for end, reply in JUDGE_REPLIES]))


def test_metrics_json_reports_crag_from_records_judged_once(crag, tmp_path):
    judge = scripted_judge()
    method = Replies(REPLIES, [ex.id for ex in crag.examples])
    metrics = run(method, crag.examples, tmp_path, batch_size=4, suite=MetricSuite(crag_judge=judge))

    assert [len(call.prompts) for call in judge.llm.calls] == [2, 2, 1]  # one call per batch, non-matches only
    assert {k: metrics[k] for k in RATES} == dict(zip(RATES, (60.0, 20.0, 20.0, 40.0)))
    assert metrics["crag/judge_parse_failures"] == 1 and metrics["crag/unjudged"] == 0
    assert_named_only(metrics, "local-scripted")
    assert {k.removesuffix("@local-scripted"): v for k, v in metrics.items() if k.startswith("crag/domain/")} == {
        "crag/domain/finance/n": 3, "crag/domain/finance/acc": 66.7, "crag/domain/finance/hall": 0.0,
        "crag/domain/finance/miss": 33.3, "crag/domain/finance/score": 66.7,
        "crag/domain/movie/n": 3, "crag/domain/movie/acc": 66.7, "crag/domain/movie/hall": 33.3,
        "crag/domain/movie/miss": 0.0, "crag/domain/movie/score": 33.3,
        "crag/domain/open/n": 3, "crag/domain/open/acc": 66.7, "crag/domain/open/hall": 0.0,
        "crag/domain/open/miss": 33.3, "crag/domain/open/score": 66.7,
        "crag/domain/sports/n": 1, "crag/domain/sports/acc": 0.0, "crag/domain/sports/hall": 100.0,
        "crag/domain/sports/miss": 0.0, "crag/domain/sports/score": -100.0,
    }  # fmt: skip
    assert metrics["crag/static_or_dynamic/real-time/n"] == 3
    assert metrics["crag/question_type/multi-hop/acc@local-scripted"] == 100.0

    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert records[4]["crag"] == {
        "domain": "sports", "static_or_dynamic": "fast-changing", "question_type": "false_premise",
        "outcome": "hallucination", "judge_reply": "That is wrong.", "judge": "local-scripted", "rules": "pruningrag",
    }  # fmt: skip
    assert [r["crag"]["outcome"] for r in records[:3]] == ["correct", "correct", "missing"]
    assert records[0]["crag"]["judge_reply"] is None and records[1]["scores"]["crag/score@local-scripted"] == 1.0
    assert not [k for r in records for k in r["scores"] if PLAIN.match(k)]
    assert summarize(records, MetricSuite(crag_judge=never_called)) == metrics  # no judge at summary time, and
    # the rates keep the name of the judge that decided them, whatever suite reads the records
    assert json.loads((tmp_path / "metrics.json").read_text())["metrics"] == metrics


def test_without_a_judge_every_non_match_is_an_unjudged_hallucination(crag, tmp_path):
    metrics = run(Replies(REPLIES, [ex.id for ex in crag.examples]), crag.examples, tmp_path, suite=MetricSuite())
    assert (metrics["crag/acc@exact"], metrics["crag/hall@exact"], metrics["crag/miss@exact"]) == (30.0, 50.0, 20.0)
    assert metrics["crag/unjudged"] == 5 and metrics["crag/judge_parse_failures"] == 0
    assert_named_only(metrics, "exact")


def test_the_eval_config_has_no_judge_by_default_and_takes_one(compose_cfg):
    default = instantiate(compose_cfg("eval", ["data=crag"]).metrics)
    assert default.crag_judge is None and default.crag_judge_name == "exact"
    judge = "{_target_:hoprag.evaluation.judges.LLMJudge,llm:{_target_:hoprag.llm.ScriptedLLM}}"
    suite = instantiate(compose_cfg("eval", ["data=crag", f"metrics.crag_judge={judge}"]).metrics)
    assert isinstance(suite.crag_judge, LLMJudge) and isinstance(suite.crag_judge.llm, ScriptedLLM)
    assert suite.crag_judge_name == "local-scripted"


def test_normalized_match_judge_decides_case_and_punctuation_and_is_counted():
    judge = NormalizedMatchJudge()
    items = [("q?", ["Universal Pictures"], "Universal Pictures."), ("q?", ["146 minutes"], "8760 seconds")]
    outcomes = crag_outcomes(items, judge)
    assert [o for o, _ in outcomes] == [CORRECT, HALLUCINATION]
    entries = [{"outcome": o, "judge_reply": r, "judge": judge.name, **CATEGORIES} for o, r in outcomes]
    counts = summary(entries)
    assert counts["crag/rule_judged"] == 2 and counts["crag/unjudged"] == 0 and counts["crag/judge_parse_failures"] == 0
    assert counts["crag/domain/open/acc@rule"] == 50.0 and judge.name == "rule"


def test_an_objective_names_its_judge_or_takes_the_runs_only_one():
    metrics = {"crag/score@rule": 10.0, "crag/domain/open/score@rule": 50.0, "crag/rule_judged": 3, "f1": 20.0}
    assert objective(metrics, "crag/score@rule") == 10.0
    assert objective(metrics, "crag/score@*") == 10.0  # a breakdown's rate is not the run's Score
    assert objective(metrics, ["crag/domain/open/score@*", "f1"]) == (50.0, 20.0)
    with pytest.raises(KeyError, match=r"'crag/score'.*\['crag/score@rule'\].*crag/score@\*"):
        objective(metrics, "crag/score")  # plain: refused, never read as the one there is
    with pytest.raises(KeyError, match="found \\['crag/score@exact', 'crag/score@rule'\\]"):
        objective({**metrics, "crag/score@exact": 5.0}, "crag/score@*")
    with pytest.raises(KeyError, match="found \\[\\]"):
        objective({"f1": 1.0}, "crag/score@*")
