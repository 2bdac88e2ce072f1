"""Metrics of the ambiguous-question datasets: ASQA STR-EM and Disambig-F1, AmbigDocs answer / entity recall.

Each question's gold structure is what the loaders put in `QAExample.metadata["ambiguity"]` and the runner
keeps in its prediction record:

- ASQA: `{"qa_pairs": [{"question", "short_answers": [...]}]}` (the disambiguated questions);
- AmbigDocs: `{"ambiguous_entity", "documents": [{"title", "answer"}]}` (one document per entity).

Every score here is one question's, as a fraction; `MetricSuite` averages them over the questions that
carry the structure. They follow the scripts TreeRare reports with (its digest §5, §9.6): ASQA's official
scoring (Stelmakh et al., 2022) and the AmbigDocs script (Lee et al., 2024), on the SQuAD normalization of
`hoprag.metrics.answer`. Disambig-F1 needs an extractive reader (`QAReader`); `TransformersReader` is one
on a SQuAD 2.0 model, loaded on first use.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from hoprag.metrics.answer import answer_contains, f1_score, normalize_answer

# reader(disambiguated questions, context) -> one answer per question ("" when it finds none)
QAReader = Callable[[list[str], str], list[str]]
DEFAULT_READER = "deepset/roberta-base-squad2"
# The AmbigDocs script scores the first 5 gold documents of a question.
AMBIGDOCS_DOCUMENTS = 5
_DISAMBIGUATION = "(disambiguation)"
# NLTK's English stopword list, which the AmbigDocs script removes; its entries with an apostrophe
# ("don't", ...) are left out, as no token keeps an apostrophe after `normalize_answer`.
_NLTK_ENGLISH = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
herself it its itself they them their theirs themselves what which who whom this that these those am is are
was were be been being have has had having do does did doing a an the and but if or because as until while
of at by for with about against between into through during before after above below to from up down in out
on off over under again further then once here there when where why how all any both each few more most other
some such no nor not only own same so than too very s t can will just don should now d ll m o re ve y ain
aren couldn didn doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn
"""
STOPWORDS = frozenset(_NLTK_ENGLISH.split())


def content_tokens(text: str) -> list[str]:
    """Normalized tokens without stopwords (the AmbigDocs script's `get_stopwords_tokens`)."""
    return [t for t in normalize_answer(text).split() if t not in STOPWORDS]


