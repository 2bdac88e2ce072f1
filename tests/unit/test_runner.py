"""The evaluation runner in-process: files and fields, batching, resume, overwrite, refusals that leave the
run directory byte for byte as it was, and metrics computed from the records alone."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest
from hydra.utils import instantiate

from hoprag.data import DataFormatError, QADataset
from hoprag.evaluation.fingerprint import ResumeRefused
from hoprag.evaluation.runner import build, require_method, run, summarize
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, NoRetrieval, StandardRAG
from hoprag.metrics import EvalRow, MetricSuite
from hoprag.retrieval import BM25Retriever

N = 12
RECORD_KEYS = {
    "id", "method", "question", "prediction", "golds", "gold_titles", "gold_passages", "retrieved", "parse_failed",
    "scores", "cost", "stats", "trace",
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
    return run(method, dataset.examples, out, run_info={"dataset": "hotpotqa"}, **kwargs)


def digests(directory) -> dict[str, str]:
    """Every file of the run directory by content, to show a refused rerun changed nothing."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()}


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
    assert records[0]["prediction"] == records[0]["retrieved"][0]["title"]

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
    run(first, dataset.examples[:7], out, batch_size=4)
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
    evaluate(rag(retriever), dataset, tmp_path, fingerprint={"method": {"k": 5}})
    again = rag(retriever)
    evaluate(again, dataset, tmp_path, overwrite=True, fingerprint={"method": {"k": 3}})
    assert asked(again) == N and len(read_lines(tmp_path / "predictions.jsonl")) == N
    assert json.loads((tmp_path / "run_fingerprint.json").read_text()) == {"method": {"k": 3}}


def test_the_run_directory_must_hold_this_runs_questions_and_method(dataset, retriever, tmp_path):
    evaluate(rag(retriever), dataset, tmp_path)
    before = digests(tmp_path)
    with pytest.raises(ResumeRefused, match="2 questions that this run does not ask"):
        run(rag(retriever), dataset.examples[:10], tmp_path)
    closed_book = NoRetrieval(ScriptedLLM(), prompt=PROMPT)
    with pytest.raises(ResumeRefused, match=r"answers of \['standard_rag'\]"):
        run(closed_book, dataset.examples, tmp_path)
    assert digests(tmp_path) == before


def test_a_rerun_with_another_fingerprint_is_refused_and_changes_nothing(dataset, retriever, tmp_path):
    evaluate(rag(retriever), dataset, tmp_path, fingerprint={"method": {"k": 5}, "llm": {"name": "a"}})
    path = tmp_path / "predictions.jsonl"
    text = path.read_text()
    path.write_text(text[: text.rindex("\n", 0, -1) + 40])  # a killed run: the truncated line stays until resumed
    before = digests(tmp_path)
    again = rag(retriever)
    with pytest.raises(ResumeRefused) as refused:
        evaluate(again, dataset, tmp_path, fingerprint={"method": {"k": 3}, "llm": {"name": "a"}})
    assert "method.k: saved 5, requested 3" in str(refused.value) and "llm" not in str(refused.value)
    assert "overwrite=true" in str(refused.value) and "hydra.run.dir" in str(refused.value)
    assert asked(again) == 0 and digests(tmp_path) == before

    evaluate(again, dataset, tmp_path, fingerprint={"method": {"k": 5}, "llm": {"name": "a"}})  # the same: resumes
    assert asked(again) == 1 and len(read_lines(path)) == N


def test_predictions_without_a_fingerprint_or_of_an_older_format_are_refused(dataset, retriever, tmp_path):
    evaluate(rag(retriever), dataset, tmp_path)  # run() without a fingerprint writes none
    before = digests(tmp_path)
    with pytest.raises(ResumeRefused, match="but no run_fingerprint.json"):
        evaluate(rag(retriever), dataset, tmp_path, fingerprint={"method": {"k": 5}})
    path = tmp_path / "predictions.jsonl"
    older = [{k: v for k, v in r.items() if k not in ("gold_titles", "gold_passages")} for r in read_lines(path)]
    path.write_text("".join(json.dumps(r) + "\n" for r in older))
    before = digests(tmp_path)
    with pytest.raises(ResumeRefused, match="12 records of an older format"):
        evaluate(rag(retriever), dataset, tmp_path)
    assert digests(tmp_path) == before


def test_a_crash_midway_keeps_the_last_metrics(dataset, retriever, tmp_path):
    evaluate(rag(retriever), dataset, tmp_path, batch_size=4)
    first_metrics = (tmp_path / "metrics.json").read_bytes()

    class Crashing(StandardRAG):
        def answer(self, examples, costs):
            raise RuntimeError("the LLM server went away")

    crashing = Crashing(ScriptedLLM(), retriever, prompt=PROMPT, k=5)
    more = QADataset("hotpotqa", "hotpotqa/hotpot_dev_distractor_185.json", format="hotpotqa", limit=N + 4)
    with pytest.raises(RuntimeError, match="went away"):
        run(crashing, more.examples, tmp_path)  # a larger limit extends the run, then the method fails
    assert (tmp_path / "metrics.json").read_bytes() == first_metrics
    assert len(read_lines(tmp_path / "predictions.jsonl")) == N

    metrics = run(rag(retriever), more.examples, tmp_path, batch_size=4)
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["run"]["n"] == metrics["n"] == N + 4 and report["run"]["resumed_with"] == N
    assert not list(tmp_path.glob("*.tmp"))


