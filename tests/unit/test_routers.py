"""Source routers (spec/pruningrag.md §5, behaviours 5 and 6): context-disjoint splits, the reply parser, the
label builders, the LLM router's one batched call, and the routing metrics."""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data import QAExample, load_questions
from hoprag.llm import ScriptedLLM
from hoprag.metrics.routing import accuracy, class_scores, confusion, macro_f1, routing_report
from hoprag.paths import data_root
from hoprag.routers.labels import gold_labels, majority_label, outcome_labels
from hoprag.routers.options import CRAG_SINGLE, CRAG_SUBSET, TATQA, parse_option
from hoprag.routers.router import LLMRouter, RouteDecision
from hoprag.training.splits import LeakError, check_disjoint, split_by_context


@pytest.fixture(scope="module")
def tatqa():
    return load_questions(data_root() / "tatqa" / "tatqa_dataset_dev.json")


def example(qid: str, question: str, context: str, answer_from: str = "table") -> QAExample:
    return QAExample(qid, question, ["x"], metadata={"context_uid": context, "answer_from": answer_from})


# -- splits ----------------------------------------------------------------------------------------------


def test_the_real_split_shares_no_context_question_or_text(tatqa):
    train, evaluation = split_by_context(tatqa, eval_fraction=0.5, seed=0)
    assert len(train) + len(evaluation) == 1668
    assert 0.45 < len(evaluation) / 1668 < 0.55
    assert not {ex.metadata["context_uid"] for ex in train} & {ex.metadata["context_uid"] for ex in evaluation}
    check_disjoint(train, evaluation)  # raises on any shared id, context or question text
    # "What does the table show?" is asked of 7 contexts: they all land on one side
    sides = {"train" if ex in train else "eval" for ex in tatqa if ex.question == "What does the table show?"}
    assert len(sides) == 1


def test_the_split_is_deterministic_and_keeps_file_order(tatqa):
    first, second = split_by_context(tatqa, seed=0), split_by_context(tatqa, seed=0)
    assert [ex.id for ex in first[1]] == [ex.id for ex in second[1]]
    assert [ex.id for ex in split_by_context(tatqa, seed=1)[1]] != [ex.id for ex in first[1]]
    order = {ex.id: i for i, ex in enumerate(tatqa)}
    assert all(order[a.id] < order[b.id] for a, b in zip(first[0], first[0][1:]))


def test_contexts_linked_by_an_identical_question_stay_together():
    examples = [example(f"q{i}", f"question {i}?", f"c{i}") for i in range(20)]
    examples += [example("twin-a", "What does the table show?", "c3"),
                 example("twin-b", "what does  the table SHOW?", "c17")]  # fmt: skip
    for seed in range(10):
        train, evaluation = split_by_context(examples, 0.5, seed)
        check_disjoint(train, evaluation)
        assert ({"c3", "c17"} <= {ex.metadata["context_uid"] for ex in train}) or (
            {"c3", "c17"} <= {ex.metadata["context_uid"] for ex in evaluation}
        )


def test_questions_without_a_context_are_their_own_context():
    examples = [QAExample(f"q{i}", f"question {i}?", ["a"]) for i in range(10)]
    train, evaluation = split_by_context(examples, 0.3, seed=0)
    assert len(evaluation) == 3 and len(train) == 7


@pytest.mark.parametrize(
    ("evaluation", "what"),
    [
        ([example("q1", "Other text?", "c9")], "1 question ids"),
        ([example("q9", "Other text?", "c1")], "1 contexts"),
        ([example("q9", "  WHAT is it? ", "c9")], "1 question texts"),
    ],
)
def test_check_disjoint_names_what_leaks(evaluation, what):
    train = [example("q1", "What is it?", "c1")]
    with pytest.raises(LeakError, match=what):
        check_disjoint(train, evaluation)


def test_split_refuses_a_fraction_outside_the_unit_interval():
    with pytest.raises(ValueError, match="eval_fraction"):
        split_by_context([example("q", "Q?", "c")], eval_fraction=1.0)


# -- behaviour 5: the reply parser -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "policy", "sources", "parsed"),
    [
        ("a", "api", ("web",), True),
        ("a) Web Pages only", "api", ("web",), True),
        ("a something", "api", ("web",), True),
        ("A", "api", ("web",), True),
        ("b", "api", ("api",), True),
        ("c", "api", ("llm",), True),
        ("d", "api", ("api",), True),  # "none" follows the policy: the official code's API fallback
        ("x", "api", ("api",), False),
        ("d", "abstain", ("abstain",), True),
        ("x", "abstain", ("abstain",), False),
        ("", "api", ("abstain",), False),  # an empty reply abstains
        ("apple", "api", ("api",), False),  # a word starting with a letter names no option
    ],
)
def test_parse_option_reads_replies_as_the_official_code(reply, policy, sources, parsed):
    assert parse_option(reply, CRAG_SINGLE, policy) == (sources, parsed)


def test_parse_option_in_the_subset_and_tatqa_sets():
    assert parse_option("c", CRAG_SUBSET) == (("api", "web"), True)
    assert parse_option("c) both", TATQA) == (("table", "text"), True)
    assert parse_option("The text paragraphs only", TATQA) == (("abstain",), False)  # no "api" to fall back to


# -- behaviour 6: labels ---------------------------------------------------------------------------------


def test_gold_labels_from_answer_from():
    examples = [example("1", "q", "c", "table"), example("2", "q", "c", "text"), example("3", "q", "c", "table-text")]
    assert gold_labels(examples) == [("table",), ("text",), ("table", "text")]
    with pytest.raises(ValueError, match="no gold source label"):
        gold_labels([QAExample("4", "q", ["a"])])


