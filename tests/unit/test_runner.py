"""The evaluation runner in-process: files and fields, batching, resume, overwrite, and refusals."""

from __future__ import annotations

import json

import pytest
from hydra.utils import instantiate

from hoprag.data import DataFormatError, QADataset
from hoprag.evaluation.runner import build, require_method, run
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, NoRetrieval, StandardRAG
from hoprag.metrics import EvalRow, MetricSuite
from hoprag.retrieval import BM25Retriever

N = 12
RECORD_KEYS = {
    "id", "method", "question", "prediction", "golds", "retrieved", "parse_failed", "scores", "cost", "stats", "trace"
}  # fmt: skip
PROMPT = ChatPrompt("Use the passages.", "{passages}\n\nQuestion: {question}\nAnswer:")


@pytest.fixture(scope="module")
def dataset():
    return QADataset("hotpotqa", "hotpotqa/hotpot_dev_distractor_185.json", format="hotpotqa", limit=N)


@pytest.fixture(scope="module")
def retriever(dataset):
    return BM25Retriever(dataset.corpus())


def rag(retriever, reply_to_question: dict[str, str] | None = None) -> StandardRAG:
    """Answers with the top passage's title, or an empty output (a parse failure) for the given questions."""
    rules = [(q, "", -1.0) for q in reply_to_question or ()]
    llm = ScriptedLLM(rules=[*rules, (r"\[1\] ([^\n]*)", r"Answer: \1", -0.5)])
    return StandardRAG(llm, retriever, prompt=PROMPT, k=5)


def asked(method) -> int:
    return sum(len(call.prompts) for call in method.llm.calls)


def without_seconds(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if "seconds" not in k}


def read_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def evaluate(method, dataset, out, **kwargs):
    info = {"dataset": "hotpotqa"}
    return run(method, dataset.examples, out, passage=method.retriever.get, run_info=info, **kwargs)


def test_run_writes_predictions_and_metrics(dataset, retriever, tmp_path):
    failing = dataset.examples[3].question
    method = rag(retriever, {failing: ""})
    metrics = evaluate(method, dataset, tmp_path, batch_size=5)

    assert [len(call.prompts) for call in method.llm.calls] == [5, 5, 2]  # one LLM call per batch
    records = read_lines(tmp_path / "predictions.jsonl")
    assert [r["id"] for r in records] == [ex.id for ex in dataset.examples]
    suite = MetricSuite()
    for record, example in zip(records, dataset.examples):
        assert set(record) == RECORD_KEYS
        assert record["golds"] == example.answers and len(record["retrieved"]) == 5
        assert record["scores"] == suite.answer_scores(EvalRow(record["prediction"], example.answers))
        assert record["cost"]["llm_calls"] == 1 and record["cost"]["passages_read"] == 5
        assert set(record["cost"]["seconds"]) == {"answer", "retrieval"}
        assert record["trace"]["output"].startswith("Answer: ") or record["question"] == failing
    assert records[3]["parse_failed"] and records[3]["prediction"] == ""
    assert records[0]["prediction"] == retriever.get(records[0]["retrieved"][0]).title

    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["metrics"] == metrics
    assert report["run"]["method"] == "standard_rag" and report["run"]["dataset"] == "hotpotqa"
    assert report["run"]["n"] == N and report["run"]["resumed_with"] == 0
    for key in ("em", "f1", "acc", "retrieval/passage_recall@5", "retrieval/passage_recall_macro@5",
                "retrieval/passages_read", "retrieval/answer_recall@5", "efr", "cost/mean/seconds/total"):
        assert key in metrics, key
    assert metrics["n"] == N and metrics["parse_failures"] == 1 and metrics["parse_failures_pct"] == 8.3
    assert metrics["cost/mean/llm_calls"] == 1 and metrics["cost/total/llm_calls"] == N
    assert metrics["cost/mean/retrieval_calls"] == 1 and metrics["cost/mean/passages_read"] == 5
    tokens = sum(r["cost"]["prompt_tokens"] for r in records)
    assert metrics["cost/total/prompt_tokens"] == tokens
    assert metrics["cost/mean/prompt_tokens"] == round(tokens / N, 2)


