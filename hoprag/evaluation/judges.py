"""The judges that decide CRAG answers which are neither missing nor an exact match (`hoprag.metrics.crag`
scores their replies): `LLMJudge`, CRAG's judge (GPT-3.5-Turbo at temperature 0 in the paper) on any
`hoprag.llm.LLM`, and `NormalizedMatchJudge`, an offline aid. Either goes in `metrics.crag_judge`, or in a
source router's outcome labeller."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from hoprag.metrics.answer import normalize_answer
from hoprag.metrics.crag import RULE_MARK, JudgeItem

if TYPE_CHECKING:
    from hoprag.llm.base import LLM

JUDGE_INSTRUCTIONS = """\
You grade answers to questions. You see a question, the ground-truth answers and a model's prediction. \
Decide whether the prediction matches at least one of the ground-truth answers.
Rules:
1. If the prediction states the same fact as a ground-truth answer (other wording, units or formats are \
fine), "Accuracy" is "True"; otherwise it is "False".
2. If the prediction says it cannot answer, does not know, or lacks the information, "Accuracy" is "False".
3. If a ground-truth answer is "invalid question", "Accuracy" is "True" only when the prediction is \
exactly "invalid question".
Reply with one JSON object and nothing else: {"Accuracy": "True"} or {"Accuracy": "False"}.

Examples:
Question: how long is the theatrical cut of the film the shining?
Ground truth: ["146 minutes"]
Prediction: 8760 seconds
{"Accuracy": "True"}

Question: who wrote the novel one hundred years of solitude?
Ground truth: ["gabriel garcia marquez"]
Prediction: mario vargas llosa
{"Accuracy": "False"}

Question: what was the closing price of the dow jones on the last trading day of 2023?
Ground truth: ["37,689.54 points"]
Prediction: i don't know, the references do not give that price
{"Accuracy": "False"}"""


class NormalizedMatchJudge:
    """An offline aid, not CRAG's judge: correct when the prediction equals a gold after SQuAD normalisation
    (case, punctuation, articles, spaces), so "Universal Pictures." matches "universal pictures". No
    paraphrase, unit or format is recognised. Its replies carry `RULE_MARK`, so a run's `crag/rule_judged`
    says how many answers it decided."""

    def __call__(self, items: list[JudgeItem]) -> list[str]:
        replies = []
        for _, golds, prediction in items:
            match = normalize_answer(prediction) in {normalize_answer(g) for g in golds}
            replies.append(f'{{"accuracy": {json.dumps(match)}, {RULE_MARK}}}')
        return replies


JUDGE_QUERY = "Question: {question}\nGround truth: {golds}\nPrediction: {prediction}"


class LLMJudge:
    """CRAG's judge on a `hoprag.llm.LLM`: the instructions and three worked examples above (ours, after
    CRAG's: a unit conversion is correct, a wrong author and an "I don't know" are not), one chat prompt
    per item, all sent in one batched `generate`. `generation` overrides the LLM's sampling (greedy and a
    short reply by default, as the paper's temperature-0 judge)."""

    def __init__(self, llm: LLM, generation: Mapping[str, Any] | None = None) -> None:
        self.llm = llm
        self.generation = {"temperature": 0.0, "max_new_tokens": 32, **(generation or {})}

    def prompt(self, question: str, golds: Sequence[str], prediction: str) -> list[dict[str, str]]:
        query = JUDGE_QUERY.format(question=question, golds=json.dumps(list(golds)), prediction=prediction)
        return [{"role": "system", "content": JUDGE_INSTRUCTIONS}, {"role": "user", "content": query}]

    def __call__(self, items: list[JudgeItem]) -> list[str]:
        prompts = [self.prompt(*item) for item in items]
        return [g[0].text for g in self.llm.generate(prompts, stage="judge", **self.generation)]
