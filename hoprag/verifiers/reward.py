"""Self-Correcting RAG's NLI reward (Eq. 2, spec/self_correcting_rag.md §5.2) and what it is built from.

    R(y, D) = mean over answer sentences u of  max over evidence e of  W · NLI(premise=e, hypothesis=u)

with W = (w_ent, w_neu, w_con) = (1.0, -0.2, -2.0), so R lies in [-2, 1]. The answer sentences ("claims")
are the sentences of the generator's `reasoning` plus one declarative claim built from its `answer`; the
evidence is the top K = 8 sentences of the context (at most 3 per passage) ranked by
0.6 · TF-IDF + 0.4 · dense similarity to the question. `aggregation="official"` reproduces the released
code instead: the whole raw generation is one hypothesis and the score is the mean over evidence.

Sentences are split by a small regex (`split_sentences`), not spaCy: it is deterministic, fast enough to
split every sample of a search, and the text it sees (Wikipedia passages, short generated reasoning) has
few of the cases a parser would get right and a regex wrong (abbreviations and initials are kept whole).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hoprag.data.types import Passage
from hoprag.retrieval.embedders import Embedder
from hoprag.verifiers.base import NLIScores, Verifier

DEFAULT_WEIGHTS = (1.0, -0.2, -2.0)
CLAIM_TEMPLATE = 'The answer to "{question}" is {answer}.'

# a candidate boundary: sentence punctuation (optionally closed by quotes/brackets) then space, a CJK full
# stop, or a line break
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*\s+|[。！？]+\s*|\s*\n\s*")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs etc no inc ltd co corp gen col lt sgt capt rev fig al approx e.g i.e "
    "u.s u.k u.n a.m p.m jan feb mar apr jun jul aug sep sept oct nov dec mt ft".split()
)


def split_sentences(text: str, limit: int | None = None) -> list[str]:
    """Sentences of `text` (stripped, non-empty), at most `limit`.

    A break after `.`/`!`/`?` is kept only when the next sentence does not start lower-case and the word
    before the stop is not an initial ("J. K. Rowling") or a known abbreviation ("Mr.", "U.S.", "St.");
    CJK stops and line breaks always split.
    """
    sentences: list[str] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.end()
        if match.group(0).lstrip()[:1] in ".!?" and not _ends_sentence(text, start, match.start(), end):
            continue
        _append(sentences, text[start:end])
        start = end
        if limit is not None and len(sentences) >= limit:
            return sentences[:limit]
    _append(sentences, text[start:])
    return sentences if limit is None else sentences[:limit]


def _ends_sentence(text: str, start: int, stop_at: int, next_at: int) -> bool:
    if next_at < len(text) and text[next_at].islower():
        return False
    if text[stop_at] != ".":
        return True
    words = text[start:stop_at].split()
    word = words[-1].lstrip("(\"'“‘[").lower() if words else ""
    return not (len(word) == 1 and word.isalpha()) and word not in _ABBREVIATIONS


def _append(sentences: list[str], piece: str) -> None:
    piece = piece.strip()
    if piece:
        sentences.append(piece)


def answer_claims(question: str, answer: str, reasoning: str = "", template: str = CLAIM_TEMPLATE) -> list[str]:
    """The hypotheses an answer is judged by: its reasoning sentences, then a declarative answer claim."""
    claim = template.format(question=question.strip().rstrip("?").strip() + "?", answer=answer.strip())
    return [*split_sentences(reasoning), claim]


@dataclass(frozen=True)
class Evidence:
    sentence: str
    passage_id: str
    score: float


class EvidenceExtractor:
    """The top `total` sentences of a context for a question, at most `per_passage` from each passage.

    A sentence scores `tfidf_weight` · cos(TF-IDF(question), TF-IDF(sentence)), the vectoriser fitted on
    the passage's own sentences, plus `dense_weight` · cos(embedding(question), embedding(title + sentence))
    when an `embedder` is given (else the TF-IDF part alone). Results are cached per (question, passage),
    and sentence vectors per text, because the search scores many answers against the same contexts.
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        per_passage: int = 3,
        total: int = 8,
        tfidf_weight: float = 0.6,
        dense_weight: float = 0.4,
        max_sentences: int = 200,
    ) -> None:
        if per_passage < 1 or total < 1:
            raise ValueError(f"per_passage and total must be positive, got {per_passage} and {total}")
        self.embedder = embedder
        self.per_passage = per_passage
        self.total = total
        self.tfidf_weight = tfidf_weight
        self.dense_weight = dense_weight if embedder is not None else 0.0
        self.max_sentences = max_sentences
        self._best: dict[tuple[str, str], list[Evidence]] = {}
        self._vectors: dict[str, np.ndarray] = {}

    def __call__(self, question: str, passages: Sequence[Passage]) -> list[Evidence]:
        return self.many([(question, passages)])[0]

    def many(self, items: Sequence[tuple[str, Sequence[Passage]]]) -> list[list[Evidence]]:
        """Evidence for each (question, context); the embeddings all new sentences need in one batch."""
        todo = {(q, p.id): (q, p) for q, passages in items for p in passages if (q, p.id) not in self._best}
        split = {key: split_sentences(p.text, self.max_sentences) for key, (_, p) in todo.items()}
        if self.dense_weight and todo:
            sentences = [(p.title, s) for key, (_, p) in todo.items() for s in split[key]]
            self._embed({q for q, _ in todo.values()}, sentences)
        for key, (question, passage) in todo.items():
            self._best[key] = self._rank(question, passage, split[key])
        results = []
        for question, passages in items:
            pooled = [e for p in passages for e in self._best[(question, p.id)]]
            results.append(sorted(pooled, key=lambda e: -e.score)[: self.total])
        return results

    def _rank(self, question: str, passage: Passage, sentences: list[str]) -> list[Evidence]:
        if not sentences:
            return []
        scores = self.tfidf_weight * _tfidf_similarity(question, sentences)
        if self.dense_weight:
            q = self._vectors[_query_key(question)]
            dense = np.array([self._vectors[_sentence_key(passage.title, s)] @ q for s in sentences])
            scores = scores + self.dense_weight * dense
        order = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))[: self.per_passage]
        return [Evidence(sentences[i], passage.id, float(scores[i])) for i in order]

    def _embed(self, questions: set[str], sentences: list[tuple[str, str]]) -> None:
        assert self.embedder is not None
        new_q = [q for q in sorted(questions) if _query_key(q) not in self._vectors]
        new_s = list(dict.fromkeys(s for s in sentences if _sentence_key(*s) not in self._vectors))
        for q, v in zip(new_q, self.embedder.encode_queries(new_q)):
            self._vectors[_query_key(q)] = v
        vectors = self.embedder.encode_passages([Passage("", title, text) for title, text in new_s])
        for s, v in zip(new_s, vectors):
            self._vectors[_sentence_key(*s)] = v


