"""ASQA STR-EM and Disambig-F1, AmbigDocs answer and entity recall (TreeRare digest §5, §9.6), the SQuAD 2.0
span decision of the extractive reader, and the metrics in metrics.json from the prediction records alone."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from hoprag.data import load_questions
from hoprag.evaluation.runner import run, summarize
from hoprag.metrics import EvalRow, MetricSuite, TransformersReader, answer_recall, disambig_f1, entity_recall, str_em
from hoprag.metrics.ambiguous import ambiguity_scores, read_span
from hoprag.paths import PROJECT_ROOT
from tests.fakes import Replies

FIXTURES = PROJECT_ROOT / "tests" / "fixtures"
DUMBLEDORE = {"qa_pairs": [
    {"question": "Who played Dumbledore in the first two films?", "short_answers": ["Richard Harris"]},
    {"question": "Who played Dumbledore after Prisoner of Azkaban?",
     "short_answers": ["Michael Gambon", "Sir Michael Gambon"]},
]}  # fmt: skip
GRISWOLD = {
    "ambiguous_entity": "Griswold House",
    "documents": [
        {"title": "Griswold House (Guilford, Connecticut)", "answer": "east of Guilford Center"},
        {"title": "John N. A. Griswold House", "answer": "76 Bellevue Avenue in Newport, Rhode Island"},
    ],
}
GRISWOLD_BOTH = (
    "The Griswold House in Guilford, Connecticut is east of Guilford Center, while the John N. A. Griswold "
    "House is at 76 Bellevue Avenue in Newport."
)


class FakeReader:
    """Answers each question from a table ("" when absent) and records what it was asked."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], str]] = []

    def __call__(self, questions: list[str], context: str) -> list[str]:
        self.calls.append((questions, context))
        return [self.answers.get(q, "") for q in questions]


def pairs(ambiguity: dict) -> tuple[list[str], list[list[str]]]:
    return [p["question"] for p in ambiguity["qa_pairs"]], [p["short_answers"] for p in ambiguity["qa_pairs"]]


def test_str_em_is_the_share_of_pairs_whose_short_answer_the_long_answer_contains():
    _, answers = pairs(DUMBLEDORE)
    assert str_em("Richard Harris played him first.", answers) == 0.5
    assert str_em("Richard Harris, then Sir Michael Gambon!", answers) == 1.0
    assert str_em("richard harris and michael gambon", answers) == 1.0  # normalized; any short answer counts
    assert str_em("Harris, then Gambon.", answers) == 0.0
    assert str_em("", answers) == 0.0


def test_disambig_f1_reads_the_long_answer_and_takes_the_best_short_answer_per_pair():
    questions, answers = pairs(DUMBLEDORE)
    reader = FakeReader({questions[0]: "Richard Harris", questions[1]: "Gambon"})
    long_answer = "Richard Harris, then Gambon."
    # pair 1: F1 1; pair 2: "gambon" vs "michael gambon" 2/3 (vs "sir michael gambon" only 1/2)
    assert disambig_f1(long_answer, questions, answers, reader) == pytest.approx((1 + 2 / 3) / 2)
    assert reader.calls == [(questions, long_answer)]
    assert disambig_f1("Nobody.", questions, answers, FakeReader({})) == 0.0  # unanswered: ""


def test_disambig_f1_of_an_empty_answer_is_zero_without_asking_the_reader():
    questions, answers = pairs(DUMBLEDORE)
    reader = FakeReader({})
    assert disambig_f1("  ", questions, answers, reader) == 0.0
    assert reader.calls == []


def test_disambig_f1_refuses_a_reader_that_answers_the_wrong_number_of_questions():
    questions, answers = pairs(DUMBLEDORE)
    with pytest.raises(RuntimeError, match="gave 1 answers to 2 questions"):
        disambig_f1("Harris", questions, answers, lambda qs, context: ["Harris"])


def test_answer_recall_is_the_mean_content_token_recall_of_each_documents_answer():
    answers = [d["answer"] for d in GRISWOLD["documents"]]
    # east guilford center: 3/3; 76 bellevue avenue newport (rhode island missing): 4/6 ("in" is a stopword)
    assert answer_recall(GRISWOLD_BOTH, answers) == pytest.approx((1 + 4 / 6) / 2)
    partial = "The one in Guilford is east of Guilford Center; the other is at 76 Bellevue Avenue."
    assert answer_recall(partial, answers) == pytest.approx((1 + 3 / 6) / 2)


def test_answer_recall_keeps_the_scripts_rule_for_answers_that_are_all_stopwords():
    assert answer_recall("No.", ["no"]) == 1.0  # no content tokens on either side
    assert answer_recall("", ["no"]) == 1.0
    assert answer_recall("Yes", ["no"]) == 0.0
    assert answer_recall("", ["Paris"]) == 0.0