def test_single_choice_collapses_by_priority_and_subset_keeps_the_set():
    outcomes = [{"api", "web"}, {"web", "llm"}, {"llm"}]
    buckets = [("finance", "static", "simple")] * 3
    assert outcome_labels(outcomes, buckets) == [("api",), ("web",), ("llm",)]
    assert outcome_labels(outcomes, buckets, mode="subset") == [("api", "web"), ("web", "llm"), ("llm",)]


def test_a_question_no_source_answered_gets_the_best_source_of_its_bucket():
    outcomes = [set(), {"web"}, {"web", "llm"}, {"api"}, set()]
    buckets = [("music", "static", "simple"), ("music", "static", "simple"), ("music", "static", "simple"),
               ("finance", "dynamic", "simple"), ("finance", "dynamic", "simple")]  # fmt: skip
    labels = outcome_labels(outcomes, buckets)
    assert labels[0] == ("web",)  # web 2/3 beats llm 1/3 among the music questions, not API
    assert labels[4] == ("api",)
    assert outcome_labels(outcomes, buckets, mode="subset")[0] == ("web",)


def test_an_unanswered_bucket_backs_off_to_its_domain_then_to_everything():
    outcomes = [set(), {"llm"}, {"llm"}, {"web"}, set()]
    buckets = [("music", "dynamic", "comparison"), ("music", "static", "simple"), ("music", "static", "simple"),
               ("sports", "static", "simple"), ("movie", "static", "simple")]  # fmt: skip
    labels = outcome_labels(outcomes, buckets)
    assert labels[0] == ("llm",)  # its own bucket never answered: the music domain's best
    assert labels[4] == ("llm",)  # no movie question answered: the best over all questions (llm 2, web 1)


def test_labels_are_never_empty_and_ties_follow_priority():
    assert outcome_labels([set(), set()], [("a",), ("b",)]) == [("api",), ("api",)]
    outcomes = [set(), {"web"}, {"llm"}]
    assert outcome_labels(outcomes, [("x",)] * 3) == [("web",), ("web",), ("llm",)]
    assert outcome_labels(outcomes, [("x",)] * 3, priority=("llm", "web", "api"))[0] == ("llm",)


def test_outcome_labels_refuse_bad_input():
    with pytest.raises(ValueError, match="mode"):
        outcome_labels([{"api"}], [("a",)], mode="multi")
    with pytest.raises(ValueError, match="not in priority"):
        outcome_labels([{"kg"}], [("a",)])
    with pytest.raises(ValueError, match="1 outcomes for 2 buckets"):
        outcome_labels([{"api"}], [("a",), ("b",)])


def test_majority_label_breaks_ties_by_order():
    assert majority_label(["b", "a", "b"], ["a", "b", "c"]) == "b"
    assert majority_label(["c", "a"], ["a", "b", "c"]) == "a"


# -- the LLM router --------------------------------------------------------------------------------------


def test_the_llm_router_routes_every_question_in_one_batched_call():
    llm = ScriptedLLM(rules=[(r"Query\n.*revenue", "a"), (r"Query\n.*policy", "b) The text paragraphs only"),
                             (r"Query\n.*change", "c")],  # fmt: skip
                      default_reply="I think the table")
    router = LLMRouter(llm, options="tatqa", none_policy="api")
    costs = [Cost() for _ in range(4)]
    decisions = router.route(["What was revenue?", "What is the policy?", "What is the change?", "Who?"], costs)
    assert decisions == [
        RouteDecision(("table",), "a", True),
        RouteDecision(("text",), "b) The text paragraphs", True),  # 4 new tokens at most
        RouteDecision(("table", "text"), "c", True),
        RouteDecision(("abstain",), "I think the table", False),
    ]
    assert len(llm.calls) == 1 and len(llm.calls[0].prompts) == 4
    assert llm.calls[0].params.max_new_tokens == 4 and llm.calls[0].params.temperature == 0
    assert router.parse_failures == 1
    assert all(c.llm_calls == 1 and "route" in c.seconds for c in costs)
    router.route(["Who else?"])
    assert router.parse_failures == 2


def test_the_llm_router_applies_the_none_policy():
    router = LLMRouter(ScriptedLLM(default_reply="d"), options="crag_single", none_policy="abstain")
    assert router.route(["Q?"]) == [RouteDecision(("abstain",), "d", True)]
    with pytest.raises(ValueError, match="none_policy"):
        LLMRouter(ScriptedLLM(), none_policy="web")
    with pytest.raises(ValueError, match="unknown option set"):
        LLMRouter(ScriptedLLM(), options="crag")


# -- routing metrics -------------------------------------------------------------------------------------


def test_routing_metrics_by_hand():
    gold = ["a", "a", "a", "b", "c", "c"]
    pred = ["a", "a", "b", "b", "a", "?"]
    assert accuracy(gold, pred) == pytest.approx(3 / 6)
    scores = class_scores(gold, pred, ["a", "b", "c", "d"])
    assert scores["a"]["f1"] == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))  # P 2/3, R 2/3
    assert scores["b"]["f1"] == pytest.approx(2 / 3)  # P 1/2, R 1
    assert scores["c"]["f1"] == 0.0 and scores["d"]["f1"] is None  # "d" is neither gold nor predicted
    assert macro_f1(gold, pred, ["a", "b", "c", "d"]) == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    assert confusion(gold, pred, ["a", "b", "c"])["c"] == {"a": 1, "b": 0, "c": 0, "other": 1}
    report = routing_report(gold, pred, ["a", "b", "c"])
    assert report["n"] == 6 and report["per_class"]["a"]["support"] == 3
    with pytest.raises(ValueError, match="2 gold labels for 1 predictions"):
        accuracy(["a", "b"], ["a"])
