"""TreeRare's COVER-EM: the dataset's single answer string, normalized, inside the normalized prediction;
aliases only behind `cover_em_aliases` (its digest §5 and §7 item 9)."""

from __future__ import annotations

from hydra.utils import instantiate

from hoprag.metrics import EvalRow, MetricSuite, answer_contains, cover_em


def test_the_gold_string_must_occur_in_the_prediction_after_normalization():
    assert cover_em("The answer is Simply Red.", "Simply Red") == 1.0
    assert cover_em("The answer is Simply Red.", "Red Simply") == 0.0
    assert cover_em("It was THE BAND simply-red!", ["the Simply Red"]) == 0.0  # "simplyred": punctuation is deleted
    assert cover_em("simply red, of course", ["The Simply Red"]) == 1.0  # case, articles, punctuation
    assert cover_em("", ["Simply Red"]) == 0.0


def test_only_the_first_gold_counts_unless_aliases_are_asked_for():
    golds = ["Simply Red", "Mick Hucknall's band"]
    prediction = "It was Mick Hucknall's band."
    assert cover_em(prediction, golds) == 0.0
    assert cover_em(prediction, golds, aliases=True) == 1.0
    assert answer_contains(prediction, golds) == 1.0  # FlashRAG acc always takes the aliases


def test_the_suite_reports_cover_em_per_question_and_in_percent():
    rows = [
        EvalRow("The answer is Simply Red.", ["Simply Red", "Hucknall"]),
        EvalRow("Hucknall's band", ["Simply Red", "Hucknall"]),
    ]
    assert MetricSuite().answer_scores(rows[1])["cover_em"] == 0.0
    assert MetricSuite()(rows)["cover_em"] == 50.0
    assert MetricSuite(cover_em_aliases=True)(rows)["cover_em"] == 100.0
    assert MetricSuite()(rows)["acc"] == 100.0


def test_eval_config_defaults_to_the_single_gold(compose_cfg):
    cfg = compose_cfg("eval")
    assert cfg.metrics.cover_em_aliases is False and cfg.metrics.qa_reader is None
    assert instantiate(cfg.metrics) == MetricSuite()
    assert instantiate(compose_cfg("eval", ["metrics.cover_em_aliases=true"]).metrics).cover_em_aliases is True