def test_entity_recall_drops_parentheses_stopwords_and_the_shared_name():
    titles, entity = [d["title"] for d in GRISWOLD["documents"]], GRISWOLD["ambiguous_entity"]
    # distinguishing tokens: [guilford, connecticut] and [john, n] ("a" is an article)
    assert entity_recall(GRISWOLD_BOTH, titles, entity) == 1.0
    partial = "The one in Guilford is east of Guilford Center; the other is at 76 Bellevue Avenue."
    assert entity_recall(partial, titles, entity) == pytest.approx((1 / 2 + 0) / 2)
    assert entity_recall("", titles, entity) == 0.0


def test_entity_recall_falls_back_to_a_substring_when_the_title_is_the_shared_name():
    titles, entity = ["Michael Jordan", "Michael Jordan (footballer)"], "Michael Jordan (disambiguation)"
    assert entity_recall("Michael Jordan played basketball; the footballer kept goal.", titles, entity) == 1.0
    assert entity_recall("MICHAEL\n  JORDAN played basketball.", titles, entity) == 0.5  # case, whitespace
    assert entity_recall("Jordan played basketball.", titles, entity) == 0.0


def test_ambigdocs_scores_the_first_five_documents_only():
    springfield = load_questions(FIXTURES / "ambigdocs" / "test.json")[3].metadata["ambiguity"]
    assert len(springfield["documents"]) == 6
    sixth = ambiguity_scores("Springfield, Vermont was chartered in 1761.", springfield)
    assert sixth == {"ambigdocs/answer_recall": 0.0, "ambigdocs/entity_recall": 0.0}
    five = "Springfield, Illinois (1840); Massachusetts (1852); Missouri (1838); Ohio (1850); Oregon (1885)."
    assert ambiguity_scores(five, springfield) == {"ambigdocs/answer_recall": 1.0, "ambigdocs/entity_recall": 1.0}


def test_the_suite_averages_each_family_over_the_questions_that_carry_it():
    questions, _ = pairs(DUMBLEDORE)
    rows = [
        EvalRow("Richard Harris played him first.", ["Richard Harris", "Michael Gambon"], ambiguity=DUMBLEDORE),
        EvalRow(GRISWOLD_BOTH, ["east of Guilford Center"], ambiguity=GRISWOLD),
        EvalRow("Paris", ["Paris"]),
    ]
    out = MetricSuite()(rows)
    assert out["n"] == 3 and out["em"] == 33.3
    assert out["asqa/str_em"] == 50.0
    assert out["ambigdocs/answer_recall"] == 83.3 and out["ambigdocs/entity_recall"] == 100.0
    assert "asqa/disambig_f1" not in out  # no reader configured
    assert "asqa/str_em" not in MetricSuite().answer_scores(rows[2])

    reader = FakeReader({questions[0]: "Richard Harris"})
    assert MetricSuite(qa_reader=reader)(rows)["asqa/disambig_f1"] == 50.0
    assert reader.calls == [(questions, rows[0].prediction)]  # the AmbigDocs and plain rows are not read
    assert "asqa/disambig_f1" not in MetricSuite(qa_reader=reader)(rows[1:])


def test_a_reader_named_in_the_config_is_a_lazily_loaded_transformers_reader():
    suite = MetricSuite(qa_reader="deepset/roberta-base-squad2")
    assert suite.qa_reader == TransformersReader("deepset/roberta-base-squad2")
    assert "_loaded" not in vars(suite.qa_reader)  # nothing loaded until it reads


def _window(start: list[float], end: list[float], spans: list) -> tuple:
    return start, end, spans


# tokens: <s> question </s> </s> Paris is big </s>  (context "Paris is big")
SPANS = [None, None, None, None, (0, 5), (6, 8), (9, 12), None]


def test_read_span_takes_the_best_span_unless_no_answer_scores_higher():
    start = [1.0, 9.0, 0, 0, 5.0, 0, 0, 0]  # the question token's high score is outside the context
    end = [1.0, 0, 0, 0, 4.0, 1.0, 0, 0]
    assert read_span([_window(start, end, SPANS)], "Paris is big") == "Paris"
    assert read_span([_window([6.0, *start[1:]], [4.0, *end[1:]], SPANS)], "Paris is big") == ""  # null 10 > 9
    assert read_span([_window([5.0, *start[1:]], [4.0, *end[1:]], SPANS)], "Paris is big") == "Paris"  # a tie


