"""Silent changes to a number (issue 44, items 4, 6 and 7): text that looks equal scores equal and the
difference is counted, `answer_recall@k` is DPR's token rule with FlashRAG's substring rule under FlashRAG's
name beside it, and CRAG's official scorer rules are offered by a setting that metrics.json names."""

from __future__ import annotations

import json
import unicodedata

import pytest
from hydra.utils import instantiate

from hoprag.data import QADataset
from hoprag.data.types import Passage
from hoprag.evaluation.runner import run
from hoprag.metrics import (
    EvalRow,
    MetricSuite,
    answer_recall_at_k,
    contains_answer_string,
    crag_outcomes,
    dpr_tokens,
    exact_match,
    f1_score,
    has_answer,
    official_normalize,
    retrieval_recall_top_k,
    unicode_changed,
)
from hoprag.metrics.crag import CORRECT, HALLUCINATION, MISSING, OFFICIAL, RULES, summary
from tests.fakes import Replies

NFD_CORDOBA = unicodedata.normalize("NFD", "Córdoba")
RLM, ZWSP = "\u200f", "\u200b"


# -- item 4: Unicode that looks equal ---------------------------------------------------------------------


def test_text_that_looks_equal_scores_equal():
    cases = [(NFD_CORDOBA, "Córdoba"), (f"{RLM}Cairo{RLM}", "Cairo"), ("Cairo", f"Cai{ZWSP}ro")]
    for prediction, gold in cases:
        assert exact_match(prediction, gold) == 1.0 and f1_score(prediction, gold) == 1.0
        assert exact_match(prediction, gold, official_normalize) == 0.0  # what the official scripts give
        assert unicode_changed(prediction, [gold])
    assert not unicode_changed(NFD_CORDOBA, ["Sevilla"])  # cleaned or not, a wrong answer scores 0


def test_the_suite_counts_the_questions_whose_scores_the_cleaning_changed():
    rows = [EvalRow(NFD_CORDOBA, ["Córdoba"]), EvalRow("Paris", ["Paris"]), EvalRow(NFD_CORDOBA, ["Sevilla"])]
    out = MetricSuite()(rows)
    assert out["em"] == 66.7 and out["unicode_changed"] == 1
    assert MetricSuite()([EvalRow("Paris", ["Paris"])])["unicode_changed"] == 0


# -- item 6: answer recall's rule, and FlashRAG's beside it --------------------------------------------------


def test_answer_recall_tokenises_as_dpr():
    assert dpr_tokens("Polish-Jewish U.S. café") == ["polish", "-", "jewish", "u", ".", "s", ".", "cafe\u0301"]
    assert has_answer("a Polish-Jewish family", "Jewish")  # was glued into "polishjewish"
    assert has_answer("born in Córdoba", NFD_CORDOBA)  # both sides NFD, as DPR's
    assert not has_answer("4884 m high", "4,884 m")
    assert not has_answer("sailing north", "no")


def test_flashrag_recall_is_its_substring_rule_under_its_own_name():
    assert contains_answer_string("sailing north", "no") and contains_answer_string("concatenate", "cat")
    texts, golds = [["sailing north", "Paris"], ["a Polish-Jewish family"]], [["no"], ["Jewish"]]
    assert retrieval_recall_top_k(texts, golds, 1) == 1.0
    assert answer_recall_at_k(texts, golds, 1) == 0.5
    rows = [EvalRow("x", ["no"], [Passage("1", "Sea", "sailing north")])]
    out = MetricSuite(ks=[1])(rows)
    assert out["retrieval/answer_recall@1"] == 0.0 and out["retrieval/retrieval_recall_top1"] == 100.0


# -- item 7: CRAG's official rules ------------------------------------------------------------------------


class WordTokenizer:
    """A stand-in for the Llama 2 tokenizer: a BOS (id 0), then one token a word."""

    def __init__(self) -> None:
        self.words = ["<s>"]

    def encode(self, text: str) -> list[int]:
        for word in text.split():
            if word not in self.words:
                self.words.append(word)
        return [0, *(self.words.index(word) for word in text.split())]

    def decode(self, ids: list[int]) -> str:
        return " ".join(self.words[i] for i in ids)


class AskedJudge:
    name = "asked"

    def __init__(self) -> None:
        self.items: list = []

    def __call__(self, items):
        self.items += items
        return ['{"accuracy": false}'] * len(items)


def test_official_rules_trim_to_75_tokens_before_looking_for_i_dont_know():
    late = " ".join(["word"] * 75) + " I don't know"
    assert crag_outcomes([("q?", ["paris"], late)]) == [(MISSING, None)]
    judge = AskedJudge()
    outcomes = crag_outcomes([("q?", ["paris"], late)], judge, OFFICIAL, WordTokenizer())
    assert outcomes == [(HALLUCINATION, '{"accuracy": false}')]
    assert judge.items == [("q?", ["paris"], " ".join(["word"] * 75))]  # the judge sees the trimmed text
    with pytest.raises(ValueError, match="tokenizer"):
        crag_outcomes([("q?", ["paris"], late)], judge, OFFICIAL)


def test_official_rules_decide_invalid_on_both_sides_without_the_judge():
    items = [
        ("q?", ["invalid question"], "This is an invalid question."),  # both: correct
        ("q?", ["paris"], "invalid question"),  # the prediction only: hallucination
        ("q?", ["invalid question"], "Paris"),  # the gold only: hallucination
        ("q?", ["invalid question", "paris"], "Paris!"),  # the judge, about the gold without "invalid"
    ]
    judge = AskedJudge()
    outcomes = crag_outcomes(items, judge, OFFICIAL, WordTokenizer())
    assert outcomes[:3] == [(CORRECT, None), (HALLUCINATION, None), (HALLUCINATION, None)]
    assert judge.items == [("q?", ["paris"], "Paris!")]
    pruningrag = AskedJudge()
    crag_outcomes(items, pruningrag)
    assert len(pruningrag.items) == 4  # PruningRAG's evaluator asks its judge about all four


def test_metrics_json_names_the_rules_that_scored_the_run(tmp_path, compose_cfg):
    crag = QADataset("crag", "crag/crag_task1_dev_10.jsonl.bz2", format="crag")
    examples = crag.examples[4:5]  # a false-premise question whose gold does not say "invalid"
    method = Replies({examples[0].id: "invalid question"})
    judge = AskedJudge()
    suite = MetricSuite(crag_judge=judge, crag_rules=OFFICIAL, crag_tokenizer=WordTokenizer())
    metrics = run(method, examples, tmp_path / "official", suite=suite)
    assert judge.items == [] and metrics["crag/unjudged"] == 1 and metrics["crag/hall@asked"] == 100.0
    report = json.loads((tmp_path / "official" / "metrics.json").read_text())
    assert report["run"]["crag_rules"] == OFFICIAL
    record = json.loads((tmp_path / "official" / "predictions.jsonl").read_text())
    assert record["crag"]["rules"] == OFFICIAL

    run(method, examples, tmp_path / "default", suite=MetricSuite(crag_judge=judge))
    assert len(judge.items) == 1  # PruningRAG's rules, the default, ask the judge
    assert json.loads((tmp_path / "default" / "metrics.json").read_text())["run"]["crag_rules"] == "pruningrag"
    assert instantiate(compose_cfg("eval", ["data=crag"]).metrics).crag_rules == "pruningrag"


def test_records_scored_by_several_rules_are_refused():
    entries = [{"outcome": CORRECT, "judge_reply": None, "judge": "exact", "rules": rules} for rules in RULES]
    with pytest.raises(ValueError, match="several rules"):
        summary(entries)