def _query_key(question: str) -> str:
    return "q\x00" + question


def _sentence_key(title: str, sentence: str) -> str:
    return f"s\x00{title}\x00{sentence}"


def _tfidf_similarity(question: str, sentences: list[str]) -> np.ndarray:
    """Cosine of the question to each sentence under a TF-IDF vectoriser fitted on `sentences`."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    try:
        matrix = TfidfVectorizer().fit_transform([*sentences, question])
    except ValueError:  # no word of two or more characters anywhere: nothing to match on
        return np.zeros(len(sentences))
    return (matrix[:-1] @ matrix[-1].T).toarray().ravel()


@dataclass(frozen=True)
class Candidate:
    """One answer to score: the question, the parsed answer and reasoning, the raw generation, its context."""

    question: str
    answer: str
    reasoning: str
    raw: str
    passages: tuple[Passage, ...]


@dataclass(frozen=True)
class RewardResult:
    value: float
    claims: tuple[str, ...]
    evidence: tuple[str, ...]
    pairs: int  # NLI pairs asked for (before the verifier's cache)


class NLIReward:
    """Eq. 2 over a batch of candidates, with one verifier call for all their (evidence, claim) pairs.

    With no evidence (an empty context) every claim counts as neutral, so R = w_neu: unsupported, not
    contradicted.
    """

    def __init__(
        self,
        verifier: Verifier,
        evidence: EvidenceExtractor,
        weights: Sequence[float] = DEFAULT_WEIGHTS,
        aggregation: str = "eq2",
        claim_template: str = CLAIM_TEMPLATE,
    ) -> None:
        if aggregation not in ("eq2", "official"):
            raise ValueError(f"reward aggregation must be 'eq2' or 'official', got {aggregation!r}")
        if len(weights) != 3:
            raise ValueError(f"reward weights are (entailment, neutral, contradiction), got {list(weights)}")
        self.verifier = verifier
        self.evidence = evidence
        self.weights = np.asarray(weights, dtype=np.float64)
        self.aggregation = aggregation
        self.claim_template = claim_template

    def hypotheses(self, c: Candidate) -> list[str]:
        if self.aggregation == "official":
            return [c.raw]
        return answer_claims(c.question, c.answer, c.reasoning, self.claim_template)

    def __call__(self, candidates: Sequence[Candidate]) -> list[RewardResult]:
        evidence = self.evidence.many([(c.question, c.passages) for c in candidates])
        hypotheses = [self.hypotheses(c) for c in candidates]
        pairs = [(e.sentence, h) for ev, hs in zip(evidence, hypotheses) for h in hs for e in ev]
        scores = iter(self.verifier(pairs))
        results = []
        for ev, hs in zip(evidence, hypotheses):
            grid = np.array([[self._weigh(next(scores)) for _ in ev] for _ in hs]).reshape(len(hs), len(ev))
            results.append(
                RewardResult(self._aggregate(grid), tuple(hs), tuple(e.sentence for e in ev), grid.size)
            )
        return results

    def _weigh(self, s: NLIScores) -> float:
        return float(self.weights @ np.asarray(s))

    def _aggregate(self, grid: np.ndarray) -> float:
        """grid[claim, evidence] of weighted scores → Eq. 2 (max over evidence, mean over claims) or the
        official mean over evidence of the single raw-text hypothesis."""
        if grid.shape[1] == 0:
            return float(self.weights[1])
        if self.aggregation == "official":
            return float(grid.mean())
        return float(grid.max(axis=1).mean())