def test_read_span_respects_order_and_length_and_reads_every_window():
    start = [0.0, 0, 0, 0, 5.0, 0, 1.0, 0]
    end = [0.0, 0, 0, 0, 0, 0, 6.0, 0]
    assert read_span([_window(start, end, SPANS)], "Paris is big") == "Paris is big"
    assert read_span([_window(start, end, SPANS)], "Paris is big", max_answer_tokens=2) == "big"  # 1 + 6
    later = _window([0.0, 0, 0, 0, 0, 0, 9.0, 0], [0.0, 0, 0, 0, 0, 0, 9.0, 0], SPANS)
    assert read_span([_window(start, end, SPANS), later], "Paris is big") == "big"
    # no answer is the lowest first-token score over the windows
    assert read_span([_window([20.0] + start[1:], end, SPANS), later], "Paris is big") == "big"


def _word_tokenizer():
    """A real fast tokenizer with a five-token vocabulary, built offline (roberta's pair template)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, "</s>": 1, "<pad>": 2, "<unk>": 3, "Paris": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 1)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_input_names=["input_ids", "attention_mask"],
    )


class PointAtParis:
    """A stand-in QA model: start and end logits peak on the token "Paris"; the first token scores 1 + 1."""

    def __init__(self) -> None:
        import torch

        self.device = torch.device("cpu")
        self.batches: list[int] = []

    def __call__(self, input_ids, attention_mask):
        self.batches.append(len(input_ids))
        logits = (input_ids == 4).float() * 5.0
        logits[:, 0] = 1.0
        return SimpleNamespace(start_logits=logits, end_logits=logits.clone())


def test_the_transformers_reader_windows_the_context_and_maps_spans_back():
    reader = TransformersReader("unused", max_length=16, stride=4, batch_size=2)
    model = PointAtParis()
    reader.__dict__["_loaded"] = (_word_tokenizer(), model)  # what the first call would load
    filler = " ".join(["word"] * 30)
    context = f"{filler} The capital is Paris , of course . {filler}"
    answers = reader(["Which city ?", "What is the capital ?", "Where ?"], context)
    assert answers == ["Paris", "Paris", "Paris"]
    assert sum(model.batches) > 3 and max(model.batches) <= 2  # several windows per question, in batches
    assert reader(["Which city ?"], "No capital named here .") == [""]
    assert reader([], context) == []


def _first_short_answer_if_present(questions: list[str], context: str, table: dict[str, str]) -> list[str]:
    return [table[q] if table[q].lower() in context.lower() else "" for q in questions]


ASQA_REPLIES = {
    "-6497998034447212269": "Richard Harris played Dumbledore in the first two films, and Michael Gambon in the rest.",
    "8542165436721873340": "The Simpsons premiered on December 17, 1989.",
    "-2712356048127931120": "Giannis Antetokounmpo won it.",
}
AMBIGDOCS_REPLIES = {
    "1045": GRISWOLD_BOTH,
    "2210": "In Edna & Harvey: The Breakout you play Edna; in Harvey's New Eyes you play Lilli.",
    "377": "Michael Jordan played basketball.",
    "5123": "Springfield, Vermont was chartered in 1761.",
}


@pytest.mark.parametrize(
    ("questions", "replies", "expected"),
    [
        # STR-EM and Disambig-F1 (1 + 1/2 + 1/3) / 3 each (the fake reader finds exactly the answers named)
        ("asqa/ASQA.json", ASQA_REPLIES, {"asqa/str_em": 61.1, "asqa/disambig_f1": 61.1}),
        # AR (5/6 + 1 + 1/2 + 0) / 4, ER (1 + 1 + 1/2 + 0) / 4
        ("ambigdocs/test.json", AMBIGDOCS_REPLIES, {"ambigdocs/answer_recall": 58.3, "ambigdocs/entity_recall": 62.5}),
    ],
)
def test_metrics_json_reports_the_ambiguous_metrics_from_the_records_alone(tmp_path, questions, replies, expected):
    examples = load_questions(FIXTURES / questions)
    asqa_pairs = [p for ex in examples for p in ex.metadata["ambiguity"].get("qa_pairs", [])]
    table = {p["question"]: p["short_answers"][0] for p in asqa_pairs}
    suite = MetricSuite(qa_reader=lambda qs, context: _first_short_answer_if_present(qs, context, table))
    metrics = run(Replies(replies), examples, tmp_path, suite=suite)
    assert {key: metrics[key] for key in expected} == expected

    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [r["ambiguity"] for r in records] == [ex.metadata["ambiguity"] for ex in examples]
    assert summarize(records, suite) == metrics
    assert json.loads((tmp_path / "metrics.json").read_text())["metrics"] == metrics
    other = {"asqa/str_em", "asqa/disambig_f1", "ambigdocs/answer_recall", "ambigdocs/entity_recall"} - set(expected)
    assert not other & set(metrics)
