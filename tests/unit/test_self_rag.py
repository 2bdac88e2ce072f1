"""Self-RAG with the scripted LLM emitting reflection tokens: the retrieve decision, segment scoring, the beam
over segments, batching per step and the counted fallbacks of a model without reflection tokens."""

from __future__ import annotations

import math

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import SelfRAG
from hoprag.methods.base import MissingCapability
from hoprag.retrieval import Hit, Retriever
from hoprag.search.self_rag import DECISION, REFLECTION

A, B = Passage("a", "Alpha", "Paris is the capital."), Passage("b", "Beta", "Lyon is a city.")
ln = math.log


class TwoPassages(Retriever):
    def __init__(self) -> None:
        super().__init__([])
        self.batches: list[list[str]] = []

    def _search(self, queries, k):
        self.batches.append(list(queries))
        return [[Hit(A, 2.0, 1), Hit(B, 1.0, 2)][:k] for _ in queries]


SCORES = {  # (what the prompt holds, emitted token) -> candidate log-probs at that position
    ("Q1?\n\n### Response:\n", None): {"[Retrieval]": ln(0.9), "[No Retrieval]": ln(0.1)},
    ("Q2?\n\n### Response:\n", None): {"[Retrieval]": ln(0.1), "[No Retrieval]": ln(0.9)},
    ("Alpha", "[Relevant]"): {"[Relevant]": ln(0.8), "[Irrelevant]": ln(0.2)},
    ("Beta", "[Irrelevant]"): {"[Relevant]": ln(0.3), "[Irrelevant]": ln(0.7)},
    ("Alpha", "[Fully supported]"): {"[Fully supported]": ln(0.6), "[Partially supported]": ln(0.3),
                                     "[No support / Contradictory]": ln(0.1)},
    ("Beta", "[No support / Contradictory]"): {"[Fully supported]": ln(0.1), "[Partially supported]": ln(0.1),
                                               "[No support / Contradictory]": ln(0.8)},
    ("Alpha", "[Utility:5]"): {f"[Utility:{i}]": ln(p) for i, p in enumerate((0.1, 0.1, 0.1, 0.2, 0.5), 1)},
    ("", "[Retrieval]"): {"[Retrieval]": ln(0.9), "[No Retrieval]": ln(0.1)},
}


def scores(text: str, token: str) -> dict[str, float]:
    last = text.rsplit("<paragraph>", 1)[-1]
    if text.endswith("### Response:\n"):
        return next(s for (key, t), s in SCORES.items() if t is None and text.endswith(key))
    return next((s for (key, t), s in SCORES.items() if t == token and key in last), {})


def segment_llm(rules) -> ScriptedLLM:
    decision = (lambda p: p.endswith("### Response:\n"), "[Retrieval]")
    return ScriptedLLM(rules=[decision, *rules], candidate_scores=scores)


def test_short_form_decides_per_question_and_answers_with_the_best_scored_passage_segment():
    llm = segment_llm([
        (lambda p: p.endswith("[No Retrieval]"), "Berlin", -0.3),
        (lambda p: "Alpha" in p, "[Relevant]Paris[Fully supported][Utility:5]", -0.1),
        (lambda p: "Beta" in p, "[Irrelevant]Lyon[No support / Contradictory]", -2.0),
    ])
    retriever = TwoPassages()
    costs = [Cost(), Cost()]
    one, two = SelfRAG(llm, retriever, k=2).answer([QAExample("1", "Q1?", ["Paris"]), QAExample("2", "Q2?", ["x"])],
                                                     costs)
    decision, skipped, segments = llm.calls
    assert decision.texts == ["### Instruction:\nQ1?\n\n### Response:\n", "### Instruction:\nQ2?\n\n### Response:\n"]
    assert decision.params.max_new_tokens == 1 and decision.params.candidates == DECISION
    assert skipped.texts == ["### Instruction:\nQ2?\n\n### Response:\n[No Retrieval]"]
    assert segments.texts == [
        "### Instruction:\nQ1?\n\n### Response:\n[Retrieval]<paragraph>Alpha\nParis is the capital.</paragraph>",
        "### Instruction:\nQ1?\n\n### Response:\n[Retrieval]<paragraph>Beta\nLyon is a city.</paragraph>",
    ]
    assert segments.params.candidates == REFLECTION and segments.params.keep_special_tokens
    assert retriever.batches == [["Q1?"]]
    # A: exp(-0.1) + 0.8 + (0.6 + 0.5 * 0.3) + 0.5 * (-0.1 - 0.05 + 0.1 + 0.5); B: exp(-2) + 0.3 + 0.15 + 0
    a, b = one.trace["steps"][0]["segments"]
    assert a["score"] == pytest.approx(math.exp(-0.1) + 0.8 + 0.75 + 0.225, abs=1e-4)
    assert b["score"] == pytest.approx(math.exp(-2) + 0.3 + 0.15, abs=1e-4)
    assert (one.prediction, one.trace["path"], [p.id for p in one.retrieved]) == ("Paris", ["a"], ["a", "b"])
    assert one.trace["p_retrieve"] == pytest.approx(0.9) and two.trace["p_retrieve"] == pytest.approx(0.1)
    assert one.stats == {"retrieve": 1.0, "retrieval_calls": 1.0, "depth": 1.0, "segments": 2.0,
                         "unscored_reflections": 0.0, "reflections_not_emitted": 1.0,  # B wrote no utility
                         "max_depth_reached": 0.0, "decision_unscored": 0.0}
    assert (two.prediction, two.retrieved, two.stats["retrieve"], two.parse_failed) == ("Berlin", [], 0.0, False)
    assert [(c.llm_calls, c.retrieval_calls) for c in costs] == [(3, 1), (2, 0)]  # a call per prompt


