"""Metrics against the official scripts' rules and the specs' hand-computed cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hoprag.data.types import Passage, QAExample
from hoprag.metrics import (
    EvalRow,
    MetricSuite,
    aggregate_passage_recall,
    all_gold_retrieved,
    answer_contains,
    answer_in_top_k,
    answer_recall_at_k,
    evidence_forgetting_rate,
    exact_match,
    f1_score,
    has_answer,
    normalize_answer,
    passage_recall,
    passage_recall_at_k,
    passages_read,
    token_overlap_match,
    token_scores,
)

# --- normalization -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        ("The Beatles", "beatles"),
        ("The Beatles.", "beatles"),
        ("U.S.", "us"),
        ("don't", "dont"),
        ("  New\tYork \n City ", "new york city"),
        ("An apple a day", "apple day"),
        ("theatre another", "theatre another"),  # articles only as whole words
        ("rock-n-roll", "rocknroll"),  # punctuation deleted, not replaced by a space
        ("a.b", "ab"),  # punctuation goes first, so "a.b" is one word and not an article
        ("the", ""),
    ],
)
def test_normalize_answer_official_rules(raw: str, normalized: str) -> None:
    assert normalize_answer(raw) == normalized


@given(st.text())
def test_normalize_answer_is_idempotent(s: str) -> None:
    once = normalize_answer(s)
    assert normalize_answer(once) == once


# --- EM / F1 / acc ---------------------------------------------------------------------------------------


def test_exact_match_normalizes_and_takes_max_over_golds() -> None:
    assert exact_match("The Beatles.", "beatles") == 1.0
    assert exact_match("Paris", ["London", "paris"]) == 1.0
    assert exact_match("Paris, France", ["paris"]) == 0.0


def test_f1_partial_overlap_with_precision_and_recall() -> None:
    # "cat sat" vs "cat sat down": 2 shared tokens, precision 2/2, recall 2/3
    f1, precision, recall = token_scores("the cat sat", "a cat sat down")
    assert (precision, recall) == (1.0, pytest.approx(2 / 3))
    assert f1 == pytest.approx(0.8)
    assert f1_score("the cat sat", "a cat sat down") == pytest.approx(0.8)


def test_f1_counts_repeated_tokens_as_a_bag() -> None:
    # pred "cat cat" vs gold "cat": one shared token, precision 1/2, recall 1
    assert token_scores("cat cat", "cat") == pytest.approx((2 / 3, 0.5, 1.0))


def test_f1_takes_max_over_golds() -> None:
    assert f1_score("cat sat", ["dog", "cat sat down", "cat"]) == pytest.approx(0.8)
    assert f1_score("cat sat", ["dog", "the cat sat"]) == 1.0


def test_f1_yes_no_rule() -> None:
    assert f1_score("yes", "no") == 0.0
    assert f1_score("yes", "yes") == 1.0
    assert f1_score("Yes.", "yes") == 1.0
    # without the rule these would get partial credit for sharing "no"
    assert f1_score("no", "no answer") == 0.0
    assert f1_score("no answer", "no") == 0.0
    assert token_scores("noanswer", "no answer") == (0.0, 0.0, 0.0)
    # "no answer" is not a special string itself
    assert f1_score("no answer", "no answer") == 1.0
    assert f1_score("no answer", "answer") == pytest.approx(2 / 3)


def test_answer_contains_is_flashrag_acc() -> None:
    assert answer_contains("The answer is The Beatles.", "beatles") == 1.0
    assert answer_contains("It is in Paris, France", ["London", "paris"]) == 1.0
    assert answer_contains("Paris", "Paris, France") == 0.0
    assert answer_contains("concatenate", "cat") == 1.0  # a character substring test, as in FlashRAG


def test_empty_prediction_scores_zero() -> None:
    for prediction in ("", "  ", "The."):
        assert exact_match(prediction, "the") == 0.0
        assert token_scores(prediction, "the") == (0.0, 0.0, 0.0)
        assert answer_contains(prediction, ["the", "x"]) == 0.0


def test_gold_normalizing_to_nothing_is_not_contained_everywhere() -> None:
    assert answer_contains("anything", "the") == 0.0
    assert not has_answer("anything at all", "  ")


def test_no_gold_answers_is_an_error() -> None:
    with pytest.raises(ValueError):
        exact_match("x", [])


@given(st.text(), st.lists(st.text(), min_size=1, max_size=3))
def test_em_implies_f1_and_acc(prediction: str, golds: list[str]) -> None:
    f1 = f1_score(prediction, golds)
    assert 0.0 <= f1 <= 1.0
    if exact_match(prediction, golds) == 1.0:
        assert f1 == 1.0
        assert answer_contains(prediction, golds) == 1.0


@given(st.text(), st.text())
def test_f1_is_symmetric_for_one_gold(a: str, b: str) -> None:
    assert f1_score(a, b) == pytest.approx(f1_score(b, a))


# --- gold-passage recall ---------------------------------------------------------------------------------


def test_passage_recall_counts_each_gold_once() -> None:
    assert passage_recall(["A", "A", "C"], ["A", "B"]) == 0.5
    assert passage_recall(["A"], ["A", "A"]) == 1.0  # gold titles are a set
    assert passage_recall_at_k(["C", "A", "B"], ["A", "B"], k=2) == 0.5
    with pytest.raises(ValueError):
        passage_recall(["A"], [])


def test_micro_and_macro_recall_differ() -> None:
    retrieved = [["A", "X"], ["E"], ["Z"]]
    gold = [["A", "B", "C", "D"], ["E"], []]
    recall = aggregate_passage_recall(retrieved, gold)
    assert recall.micro == pytest.approx(2 / 5)  # (1 + 1) / (4 + 1)
    assert recall.macro == pytest.approx((1 / 4 + 1) / 2)
    assert (recall.n_scored, recall.n_without_gold) == (2, 1)
    at_1 = aggregate_passage_recall([["X", "A"], ["E"]], gold[:2], k=1)
    assert (at_1.micro, at_1.macro) == (pytest.approx(1 / 5), pytest.approx(1 / 2))


def test_recall_is_undefined_without_any_gold() -> None:
    recall = aggregate_passage_recall([["A"]], [[]])
    assert (recall.micro, recall.macro, recall.n_without_gold) == (None, None, 1)


@given(st.lists(st.sampled_from("ABCDEF")), st.lists(st.sampled_from("ABCD"), min_size=1))
def test_recall_at_k_never_decreases_with_k(ranked: list[str], gold: list[str]) -> None:
    recalls = [passage_recall_at_k(ranked, gold, k) for k in range(1, len(ranked) + 2)]
    assert recalls == sorted(recalls)


def test_passages_read_counts_distinct_ids() -> None:
    assert passages_read(["p1", "p2", "p1"]) == 2


# --- PruneRAG token-overlap match and EFR ----------------------------------------------------------------


def test_token_overlap_match_threshold() -> None:
    gold = "t0 t1 t2 t3 t4 t5 t6 t7 t8 t9"
    assert token_overlap_match(gold, "t0 t1 t2 t3 t4 t5 t6 t7 other words")  # 80%
    assert not token_overlap_match(gold, "t0 t1 t2 t3 t4 t5 t6 other words")  # 70%
    assert token_overlap_match("a b c d", "a b c")  # exactly 0.75 matches (≥)
    assert not token_overlap_match("a b c d", "a b c", threshold=0.8)


def test_token_overlap_match_is_case_sensitive_and_counts_gold_duplicates() -> None:
    assert not token_overlap_match("Paris France", "paris france")
    # every gold token is present, but 2 distinct shared tokens / 4 gold tokens = 0.5
    assert not token_overlap_match("x x x y", "x y")


def test_all_gold_retrieved() -> None:
    assert all_gold_retrieved(["A", "B", "C"], ["A", "B"])
    assert not all_gold_retrieved(["A", "C"], ["A", "B"])
    texts = ["the cat sat on a mat", "dogs bark loudly at night"]
    assert all_gold_retrieved(texts, ["cat sat on mat", "dogs bark at night"], match=token_overlap_match)
    assert not all_gold_retrieved(texts, ["cat sat on mat", "birds sing"], match=token_overlap_match)


def test_evidence_forgetting_rate_prunerag_example() -> None:
    # (all gold, EM=0), (all gold, EM=1), (not all gold, EM=0)
    efr = evidence_forgetting_rate([True, True, False], [False, True, False])
    assert efr["efr"] == 0.5
    assert efr["forget_rate"] == pytest.approx(1 / 3)
    assert efr["all_gold_retrieved_rate"] == pytest.approx(2 / 3)


def test_efr_undefined_when_no_question_has_all_gold() -> None:
    efr = evidence_forgetting_rate([False, False], [False, True])
    assert efr["efr"] is None
    assert efr["forget_rate"] == 0.0
    with pytest.raises(ValueError):
        evidence_forgetting_rate([True], [True, False])


# --- answer-containment recall ---------------------------------------------------------------------------


def test_has_answer_matches_whole_token_sequences() -> None:
    assert has_answer("I love New York.", "new york")
    assert not has_answer("I love New York.", "york new")
    assert not has_answer("concatenate", "cat")
    assert has_answer("The U.S. army", ["Navy", "U.S."])  # DPR's tokens: u . s . on both sides
    assert not has_answer("The U.S. army", "us")


def test_answer_recall_at_k() -> None:
    passages = [["foo bar", "The Eiffel Tower is in Paris."], ["no luck here", "none"]]
    golds = ["paris", ["Rome"]]
    assert not answer_in_top_k(passages[0], golds[0], k=1)
    assert answer_in_top_k(passages[0], golds[0], k=2)
    assert answer_recall_at_k(passages, golds, k=1) == 0.0
    assert answer_recall_at_k(passages, golds, k=2) == 0.5
    assert answer_recall_at_k(passages, golds) == 0.5


# --- the suite -------------------------------------------------------------------------------------------


def _p(pid: str, title: str, text: str) -> Passage:
    return Passage(id=pid, title=title, text=text)


def test_suite_reports_percent_with_stage_keys() -> None:
    a, b, c = _p("1", "A", "alpha text"), _p("2", "B", "beta is Paris"), _p("3", "C", "gamma")
    rows = [
        # all gold retrieved, wrong answer
        EvalRow("London", ["Paris"], [a, a, b], gold_titles=["A", "B"]),
        # all gold retrieved, right answer
        EvalRow("The Paris.", ["paris"], [b, c], gold_titles=["B"]),
        # one of three gold retrieved, wrong answer
        EvalRow("Rome", ["gamma"], [c], gold_titles=["C", "D", "E"]),
    ]
    out = MetricSuite(ks=[1])(rows)
    assert out["n"] == 3
    assert (out["em"], out["f1"], out["acc"]) == (33.3, 33.3, 33.3)
    assert out["retrieval/passages_read"] == pytest.approx(5 / 3, abs=0.01)  # duplicates count once
    assert out["retrieval/answer_recall"] == 100.0  # "Paris" in b, b, "gamma" in c
    assert out["retrieval/answer_recall@1"] == 66.7
    assert out["retrieval/passage_recall"] == 66.7  # micro (2 + 1 + 1) / (2 + 1 + 3)
    assert out["retrieval/passage_recall_macro"] == 77.8  # (1 + 1 + 1/3) / 3
    assert out["retrieval/passage_recall@1"] == 50.0  # (1 + 1 + 1) / 6
    assert out["retrieval/passage_recall_macro@1"] == 61.1  # (1/2 + 1 + 1/3) / 3
    assert out["retrieval/n_without_gold"] == 0
    assert out["efr"] == 50.0
    assert out["forget_rate"] == 33.3
    assert out["retrieval/all_gold_retrieved"] == 66.7


def test_suite_token_overlap_mode_and_missing_families() -> None:
    passage = _p("1", "Cat", "the cat sat on the mat")
    row = EvalRow("mat", ["mat"], [passage], gold_passages=["cat sat on the mat"])
    out = MetricSuite(ks=[5], passage_match="token_overlap")([row])
    assert out["retrieval/passage_recall@5"] == 100.0
    assert out["efr"] == 0.0
    # title mode has no gold titles here: passage recall and EFR are left out, not reported as 0
    title_out = MetricSuite()([row])
    assert "retrieval/answer_recall@5" in title_out
    assert not any(key.startswith("retrieval/passage_recall") for key in title_out)
    assert "efr" not in title_out
    # nothing retrieved: answer metrics only
    answer_keys = {"n", "em", "f1", "precision", "recall", "acc", "cover_em", "unicode_changed"}
    assert set(MetricSuite()([EvalRow("mat", ["mat"])])) == answer_keys


def test_suite_leaves_efr_out_when_no_question_has_all_gold() -> None:
    row = EvalRow("x", ["x"], [_p("1", "A", "a")], gold_titles=["A", "B"])
    out = MetricSuite()([row])
    assert "efr" not in out
    assert out["forget_rate"] == 0.0


def test_eval_row_from_example() -> None:
    example = QAExample(
        id="q1",
        question="?",
        answers=["Paris", "City of Light"],
        supporting_titles=["A", "B"],
        context=[_p("1", "A", "alpha"), _p("2", "Z", "zeta"), _p("3", "B", "beta")],
    )
    row = EvalRow.from_example(example, "paris")
    assert row.golds == ["Paris", "City of Light"]
    assert row.gold_titles == ["A", "B"]
    assert row.gold_passages == ["alpha", "beta"]


def test_suite_rejects_bad_config() -> None:
    with pytest.raises(ValueError):
        MetricSuite(passage_match="fuzzy")
    with pytest.raises(ValueError):
        MetricSuite(ks=[0])
