"""AP, CR and Sup (spec §8.2) with a scripted verifier: the label rules, the averages, cited vs whole context."""

from __future__ import annotations

import pytest

from hoprag.data.types import Passage
from hoprag.verifiers import NLIScores, ScriptedVerifier
from hoprag.verifiers.faithfulness import Answered, FaithfulnessScorer, claim_label
from hoprag.verifiers.reward import EvidenceExtractor

CONTEXT = (
    Passage("p1", "Paris", "Paris is the capital of France. It lies on the Seine."),
    Passage("p2", "Lyon", "Lyon is a city in France. Lyon is known for food."),
)
QUESTION = "What is the capital of France?"


def scorer(rules, default=(0.1, 0.8, 0.1)):
    verifier = ScriptedVerifier(rules=rules, default=default)
    return FaithfulnessScorer(verifier, EvidenceExtractor()), verifier


def test_claim_label_prefers_entailment_then_contradiction():
    ent, neu, con = NLIScores(0.8, 0.1, 0.1), NLIScores(0.2, 0.7, 0.1), NLIScores(0.1, 0.2, 0.7)
    assert claim_label([con, neu, ent]) == "supported"
    assert claim_label([neu, con]) == "contradicted"
    assert claim_label([neu, neu]) == "neutral"
    assert claim_label([]) == "neutral"


def test_all_claims_entailed_give_ap_and_sup_one_and_cr_zero():
    faith, _ = scorer([], default=(0.9, 0.05, 0.05))
    [result] = faith([Answered(QUESTION, "Paris", "Paris is a city. It is the capital.", CONTEXT)])
    assert (result.attribution_precision, result.contradiction_rate, result.support) == (1.0, 0.0, 1.0)
    assert result.labels == ("supported",) * 3


def test_mixed_labels_are_averaged_per_answer():
    rules = [
        ("capital of France", "is Paris", (0.9, 0.05, 0.05)),  # "Paris" is entailed by one premise
        (".", "Berlin", (0.05, 0.05, 0.9)),  # the Berlin claim is contradicted everywhere
    ]
    faith, verifier = scorer(rules)
    answers = [
        Answered(QUESTION, "Paris", "Berlin is nearby. Trains are fast.", CONTEXT),
        Answered(QUESTION, "Lyon", "", CONTEXT),
    ]
    first, second = faith(answers)
    assert first.labels == ("contradicted", "neutral", "supported")
    assert first.attribution_precision == pytest.approx(1 / 3) and first.contradiction_rate == pytest.approx(1 / 3)
    assert first.support == 0.0  # not every claim is entailed
    assert (second.attribution_precision, second.contradiction_rate, second.support) == (0.0, 0.0, 0.0)
    assert verifier.calls == 1
    for r in (first, second):
        assert 0 <= r.attribution_precision + r.contradiction_rate <= 1


def test_support_reads_only_the_cited_passages_when_there_are_any():
    faith, _ = scorer([("Lyon is known for food", "answer to", (0.9, 0.05, 0.05))])
    whole = faith([Answered(QUESTION, "Lyon", "", CONTEXT)])[0]
    cited_paris = faith([Answered(QUESTION, "Lyon", "", CONTEXT, cited=CONTEXT[:1])])[0]
    cited_lyon = faith([Answered(QUESTION, "Lyon", "", CONTEXT, cited=CONTEXT[1:])])[0]
    assert (whole.support, cited_paris.support, cited_lyon.support) == (1.0, 0.0, 1.0)
    assert whole.stats() == {"attribution_precision": 1.0, "contradiction_rate": 0.0, "support": 1.0}
    assert whole.pairs == 1 * (4 + 4)  # one claim x (4 evidence sentences + 4 context sentences)