def test_records_carry_what_scoring_needs(dataset, retriever, tmp_path):
    evaluate(rag(retriever), dataset, tmp_path)
    for record, example in zip(read_lines(tmp_path / "predictions.jsonl"), dataset.examples):
        row = EvalRow.from_example(example, record["prediction"])
        assert record["golds"] == row.golds and record["gold_titles"] == example.supporting_titles
        assert record["gold_passages"] == row.gold_passages and len(record["gold_passages"]) >= 2
        passages = [retriever.get(p["id"]) for p in record["retrieved"]]
        assert record["retrieved"] == [{"id": p.id, "title": p.title, "text": p.text} for p in passages]


@pytest.mark.parametrize("passage_match", ["title", "token_overlap"])
def test_metrics_come_from_the_records_alone(dataset, retriever, tmp_path, passage_match):
    suite = MetricSuite(passage_match=passage_match)
    reference = evaluate(rag(retriever), dataset, tmp_path, suite=suite)
    assert reference["retrieval/passage_recall@5"] > 0 and reference["f1"] > 0
    changed = [  # the question file changed on disk since: other golds, no supporting passages
        dataclasses.replace(ex, answers=["zzz"], supporting_titles=[], context=[]) for ex in dataset.examples
    ]
    again = rag(retriever)
    assert without_seconds(run(again, changed, tmp_path, suite=suite)) == without_seconds(reference)
    assert asked(again) == 0


def test_cost_aggregates_every_numeric_figure_of_the_records():
    def record(i: int, cost: dict) -> dict:
        return {
            "id": str(i), "prediction": "Paris", "golds": ["paris"], "gold_titles": [], "gold_passages": [],
            "retrieved": [], "parse_failed": False, "stats": {}, "cost": cost,
        }  # fmt: skip

    records = [
        record(0, {"llm_calls": 2, "truncated_prompts": 1, "seconds": {"answer": 0.5}, "model": "x"}),
        record(1, {"llm_calls": 1, "prompt_tokens_dropped": 30, "seconds": {"answer": 0.25, "retrieval": 0.25}}),
    ]
    metrics = summarize(records, MetricSuite())
    assert metrics["cost/total/llm_calls"] == 3 and metrics["cost/mean/llm_calls"] == 1.5
    assert metrics["cost/total/truncated_prompts"] == 1 and metrics["cost/mean/truncated_prompts"] == 0.5
    assert metrics["cost/mean/prompt_tokens_dropped"] == 15 and "cost/mean/model" not in metrics
    assert metrics["cost/total/seconds/answer"] == 0.75 and metrics["cost/mean/seconds/total"] == 0.5
    assert metrics["em"] == 100.0 and metrics["n"] == 2


def test_duplicate_question_ids_are_an_error(dataset, retriever, tmp_path):
    evaluate(rag(retriever), dataset, tmp_path)
    before = digests(tmp_path)
    with pytest.raises(ValueError, match="1 duplicate question ids"):
        run(rag(retriever), [*dataset.examples[:3], dataset.examples[0]], tmp_path, overwrite=True)
    assert digests(tmp_path) == before


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


def test_no_retrieval_reports_no_retrieval_metrics(dataset, tmp_path):
    method = NoRetrieval(ScriptedLLM(default_reply="yes"), prompt=ChatPrompt("Be brief.", "{question}"))
    metrics = run(method, dataset.examples, tmp_path)
    assert "retrieval/passage_recall" not in metrics and metrics["cost/mean/retrieval_calls"] == 0


def test_build_makes_a_retriever_only_for_methods_that_need_one(compose_cfg):
    base = ["llm=scripted", "limit=3", "retriever=bm25"]
    cfg = compose_cfg("eval", ["+method=no_retrieval", *base, "retriever._target_=no.such.Retriever"])
    dataset = instantiate(cfg.data)
    method = build(cfg, dataset)
    assert isinstance(method, NoRetrieval) and method.retriever is None and len(dataset) == 3

    cfg = compose_cfg("eval", ["+method=standard_rag", *base])
    dataset = instantiate(cfg.data)
    method = build(cfg, dataset)
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


def test_the_methods_run_info_goes_into_metrics_json(dataset, tmp_path):
    class Qualified(NoRetrieval):
        def run_info(self):
            return {"token_count": "exact", "verifier": "scripted"}

    closed_book = Qualified(ScriptedLLM(default_reply="Answer: x"), prompt=ChatPrompt("Answer.", "{question}"))
    run(closed_book, dataset.examples[:2], tmp_path)
    report = json.loads((tmp_path / "metrics.json").read_text())["run"]
    assert report["token_count"] == "exact" and report["verifier"] == "scripted" and report["method"] == "no_retrieval"