def test_resume_after_a_truncated_last_line_matches_an_uninterrupted_run(dataset, retriever, tmp_path):
    reference = evaluate(rag(retriever), dataset, tmp_path / "ref", batch_size=4)

    out = tmp_path / "run"
    out.mkdir()
    first = rag(retriever)
    run(first, dataset.examples[:7], out, batch_size=4, passage=retriever.get)
    path = out / "predictions.jsonl"
    text = path.read_text()
    path.write_text(text[: text.rindex("\n", 0, -1) + 40])  # killed while writing the 7th line

    second = rag(retriever)
    resumed = evaluate(second, dataset, out, batch_size=4)
    assert asked(second) == N - 6  # the 6 whole lines are kept, the 7th question is asked again
    records = read_lines(path)  # every line parses: the file was rewritten cleanly
    assert [r["id"] for r in records] == [ex.id for ex in dataset.examples]
    assert without_seconds(resumed) == without_seconds(reference)
    assert json.loads((out / "metrics.json").read_text())["run"]["resumed_with"] == 6

    third = rag(retriever)
    assert without_seconds(evaluate(third, dataset, out)) == without_seconds(reference)
    assert asked(third) == 0 and len(read_lines(path)) == N  # a finished run asks nothing


def test_overwrite_starts_afresh(dataset, retriever, tmp_path):
    evaluate(rag(retriever), dataset, tmp_path)
    again = rag(retriever)
    evaluate(again, dataset, tmp_path, overwrite=True)
    assert asked(again) == N and len(read_lines(tmp_path / "predictions.jsonl")) == N


def test_the_run_directory_must_hold_this_runs_questions_and_method(dataset, retriever, tmp_path):
    evaluate(rag(retriever), dataset, tmp_path)
    with pytest.raises(ValueError, match="2 questions that this run does not ask"):
        run(rag(retriever), dataset.examples[:10], tmp_path, passage=retriever.get)
    closed_book = NoRetrieval(ScriptedLLM(), prompt=PROMPT)
    with pytest.raises(ValueError, match=r"answers of \['standard_rag'\]"):
        run(closed_book, dataset.examples, tmp_path)


def test_duplicate_question_ids_are_an_error(dataset, retriever, tmp_path):
    with pytest.raises(ValueError, match="1 duplicate question ids"):
        run(rag(retriever), [*dataset.examples[:3], dataset.examples[0]], tmp_path)


@pytest.mark.parametrize(
    ("damage", "message"),
    [(lambda lines: [lines[0][:20], *lines[1:]], "line 1: not JSON"), (lambda lines: [*lines, lines[0]], "twice")],
    ids=["broken-first-line", "id-twice"],
)
def test_damage_other_than_a_truncated_last_line_is_an_error(dataset, retriever, tmp_path, damage, message):
    evaluate(rag(retriever), dataset, tmp_path)
    path = tmp_path / "predictions.jsonl"
    path.write_text("\n".join(damage(path.read_text().splitlines())) + "\n")
    with pytest.raises(DataFormatError, match=message):
        evaluate(rag(retriever), dataset, tmp_path)


def test_no_retrieval_needs_no_passage_lookup(dataset, tmp_path):
    method = NoRetrieval(ScriptedLLM(default_reply="yes"), prompt=ChatPrompt("Be brief.", "{question}"))
    metrics = run(method, dataset.examples, tmp_path)
    assert "retrieval/passage_recall" not in metrics and metrics["cost/mean/retrieval_calls"] == 0


def test_build_makes_a_retriever_only_for_methods_that_need_one(compose_cfg):
    base = ["llm=scripted", "limit=3", "retriever=bm25"]
    cfg = compose_cfg("eval", ["+method=no_retrieval", *base, "retriever._target_=no.such.Retriever"])
    dataset, method = build(cfg)
    assert isinstance(method, NoRetrieval) and method.retriever is None and len(dataset) == 3

    cfg = compose_cfg("eval", ["+method=standard_rag", *base])
    dataset, method = build(cfg)
    assert isinstance(method.retriever, BM25Retriever) and method.retriever.passages == dataset.corpus()
    assert isinstance(method.llm, ScriptedLLM) and method.k == 5
    assert instantiate(cfg.metrics) == MetricSuite(ks=[5])


def test_without_a_method_the_run_stops_with_the_choices(compose_cfg):
    with pytest.raises(SystemExit, match=r"choose a method: \+method=\{[\w,]*no_retrieval,[\w,]*standard_rag"):
        require_method(compose_cfg("eval", ["llm=scripted"]))


def test_method_stats_are_recorded_and_averaged_over_the_questions_reporting_them(dataset, tmp_path):
    class Counting(NoRetrieval):
        def answer(self, examples, costs):
            outputs = super().answer(examples, costs)
            for i, output in enumerate(outputs):
                output.stats = {"nodes": i + 1} if i % 2 == 0 else {}
            return outputs

    method = Counting(ScriptedLLM(default_reply="Answer: x"), prompt=ChatPrompt("Answer.", "{question}"))
    metrics = run(method, dataset.examples[:4], tmp_path, batch_size=4)
    lines = read_lines(tmp_path / "predictions.jsonl")
    assert [line["stats"] for line in lines] == [{"nodes": 1}, {}, {"nodes": 3}, {}]
    assert metrics["method/nodes"] == 2.0
