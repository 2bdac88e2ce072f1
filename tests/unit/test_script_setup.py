"""`hoprag.scripts`, the set-up the scripts under scripts/ share: batched answering under a clock, the composed
config, the bundled dev sample with BM25 over its own paragraphs, and the benchmarks' ratio report."""

from __future__ import annotations

import json

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.methods import MethodOutput
from hoprag.scripts import (
    answer_timed,
    compose_config,
    framework_bench_parser,
    hotpotqa_dev,
    pooled_bm25,
    report_ratios,
)


class EchoMethod:
    """Answers each question with its id, charging one LLM call per batch to each question of it."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def answer(self, examples: list[QAExample], costs: list[Cost]) -> list[MethodOutput]:
        self.batches.append(len(examples))
        for cost in costs:
            cost.llm_calls += 1
        return [MethodOutput(prediction=ex.id) for ex in examples]


def test_answers_in_the_runners_batches_with_one_cost_record_a_question():
    examples = [QAExample(f"q{i}", f"question {i}", ["x"]) for i in range(5)]
    method = EchoMethod()
    outputs, costs, seconds = answer_timed(method, examples, batch_size=2)
    assert method.batches == [2, 2, 1]
    assert [o.prediction for o in outputs] == ["q0", "q1", "q2", "q3", "q4"]
    assert [c.llm_calls for c in costs] == [1] * 5 and seconds >= 0


def test_configs_compose_one_after_another_as_their_entry_points_compose_them():
    first = compose_config("build_index", ["retriever=bm25"])
    second = compose_config("eval", ["+method=standard_rag", "data=2wiki", "paths.output_dir=/tmp/unused"])
    assert first.retriever._target_ == "hoprag.retrieval.BM25Retriever"
    assert second.data.name == "2wiki" and second.method._target_.endswith("StandardRAG")


def test_the_dev_sample_and_bm25_over_its_own_paragraphs():
    examples = hotpotqa_dev(3).examples
    assert len(examples) == 3 and examples[0].id == hotpotqa_dev().examples[0].id
    retriever = pooled_bm25(examples)
    assert len(retriever.passages) == sum(len(ex.context) for ex in examples)
    (top,) = retriever.search([examples[0].context[0].text], 1)
    assert top[0].passage.text == examples[0].context[0].text


def test_ratios_are_printed_and_written_with_the_other_arguments(tmp_path, capsys):
    out = tmp_path / "bench.json"
    args = framework_bench_parser("A benchmark.\n\nMore.").parse_args(["--questions", "4", "--out", str(out)])
    report_ratios({"node/round": 4.0, "a longer name/round": 1.5}, {"round": {"seconds": 1.0}}, args)
    assert capsys.readouterr().out.splitlines() == [
        "ratio node/round            4.00x",
        "ratio a longer name/round   1.50x",
    ]
    written = json.loads(out.read_text())
    assert written["settings"] == {"questions": 4, "batch_size": 16, "delay": 0.05}
    assert written["ratios"] == {"node/round": 4.0, "a longer name/round": 1.5}