def test_long_form_beam_expands_only_paths_that_ask_for_retrieval_and_stops_at_max_depth():
    llm = segment_llm([
        (lambda p: "capital[Fully supported]" in p and "Alpha" in p.rsplit("<paragraph>")[-1],
         "[Relevant]of France.[Fully supported][Retrieval]more", -0.1),
        (lambda p: "capital[Fully supported]" in p, "[Irrelevant]No.[No support / Contradictory]", -1.0),
        (lambda p: "Alpha" in p, "[Relevant]Paris is the capital[Fully supported][Retrieval]<paragraph>", -0.1),
        (lambda p: "Beta" in p, "[Irrelevant]Lyon.[No support / Contradictory]", -2.0),
    ])
    method = SelfRAG(llm, TwoPassages(), k=2, max_depth=2, beam_width=2)
    (out,) = method.answer([QAExample("1", "Q1?", ["Paris"])], [Cost()])
    assert [len(c.prompts) for c in llm.calls] == [1, 2, 2]  # decision, depth 1, depth 2 (only path "a")
    assert llm.calls[2].texts[0].endswith(
        "Response:\n[Relevant]Paris is the capital[Fully supported][Retrieval]<paragraph>Alpha\n"
        "Paris is the capital.</paragraph>")
    assert out.trace["path"] == ["a", "a"] and out.prediction == "Paris is the capital of France."
    last = out.trace["steps"][1]["segments"][0]
    assert last["segment"] == "[Relevant]of France.[Fully supported]" and last["retrieve"]  # asks for more
    assert out.stats["max_depth_reached"] == 1.0 and out.stats["depth"] == 2.0 and out.stats["segments"] == 4.0


def test_step_and_question_batching_make_the_same_prompts():
    def run(batching):
        llm = segment_llm([(lambda p: True, "[Relevant]x[Fully supported][Utility:5]", -0.1)])
        SelfRAG(llm, TwoPassages(), k=2, batching=batching).answer(
            [QAExample("1", "Q1?", ["x"]), QAExample("2", "Q1?", ["x"])], [Cost(), Cost()])
        return llm.calls

    step, question = run("step"), run("question")
    assert [len(c.prompts) for c in step] == [2, 4] and len(question) == 6
    assert [t for c in step for t in c.texts] == [t for c in question for t in c.texts]


def test_a_model_without_reflection_tokens_runs_with_every_fallback_counted():
    llm = ScriptedLLM(default_reply="Paris is the capital.", default_logprob=-0.5)  # scores nothing
    (out,) = SelfRAG(llm, TwoPassages(), k=2).answer([QAExample("1", "Q?", ["Paris"])], [Cost()])
    # unscored decision: retrieve (the official -100 for both tokens gives 1/2 > 0.2); relevance unscored per
    # segment, support and utility never emitted; the score is p(segment) alone
    assert out.trace["p_retrieve"] is None and out.trace["retrieve"] is True
    assert out.stats["decision_unscored"] == 1.0
    assert out.stats["unscored_reflections"] == 2.0 and out.stats["reflections_not_emitted"] == 4.0
    assert out.trace["score"] == pytest.approx(math.exp(-0.5)) and out.prediction == "Paris is the capital."


def test_a_backend_without_candidate_logprobs_is_refused_before_any_question():
    class Served(ScriptedLLM):
        candidate_logprobs = False

    with pytest.raises(MissingCapability, match="candidate_logprobs"):
        SelfRAG(Served(), TwoPassages()).check_capabilities()
    with pytest.raises(ValueError, match="batching"):
        SelfRAG(ScriptedLLM(), TwoPassages(), batching="node")


def test_the_config_asks_the_llm_for_the_official_top_5000_logprobs_before_any_call(compose_cfg):
    """vLLM returns the top `max_logprobs` per position only (20 by default): the reflection tokens are read among
    the official 5,000 (run_short_form.py), which the LLM hears of when the method is built."""
    from hydra.utils import instantiate

    class Recording(ScriptedLLM):
        needs: list[int] = []

        def require_top_logprobs(self, n: int) -> None:
            self.needs.append(n)

    llm = Recording()
    instantiate(compose_cfg("eval", ["+method=self_rag"]).method)(llm=llm, retriever=TwoPassages())
    assert llm.needs == [5000] and llm.calls == []
