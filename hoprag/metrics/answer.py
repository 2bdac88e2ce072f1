"""Answer metrics with the official SQuAD / HotpotQA normalization (STYLE §3.2), after a Unicode cleaning.

One `normalize_answer` serves every answer metric, so EM, F1 and acc stay comparable with FlashRAG, BERGEN,
DSPy and the HotpotQA script. It is their `official_normalize` applied after `clean_text` (NFC, invisible
format characters dropped), so that text which looks equal scores equal: the official scripts give a
decomposed "Córdoba", an answer wrapped in right-to-left marks or a gold holding a zero-width space 0. Where
the cleaning changes a question's scores, `unicode_changed` says so, and the suite counts those questions.
A prediction that normalizes to nothing scores 0 everywhere, and golds that normalize to nothing are ignored
by the containment metrics (they would be "contained" in any prediction).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from typing import NamedTuple

Golds = str | Sequence[str]
Normalizer = Callable[[str], str]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# HotpotQA: a yes/no/noanswer answer earns no partial F1 credit for sharing a token with the other side.
_SPECIAL = frozenset({"yes", "no", "noanswer"})


class TokenScores(NamedTuple):
    """Token-level scores, in the order of the HotpotQA script's `f1_score` return value."""

    f1: float
    precision: float
    recall: float


def official_normalize(s: str) -> str:
    """`white_space_fix(remove_articles(remove_punc(lower(s))))`, the official scripts' rules in their order.

    Punctuation is deleted, not replaced by a space, so "U.S." becomes "us" and "don't" becomes "dont".
    """
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def clean_text(s: str) -> str:
    """`s` without invisible format characters (category Cf: zero-width spaces, bidi marks, soft hyphens,
    BOMs), then composed (NFC): LLMs and dataset dumps emit either form of the same visible text."""
    return unicodedata.normalize("NFC", "".join(ch for ch in s if unicodedata.category(ch) != "Cf"))


def normalize_answer(s: str) -> str:
    """`official_normalize` of the `clean_text`: what every answer metric compares."""
    return official_normalize(clean_text(s))


def as_gold_list(golds: Golds) -> list[str]:
    """Accept one gold string or its aliases; a question without any gold answer is an error."""
    gold_list = [golds] if isinstance(golds, str) else list(golds)
    if not gold_list:
        raise ValueError("no gold answers given")
    return gold_list


def exact_match(prediction: str, golds: Golds, normalize: Normalizer = normalize_answer) -> float:
    """1.0 if the normalized prediction equals any normalized gold."""
    pred = normalize(prediction)
    return float(bool(pred) and any(pred == normalize(g) for g in as_gold_list(golds)))


def _token_scores(pred: str, gold: str) -> TokenScores:
    if (pred in _SPECIAL or gold in _SPECIAL) and pred != gold:
        return TokenScores(0.0, 0.0, 0.0)
    pred_tokens, gold_tokens = pred.split(), gold.split()
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return TokenScores(0.0, 0.0, 0.0)
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return TokenScores(2 * precision * recall / (precision + recall), precision, recall)


def token_scores(prediction: str, golds: Golds, normalize: Normalizer = normalize_answer) -> TokenScores:
    """Bag-of-tokens F1, precision and recall, each the max over golds (as FlashRAG maxes them)."""
    pred = normalize(prediction)
    gold_list = as_gold_list(golds)
    if not pred:
        return TokenScores(0.0, 0.0, 0.0)
    per_gold = [_token_scores(pred, normalize(g)) for g in gold_list]
    return TokenScores(*(max(column) for column in zip(*per_gold)))


def f1_score(prediction: str, golds: Golds) -> float:
    return token_scores(prediction, golds).f1


def answer_contains(prediction: str, golds: Golds, normalize: Normalizer = normalize_answer) -> float:
    """FlashRAG `acc` (BERGEN `M`, cover-EM): a normalized gold is a character substring of the prediction.

    LLMs answer in sentences, so this is reported next to EM. Being a character test, gold "cat" is found
    in "concatenate"; `retrieval.has_answer` matches whole tokens instead.
    """
    pred = normalize(prediction)
    gold_list = (normalize(g) for g in as_gold_list(golds))
    return float(bool(pred) and any(g and g in pred for g in gold_list))


def cover_em(prediction: str, golds: Golds, aliases: bool = False, normalize: Normalizer = normalize_answer) -> float:
    """TreeRare's COVER-EM: `answer_contains` against the dataset's answer string only (the first gold), as
    its evaluation script reads the single `answer` field; `aliases=True` takes the max over every gold."""
    gold_list = as_gold_list(golds)
    return answer_contains(prediction, gold_list if aliases else gold_list[:1], normalize)


def answer_metrics(
    prediction: str, golds: Golds, cover_em_aliases: bool = False, normalize: Normalizer = normalize_answer
) -> dict[str, float]:
    """One question's EM, F1, precision, recall, acc and cover_em, as fractions."""
    f1, precision, recall = token_scores(prediction, golds, normalize)
    return {
        "em": exact_match(prediction, golds, normalize),
        "f1": f1,
        "precision": precision,
        "recall": recall,
        "acc": answer_contains(prediction, golds, normalize),
        "cover_em": cover_em(prediction, golds, cover_em_aliases, normalize),
    }


def unicode_changed(prediction: str, golds: Golds, cover_em_aliases: bool = False) -> bool:
    """Whether `clean_text` changed any of the question's `answer_metrics`, i.e. whether the official
    scripts, which normalize without it, would score this answer otherwise."""
    cleaned = answer_metrics(prediction, golds, cover_em_aliases)
    return cleaned != answer_metrics(prediction, golds, cover_em_aliases, official_normalize)
