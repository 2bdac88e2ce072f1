"""The NLI reward (Eq. 2): sentences, claims, evidence extraction and the aggregation, against hand computation."""

from __future__ import annotations

import numpy as np
import pytest

from hoprag.data.types import Passage
from hoprag.verifiers import ScriptedVerifier
from hoprag.verifiers.reward import Candidate, EvidenceExtractor, NLIReward, answer_claims, split_sentences

CONTEXT = (
    Passage("p1", "Paris", "Paris is the capital of France. It lies on the Seine. The city has many museums."),
    Passage("p2", "Lyon", "Lyon is a city in France. It is known for food."),
)


def candidate(answer="Paris", reasoning="", raw="", passages=CONTEXT, question="What is the capital of France?"):
    return Candidate(question, answer, reasoning, raw or answer, passages)


def test_split_sentences_keeps_initials_and_abbreviations_whole():
    text = "J. K. Rowling wrote it in St. Louis. Mr. Smith said no! Did he? yes he did.\nNew line here"
    assert split_sentences(text) == [
        "J. K. Rowling wrote it in St. Louis.",
        "Mr. Smith said no!",
        "Did he? yes he did.",
        "New line here",
    ]
    assert split_sentences("北京是首都。上海很大。") == ["北京是首都。", "上海很大。"]
    assert split_sentences("A one. B two. C three.", limit=2) == ["A one.", "B two."]
    assert split_sentences("  ") == []


def test_claims_are_reasoning_sentences_then_the_declarative_answer():
    claims = answer_claims("Who wrote Hamlet", "Shakespeare", "Hamlet is a play. Shakespeare wrote it.")
    assert claims == ["Hamlet is a play.", "Shakespeare wrote it.", 'The answer to "Who wrote Hamlet?" is Shakespeare.']
    assert answer_claims("Q?", "x") == ['The answer to "Q?" is x.']


@pytest.mark.parametrize(
    "scores, expected", [((1, 0, 0), 1.0), ((0, 0, 1), -2.0), ((0, 1, 0), -0.2), ((0.5, 0.3, 0.2), 0.5 - 0.06 - 0.4)]
)
def test_uniform_nli_scores_give_the_weighted_sum(scores, expected):
    reward = NLIReward(ScriptedVerifier(default=scores), EvidenceExtractor())
    [result] = reward([candidate(reasoning="Paris is in France. It is the capital.")])
    assert result.value == pytest.approx(expected)
    assert len(result.claims) == 3 and len(result.evidence) == 5 and result.pairs == 15


def test_eq2_takes_the_max_over_evidence_then_the_mean_over_sentences():
    verifier = ScriptedVerifier(
        rules=[
            ("capital of France", "answer to", (0.9, 0.1, 0.0)),  # 0.9 - 0.02 = 0.88
            ("Seine", "answer to", (0.1, 0.2, 0.7)),  # 0.1 - 0.04 - 1.4 = -1.34
            ("capital of France", "museum", (0.0, 0.2, 0.8)),  # -0.04 - 1.6 = -1.64
            ("museums", "museum", (0.6, 0.4, 0.0)),  # 0.6 - 0.08 = 0.52
        ],
        default=(0.0, 0.0, 1.0),  # -2
    )
    evidence = EvidenceExtractor(per_passage=3, total=3)
    context = CONTEXT[:1]
    reward = NLIReward(verifier, evidence)
    [result] = reward([candidate(reasoning="Paris has a museum.", passages=context)])
    assert set(result.evidence) == {s for s in split_sentences(context[0].text)}
    # claim 1 "Paris has a museum.": max(-1.64, -2, 0.52) = 0.52; claim 2 (answer): max(0.88, -1.34, -2) = 0.88
    assert result.value == pytest.approx((0.52 + 0.88) / 2)

    official = NLIReward(verifier, evidence, aggregation="official")
    [result] = official([candidate(raw="the answer to it is Paris", reasoning="ignored", passages=context)])
    assert result.claims == ("the answer to it is Paris",)
    assert result.value == pytest.approx((0.88 - 1.34 - 2.0) / 3)  # mean over evidence, one raw hypothesis


def test_no_evidence_counts_as_neutral_and_bad_settings_are_refused():
    reward = NLIReward(ScriptedVerifier(default=(1, 0, 0)), EvidenceExtractor())
    assert reward([candidate(passages=())])[0].value == pytest.approx(-0.2)
    with pytest.raises(ValueError, match="aggregation"):
        NLIReward(ScriptedVerifier(), EvidenceExtractor(), aggregation="max")
    with pytest.raises(ValueError, match="weights"):
        NLIReward(ScriptedVerifier(), EvidenceExtractor(), weights=(1.0, -2.0))


def test_one_verifier_call_per_batch_and_the_cache_spares_repeats():
    verifier = ScriptedVerifier(default=(1, 0, 0))
    reward = NLIReward(verifier, EvidenceExtractor())
    reward([candidate(), candidate(), candidate(answer="Lyon")])
    assert verifier.calls == 1 and verifier.pairs_scored == 10  # 2 distinct claims x 5 evidence sentences
    reward([candidate()])
    assert verifier.calls == 1


class BagOfWordsEmbedder:
    """A deterministic stand-in embedder: normalised counts over a fixed vocabulary."""

    VOCAB = ("capital", "france", "seine", "museums", "food", "city", "paris", "lyon")

    def __init__(self):
        self.encoded: list[str] = []

    def _vec(self, text):
        words = text.lower().replace(".", " ").split()
        v = np.array([words.count(w) for w in self.VOCAB], dtype=np.float32) + 1e-3
        return v / np.linalg.norm(v)

    def encode_queries(self, texts):
        self.encoded += list(texts)
        return np.stack([self._vec(t) for t in texts]) if texts else np.zeros((0, len(self.VOCAB)))

    def encode_passages(self, passages):
        self.encoded += [p.text for p in passages]
        return np.stack([self._vec(f"{p.title} {p.text}") for p in passages]) if passages else np.zeros((0, 8))


def test_evidence_is_top_per_passage_then_top_total_sorted_and_cached():
    long = Passage("p3", "Long", " ".join(f"Sentence {i} is about France." for i in range(10)))
    extractor = EvidenceExtractor(per_passage=3, total=8)
    evidence = extractor("What is the capital of France?", [*CONTEXT, long])
    assert len(evidence) == 8
    assert [sum(e.passage_id == pid for e in evidence) for pid in ("p1", "p2", "p3")] == [3, 2, 3]
    assert [e.score for e in evidence] == sorted((e.score for e in evidence), reverse=True)
    assert evidence[0].sentence == "Paris is the capital of France."

    embedder = BagOfWordsEmbedder()
    dense = EvidenceExtractor(embedder, per_passage=1, total=2, tfidf_weight=0.0, dense_weight=1.0)
    picked = dense("museums", CONTEXT)
    assert picked[0].sentence == "The city has many museums." and len(picked) == 2
    encoded = len(embedder.encoded)
    dense.many([("museums", CONTEXT), ("museums", CONTEXT[:1])])
    assert len(embedder.encoded) == encoded  # cached per (question, passage) and per sentence
