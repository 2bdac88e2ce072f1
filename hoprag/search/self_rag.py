"""Self-RAG's reflection tokens and how one generated segment is read and scored (Asai et al. 2023, §3.3).

The model writes reflection tokens into its output: whether to retrieve (`[Retrieval]`, `[No Retrieval]`,
`[Continue to Use Evidence]`), whether a passage is relevant (`[Relevant]`/`[Irrelevant]`, right after
`</paragraph>`), whether the segment is supported by it (`[Fully supported]`, `[Partially supported]`,
`[No support / Contradictory]`) and how useful it is (`[Utility:1]`..`[Utility:5]`). A critique term is the
expected value of its group at the position where the model emitted one of the group's tokens, from the
normalised probabilities of the group (relevance 1/0, support 1/0.5/0, utility -1/-0.5/0/0.5/1, as in the
official `run_short_form.py`); a segment's score is p(segment) (the exponentiated mean token log-prob, with
`use_seqscore`) + w_rel·relevance + w_sup·support + w_use·utility.

Fallbacks, each counted on the segment: a group whose tokens the backend could not score (a model without
reflection tokens in its vocabulary, e.g. SmolLM2) gives 0 (`unscored`); a support or utility token the model
did not emit gives 0, as in the official code (`not_emitted`); a retrieve decision that could not be scored
follows the emitted token, and retrieves when the model emitted none (the official code's -100 log-prob for
both tokens gives 1/2, over any threshold below it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hoprag.llm.types import Generation

RETRIEVE, NO_RETRIEVE, CONTINUE = "[Retrieval]", "[No Retrieval]", "[Continue to Use Evidence]"
RELEVANCE = ("[Relevant]", "[Irrelevant]")
SUPPORT = ("[Fully supported]", "[Partially supported]", "[No support / Contradictory]")
UTILITY = tuple(f"[Utility:{i}]" for i in range(1, 6))
REFLECTION = (RETRIEVE, NO_RETRIEVE, CONTINUE, *RELEVANCE, *SUPPORT, *UTILITY)
DECISION = (RETRIEVE, NO_RETRIEVE)
VALUES = {DECISION: (1.0, 0.0), RELEVANCE: (1.0, 0.0), SUPPORT: (1.0, 0.5, 0.0), UTILITY: (-1.0, -0.5, 0.0, 0.5, 1.0)}
MARKUP = re.compile("|".join(re.escape(t) for t in (*REFLECTION, "<paragraph>", "</paragraph>", "</s>")))


def instruction(question: str) -> str:
    """Self-RAG's prompt format (the official `format_prompt`)."""
    return f"### Instruction:\n{question}\n\n### Response:\n"


def clean(text: str) -> str:
    """The answer text: reflection tokens and paragraph markup removed."""
    return " ".join(MARKUP.sub(" ", text).split())


def expected(scores: Mapping[str, float] | None, group: tuple[str, ...]) -> tuple[float | None, bool]:
    """The group's expected value under its normalised probabilities, and whether every token was scored
    (an unscored token counts as probability 0); None when none was."""
    probs = [math.exp(scores[t]) if scores and t in scores else 0.0 for t in group]
    total = sum(probs)
    if total == 0:
        return None, False
    value = sum(v * p for v, p in zip(VALUES[group], probs)) / total
    return value, all(scores and t in scores for t in group)


def decide(scores: Mapping[str, float] | None, emitted: str, threshold: float) -> tuple[bool, float | None]:
    """Retrieve when P([Retrieval]) / (P([Retrieval]) + P([No Retrieval])) > threshold; unscored: see the
    module docstring. Returns the decision and the probability share (None when unscored)."""
    share, _ = expected(scores, DECISION)
    if share is None:
        return emitted.strip() != NO_RETRIEVE, None
    return share > threshold, share


@dataclass(frozen=True)
class Weights:
    """The critique weights of the segment score (PruningRAG Table 7: 1.0, 1.0, 0.5) and `use_seqscore`."""

    w_rel: float = 1.0
    w_sup: float = 1.0
    w_use: float = 0.5
    use_seqscore: bool = True


@dataclass(frozen=True)
class Segment:
    """One read segment: its text (reflection tokens kept: it is fed back to the model), its terms and
    score, whether it asks for retrieval after it, and its counted fallbacks."""

    text: str
    relevance: float
    support: float
    utility: float
    score: float
    retrieve: bool
    unscored: int
    not_emitted: int

    def to_dict(self) -> dict[str, object]:
        terms = ("relevance", "support", "utility", "score")
        return {"segment": self.text, **{t: round(getattr(self, t), 4) for t in terms}, "retrieve": self.retrieve}


def read_segment(gen: Generation, weights: Weights, threshold: float) -> Segment:
    """Score `gen` (generated after a `<paragraph>`). At the first position where the model asks for retrieval
    (by `decide`) the segment ends and the rest is dropped (`retrieve`), as the official long-form inference
    does; the short form reads its one segment by the same rule."""
    tokens = [t.strip() for t in gen.tokens]
    maps = list(gen.candidate_logprobs or [{}] * len(tokens))
    end, text, retrieve, unscored = len(tokens), gen.text, False, 0
    decisions = [i for i, t in enumerate(tokens) if t in DECISION]
    for k, i in enumerate(decisions):
        asks, share = decide(maps[i], tokens[i], threshold)
        unscored += share is None
        if asks:
            offsets = [m.start() for m in re.finditer("|".join(map(re.escape, DECISION)), gen.text)]
            end, retrieve = i, True
            text = gen.text[: offsets[k]] if k < len(offsets) else gen.text
            break
    terms, not_emitted = {}, 0
    for group in (RELEVANCE, SUPPORT, UTILITY):
        at = 0 if group is RELEVANCE else next((i for i in range(end) if tokens[i] in group), None)
        if at is None or at >= len(maps):
            terms[group], not_emitted = 0.0, not_emitted + (group is not RELEVANCE)
            unscored += group is RELEVANCE
            continue
        value, complete = expected(maps[at], group)
        terms[group] = value or 0.0
        unscored += not complete
    seq = 0.0
    if weights.use_seqscore:
        kept = (gen.logprobs or ())[: max(end, 1)]
        seq = math.exp(sum(kept) / len(kept)) if kept else 0.0
        unscored += not kept
    score = seq + weights.w_rel * terms[RELEVANCE] + weights.w_sup * terms[SUPPORT] + weights.w_use * terms[UTILITY]
    return Segment(text, terms[RELEVANCE], terms[SUPPORT], terms[UTILITY], score, retrieve, unscored, not_emitted)


@dataclass(frozen=True)
class Path:
    """A beam hypothesis: its segments (with the passage each was written from) and its score, the product
    of its segments' scores (the official `run_long_form_static.py`); `done` when its last segment did not
    ask for retrieval."""

    segments: tuple[tuple[Segment, str], ...] = ()
    score: float | None = None
    done: bool = False

    def extend(self, segment: Segment, passage_id: str) -> Path:
        score = segment.score if self.score is None else self.score * segment.score
        return Path((*self.segments, (segment, passage_id)), score, not segment.retrieve)

    @property
    def text(self) -> str:
        return "".join(s.text for s, _ in self.segments)

    @property
    def answer(self) -> str:
        return " ".join(clean(s.text) for s, _ in self.segments).strip()


def top_paths(paths: Sequence[Path], width: int) -> list[Path]:
    """The `width` best-scoring paths (ties: the earlier first)."""
    return sorted(paths, key=lambda p: -(p.score or 0.0))[:width]
