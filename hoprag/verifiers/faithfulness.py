"""NLI faithfulness of an answer to its context (spec/self_correcting_rag.md §8.2): AP, CR and Sup.

The claims are the answer sentences the reward judges (reasoning sentences plus the declarative answer
claim). Each claim gets one label from the verifier's argmax over premises:

- supported if some premise's argmax is entailment;
- otherwise contradicted if some premise's argmax is contradiction;
- otherwise neutral.

AP (attribution precision) = supported claims / claims and CR (contradiction rate) = contradicted claims /
claims, with the reward's top-K evidence sentences as premises; so AP + CR <= 1. Sup (support) is 1 when
every claim is entailed by some sentence of the passages the answer cites (`evidence_doc_ids`), or of the
whole context when it cites none. Scored by the same verifier that guided the search, these figures are
biased in the search's favour (the paper says so too): compare methods under one verifier, and prefer an
independent one for claims about faithfulness itself: the sc_rag methods take a separate `judge`
(`+verifier@method.judge=roberta_large_mnli`), and metrics.json's `run.judge` names whichever scored them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hoprag.data.types import Passage
from hoprag.verifiers.base import LABELS, NLIScores, Verifier
from hoprag.verifiers.reward import CLAIM_TEMPLATE, EvidenceExtractor, answer_claims, split_sentences


@dataclass(frozen=True)
class Answered:
    """An answer to judge: its text and reasoning, the context it was written from, the passages it cites."""

    question: str
    answer: str
    reasoning: str
    context: tuple[Passage, ...]
    cited: tuple[Passage, ...] = ()


@dataclass(frozen=True)
class Faithfulness:
    attribution_precision: float
    contradiction_rate: float
    support: float
    labels: tuple[str, ...]  # one per claim
    pairs: int  # NLI pairs asked for

    def stats(self) -> dict[str, float]:
        return {
            "attribution_precision": self.attribution_precision,
            "contradiction_rate": self.contradiction_rate,
            "support": self.support,
        }


def claim_label(scores: Sequence[NLIScores]) -> str:
    """The §8.2 label of one claim from its scores against every premise."""
    argmaxes = {LABELS[max(range(3), key=lambda i: s[i])] for s in scores}
    if "entailment" in argmaxes:
        return "supported"
    if "contradiction" in argmaxes:
        return "contradicted"
    return "neutral"


class FaithfulnessScorer:
    """AP, CR and Sup for a batch of answers, in one verifier call."""

    def __init__(
        self,
        verifier: Verifier,
        evidence: EvidenceExtractor,
        claim_template: str = CLAIM_TEMPLATE,
        max_sentences: int = 200,
    ) -> None:
        self.verifier = verifier
        self.evidence = evidence
        self.claim_template = claim_template
        self.max_sentences = max_sentences

    def __call__(self, answers: Sequence[Answered]) -> list[Faithfulness]:
        evidence = self.evidence.many([(a.question, a.context) for a in answers])
        claims = [answer_claims(a.question, a.answer, a.reasoning, self.claim_template) for a in answers]
        support = [self._sentences(a.cited or a.context) for a in answers]
        pairs = []
        for ev, cs, premises in zip(evidence, claims, support):
            pairs += [(e.sentence, c) for c in cs for e in ev]
            pairs += [(p, c) for c in cs for p in premises]
        scores = iter(self.verifier(pairs))
        results = []
        for ev, cs, premises in zip(evidence, claims, support):
            labels = tuple(claim_label([next(scores) for _ in ev]) for _ in cs)
            supported = [claim_label([next(scores) for _ in premises]) == "supported" for _ in cs]
            results.append(
                Faithfulness(
                    attribution_precision=labels.count("supported") / len(cs),
                    contradiction_rate=labels.count("contradicted") / len(cs),
                    support=float(all(supported)),
                    labels=labels,
                    pairs=len(cs) * (len(ev) + len(premises)),
                )
            )
        return results

    def _sentences(self, passages: Sequence[Passage]) -> list[str]:
        return [s for p in passages for s in split_sentences(p.text, self.max_sentences)]