def _recall(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """Share of the gold tokens (as a bag) found in the predicted ones."""
    return sum((Counter(gold) & Counter(predicted)).values()) / len(gold)


def str_em(prediction: str, short_answers: Sequence[Sequence[str]]) -> float:
    """ASQA STR-EM: the share of disambiguated pairs with a short answer contained in the long answer."""
    return sum(answer_contains(prediction, answers) for answers in short_answers) / len(short_answers)


def disambig_f1(
    prediction: str, questions: Sequence[str], short_answers: Sequence[Sequence[str]], reader: QAReader
) -> float:
    """ASQA Disambig-F1: the reader answers each disambiguated question from the long answer; the mean over
    the pairs of the token F1 against the pair's short answers (max over them). An empty long answer
    answers nothing, so it scores 0 without asking the reader."""
    if not prediction.strip():
        return 0.0
    answers = reader(list(questions), prediction)
    if len(answers) != len(questions):
        raise RuntimeError(f"the QA reader gave {len(answers)} answers to {len(questions)} questions")
    return sum(f1_score(a, golds) for a, golds in zip(answers, short_answers)) / len(questions)


def answer_recall(prediction: str, answers: Sequence[str]) -> float:
    """AmbigDocs answer recall: the mean over documents of the share of each answer's content tokens in the
    prediction. As in the script, an answer without content tokens (all stopwords) scores 1 against a
    prediction without any, else 0."""
    predicted = content_tokens(prediction)
    scores = []
    for answer in answers:
        gold = content_tokens(answer)
        scores.append(_recall(gold, predicted) if gold and predicted else float(gold == predicted))
    return sum(scores) / len(scores)


def entity_recall(prediction: str, titles: Sequence[str], ambiguous_entity: str) -> float:
    """AmbigDocs entity recall: the mean over documents of the share of each title's distinguishing tokens in
    the prediction. A title loses its parentheses, stopwords and every token of the shared name (itself
    without a "(disambiguation)" suffix); a title with nothing left ("Michael Jordan" under "Michael Jordan")
    counts 1 if it occurs, case-insensitively, as a substring of the prediction."""
    name = ambiguous_entity.strip().lower().removesuffix(_DISAMBIGUATION).strip()
    shared = set(content_tokens(name))
    predicted = content_tokens(prediction)
    flat = " ".join(prediction.split()).lower()
    scores = []
    for title in titles:
        entity = title.replace("(", "").replace(")", "")
        gold = [t for t in content_tokens(entity) if t not in shared]
        if not gold:
            scores.append(float(entity.lower() in flat))
        else:
            scores.append(_recall(gold, predicted) if predicted else 0.0)
    return sum(scores) / len(scores)


def ambiguity_scores(prediction: str, ambiguity: Mapping[str, Any]) -> dict[str, float]:
    """The reader-free metrics of one question, by its gold structure (see the module docstring)."""
    if "qa_pairs" in ambiguity:
        return {"asqa/str_em": str_em(prediction, [p["short_answers"] for p in ambiguity["qa_pairs"]])}
    documents = ambiguity["documents"][:AMBIGDOCS_DOCUMENTS]
    return {
        "ambigdocs/answer_recall": answer_recall(prediction, [d["answer"] for d in documents]),
        "ambigdocs/entity_recall": entity_recall(
            prediction, [d["title"] for d in documents], ambiguity["ambiguous_entity"]
        ),
    }


def asqa_disambig_f1(prediction: str, ambiguity: Mapping[str, Any], reader: QAReader) -> float:
    """`disambig_f1` on an ASQA question's gold structure."""
    pairs = ambiguity["qa_pairs"]
    return disambig_f1(prediction, [p["question"] for p in pairs], [p["short_answers"] for p in pairs], reader)


Feature = tuple[Sequence[float], Sequence[float], Sequence[tuple[int, int] | None]]


def read_span(features: Sequence[Feature], context: str, n_best: int = 20, max_answer_tokens: int = 30) -> str:
    """The SQuAD 2.0 decision of HF's `run_qa.py` (`version_2_with_negative`, null threshold 0).

    Each feature (a window of the context) gives start and end logits and, per token, its character span
    in the context (None outside it). The best span over the windows, among the `n_best` top starts and
    ends, is the answer unless the no-answer score (start + end logit of the first token, lowest over the
    windows) beats it, in which case the question is unanswered ("").
    """
    null_score = min(float(start[0] + end[0]) for start, end, _ in features)
    best_score, best = -np.inf, ""
    for start, end, spans in features:
        starts = np.argsort(np.asarray(start))[::-1][:n_best]
        ends = np.argsort(np.asarray(end))[::-1][:n_best]
        for i in starts:
            for j in ends:
                if spans[i] is None or spans[j] is None or j < i or j - i + 1 > max_answer_tokens:
                    continue
                score = float(start[i] + end[j])
                if score > best_score:
                    best_score, best = score, context[spans[i][0] : spans[j][1]]
    return best if best_score >= null_score else ""


@dataclass(frozen=True)
class TransformersReader:
    """An extractive SQuAD 2.0 reader on a transformers checkpoint (hub name or local path), as ASQA's
    Disambig-F1 uses one; the model loads on the first call, on `device` (default: CUDA when available).
    Long contexts are read in windows of `max_length` tokens overlapping by `stride`."""

    model: str = DEFAULT_READER
    device: str | None = None
    max_length: int = 384
    stride: int = 128
    batch_size: int = 32
    n_best: int = 20
    max_answer_tokens: int = 30

    @cached_property
    def _loaded(self) -> tuple[Any, Any]:
        import torch
        from transformers import AutoModelForQuestionAnswering, AutoTokenizer

        device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
        tokenizer = AutoTokenizer.from_pretrained(self.model)
        model = AutoModelForQuestionAnswering.from_pretrained(self.model).to(device).eval()
        return tokenizer, model

    def __call__(self, questions: list[str], context: str) -> list[str]:
        if not questions:
            return []
        import torch

        tokenizer, model = self._loaded
        encoding = tokenizer(
            list(questions),
            [context] * len(questions),
            truncation="only_second",
            max_length=self.max_length,
            stride=self.stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding=True,
            return_tensors="pt",
        )
        question_of = encoding.pop("overflow_to_sample_mapping").tolist()
        offsets = encoding.pop("offset_mapping").tolist()
        starts: list[list[float]] = []
        ends: list[list[float]] = []
        with torch.inference_mode():
            for b in range(0, len(question_of), self.batch_size):
                batch = {key: value[b : b + self.batch_size].to(model.device) for key, value in encoding.items()}
                output = model(**batch)
                starts += output.start_logits.float().cpu().tolist()
                ends += output.end_logits.float().cpu().tolist()
        features: dict[int, list[Feature]] = defaultdict(list)
        for f, q in enumerate(question_of):
            spans = [tuple(o) if s == 1 else None for o, s in zip(offsets[f], encoding.sequence_ids(f))]
            features[q].append((starts[f], ends[f], spans))
        return [read_span(features[q], context, self.n_best, self.max_answer_tokens) for q in range(len(questions))]
