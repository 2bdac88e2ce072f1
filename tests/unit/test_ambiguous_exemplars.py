"""Few-shot CoT exemplars for ASQA and AmbigDocs: three each in TreeRare's long-form answer form, every
interpretation's gold answer in the long answer, their questions never among the evaluated ones (the data configs
leave them out and count them), and rendered by few-shot ambiguous CoT, SC and ToT prompts."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from hoprag.cost import Cost
from hoprag.data import QADataset
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import CoT, SelfConsistency, ToT
from hoprag.paths import PROJECT_ROOT
from hoprag.search.cot import ANSWER_LINES
from hoprag.search.cot_exemplars import EXEMPLARS, LongFormExemplar, exemplars_for
from tests.fakes import KeywordRetriever

AMBIGUOUS = ("asqa", "ambigdocs")
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CORPUS = [Passage("p1", "Griswold House", "The Griswold House is in Guilford.")]
QUESTION = QAExample("q", "Where is the Griswold House?", ["Guilford"])


def data_config(name: str):
    return OmegaConf.load(PROJECT_ROOT / "conf" / "data" / f"{name}.yaml")


@pytest.mark.parametrize("name", AMBIGUOUS)
def test_three_long_form_exemplars_each_naming_its_record_and_holding_every_gold_answer(name):
    shots = exemplars_for(name)
    assert len(shots) == 3 and len({e.question for e in shots}) == 3
    for e in shots:
        assert isinstance(e, LongFormExemplar) and e.source and len(e.steps) >= 2
        assert len(e.gold) >= 2  # an ambiguous question: two interpretations or more
        assert all(any(a.lower() in e.answer.lower() for a in accepted) for accepted in e.gold), e.question
        assert e.explained() == f"#Explanations: {' '.join(e.steps)}\n#FINAL: {e.answer}"


@pytest.mark.parametrize("name", AMBIGUOUS)
def test_the_exemplars_questions_are_left_out_of_the_evaluated_split(name):
    cfg = data_config(name)
    assert sorted(cfg.exclude_questions) == sorted(e.question for e in EXEMPLARS[name])
    if name == "asqa":  # ASQA's file holds train and dev: the table evaluates dev, the exemplars name train
        assert cfg.split == "dev" and not any(e.source.startswith("dev") for e in EXEMPLARS[name])


def test_exemplar_questions_in_the_file_are_excluded_and_counted():
    path = FIXTURES / "ambigdocs" / "test.json"  # holds the Griswold House and Edna & Harvey records
    excluded = data_config("ambigdocs").exclude_questions
    kept = QADataset("ambigdocs", str(path), format="ambigdocs", exclude_questions=excluded)
    everything = QADataset("ambigdocs", str(path), format="ambigdocs")
    assert len(kept) == len(everything) - 2 == 2 and kept.exemplars_excluded == 2  # counted as they are read
    assert not {ex.question for ex in kept} & {e.question for e in EXEMPLARS["ambigdocs"]}
    sampled = QADataset("ambigdocs", str(path), format="ambigdocs", sample=2,
                        exclude_questions=["WHAT is the location of   the Griswold House?"])  # fmt: skip
    assert len(sampled) == 2 and sampled.exemplars_excluded == 1  # left out before the draw, up to case and spacing


@pytest.mark.parametrize("method", [CoT, SelfConsistency])
@pytest.mark.parametrize("name", AMBIGUOUS)
def test_a_few_shot_ambiguous_prompt_shows_the_exemplars_long_answers(method, name):
    llm = ScriptedLLM()
    extra = {"samples": 2, "generation": {"temperature": 0.7}} if method is SelfConsistency else {}
    cot = method(llm, KeywordRetriever(CORPUS), mode="few_shot", exemplars=name, task="ambiguous", k=1, **extra)
    cot.answer([QUESTION], [Cost()])
    system = llm.calls[0].prompts[0][0]["content"]
    assert ANSWER_LINES["ambiguous"] in system and "The answer is <a short answer" not in system
    for e in EXEMPLARS[name]:
        assert f"Question: {e.question}\nAnswer: {e.explained()}" in system


def test_the_long_form_exemplars_need_the_ambiguous_task():
    with pytest.raises(ValueError, match="set method.task=ambiguous"):
        CoT(ScriptedLLM(), KeywordRetriever(CORPUS), mode="few_shot", exemplars="asqa")


def test_a_few_shot_ambiguous_tot_prompt_ends_each_exemplar_with_its_long_answer():
    llm = ScriptedLLM()
    tot = ToT(llm, KeywordRetriever(CORPUS), depth=1, branching=1, breadth=1, evaluations=1, mode="few_shot",
              exemplars="ambigdocs", task="ambiguous", k=1)  # fmt: skip
    tot.answer([QUESTION], [Cost()])
    text = llm.calls[0].texts[0]  # the one step is the last: the final line is asked for
    for e in EXEMPLARS["ambigdocs"]:
        assert f"{len(e.steps) + 1}. #FINAL: {e.answer}" in text
    assert text.endswith(f"Write the final line now:\n{ANSWER_LINES['ambiguous']}\nFinal answer:")
