"""Retrieval metrics, in two families that must not be confused (STYLE §3.3).

- Gold-passage recall: the fraction of a question's gold passages that were retrieved. Gold passages are
  matched by exact title (TreeHop, spec/treehop.md §8.2) or by PruneRAG's 0.75 token-overlap rule on
  passage texts (spec/prunerag.md §5); both go through one `match(gold, retrieved)` predicate. PruneRAG's
  all-gold-retrieved flag and Evidence Forgetting Rate build on it.
- Answer-containment recall@k: whether a top-k passage contains a gold answer; it needs no gold passages.
  hoprag's `answer_recall@k` is DPR's top-k retrieval accuracy (`has_answer`: the gold's token sequence, DPR's
  tokenisation, uncased). FlashRAG's `retrieval_recall_top{k}` (`retrieval_recall_top_k`) is a looser rule, a
  normalized gold as a character substring of the normalized passage ("no" is found in "north"), offered
  under its own name for comparison with FlashRAG's tables.

Per-question functions raise on a question without gold passages; the dataset-level aggregation excludes
such questions and counts them instead, so an empty gold set never reads as recall 0 or 1.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hoprag.metrics.answer import Golds, as_gold_list, official_normalize

Match = Callable[[str, str], bool]
"""`match(gold, retrieved)`: whether a retrieved passage (title or text) covers a gold one."""
Hit = Callable[[str, Golds], bool]
"""`hit(passage_text, golds)`: whether a passage contains a gold answer."""


def _check_k(k: int | None) -> None:
    if k is not None and k < 1:
        raise ValueError(f"k must be a positive int or None, got {k!r}")


# --- gold-passage recall ---------------------------------------------------------------------------------


def passage_hits(retrieved: Iterable[str], gold: Iterable[str], match: Match | None = None) -> int:
    """Number of distinct gold passages matched by some retrieved one; each gold counts at most once.

    `match=None` is exact equality (titles). Pass `token_overlap_match` for PruneRAG's text rule.
    """
    gold_set = dict.fromkeys(gold)
    if match is None:
        found = set(retrieved)
        return sum(g in found for g in gold_set)
    candidates = list(dict.fromkeys(retrieved))
    return sum(any(match(g, r) for r in candidates) for g in gold_set)


def _n_gold(gold: Iterable[str]) -> int:
    n = len(set(gold))
    if n == 0:
        raise ValueError("recall is undefined for a question without gold passages")
    return n


def passage_recall(retrieved: Iterable[str], gold: Iterable[str], match: Match | None = None) -> float:
    """Fraction of the distinct gold passages that were retrieved (one question)."""
    gold = list(gold)
    return passage_hits(retrieved, gold, match) / _n_gold(gold)


def passage_recall_at_k(
    ranked: Sequence[str], gold: Iterable[str], k: int, match: Match | None = None
) -> float:
    """`passage_recall` on the first k of a ranked list."""
    _check_k(k)
    return passage_recall(ranked[:k], gold, match)


def all_gold_retrieved(retrieved: Iterable[str], gold: Iterable[str], match: Match | None = None) -> bool:
    """PruneRAG's `G ⊆ d`: every gold passage is matched (use `match=token_overlap_match` for its rule)."""
    gold = list(gold)
    return passage_hits(retrieved, gold, match) == _n_gold(gold)


@dataclass(frozen=True)
class PassageRecall:
    """Dataset-level gold-passage recall.

    `micro` = Σ hits / Σ |gold| over questions (TreeHop's headline); `macro` = mean per-question recall
    (PruneRAG's "Recall"). Both are None when no question has gold passages.
    """

    micro: float | None
    macro: float | None
    n_scored: int
    n_without_gold: int


def aggregate_passage_recall(
    retrieved: Sequence[Sequence[str]],
    gold: Sequence[Iterable[str]],
    k: int | None = None,
    match: Match | None = None,
) -> PassageRecall:
    """Micro and macro recall over questions, cutting each retrieved list at k (None: keep all)."""
    _check_k(k)
    if len(retrieved) != len(gold):
        raise ValueError(f"{len(retrieved)} retrieved lists for {len(gold)} gold sets")
    hits: list[int] = []
    sizes: list[int] = []
    for question_retrieved, question_gold in zip(retrieved, gold):
        question_gold = list(question_gold)
        if not question_gold:
            continue
        hits.append(passage_hits(question_retrieved[:k], question_gold, match))
        sizes.append(len(set(question_gold)))
    if not sizes:
        return PassageRecall(None, None, 0, len(gold))
    return PassageRecall(
        micro=sum(hits) / sum(sizes),
        macro=sum(h / n for h, n in zip(hits, sizes)) / len(sizes),
        n_scored=len(sizes),
        n_without_gold=len(gold) - len(sizes),
    )


def passages_read(passage_ids: Iterable[str]) -> int:
    """Distinct passages retrieved for one question (TreeHop's "K": duplicates across hops count once)."""
    return len(set(passage_ids))


# --- PruneRAG's gold-passage text match and EFR ---------------------------------------------------------


def token_overlap_match(gold_text: str, retrieved_text: str, threshold: float = 0.75) -> bool:
    """PruneRAG's rule: |set(tok(g)) ∩ set(tok(r))| / len(tok(g)) ≥ threshold.

    Whitespace tokens, case-sensitive; the denominator counts the gold's duplicate tokens, so a gold with
    repeated tokens needs more than its distinct tokens to reach the threshold (code-exact).
    """
    gold_tokens = gold_text.split()
    if not gold_tokens:
        raise ValueError("empty gold passage text")
    return len(set(gold_tokens) & set(retrieved_text.split())) / len(gold_tokens) >= threshold


def evidence_forgetting_rate(
    all_gold_retrieved: Sequence[bool], correct: Sequence[bool]
) -> dict[str, float | None]:
    """PruneRAG's Evidence Forgetting Rate (spec/prunerag.md §2.2), as fractions.

    - `efr`: wrong answers among questions whose gold passages were all retrieved (the reported, conditional
      form); None when no question had all its gold retrieved.
    - `forget_rate`: the paper's printed 1/N form, (all gold retrieved and wrong) / N.
    - `all_gold_retrieved_rate`: questions with all gold retrieved / N.
    `correct` is EM = 1 in PruneRAG.
    """
    if len(all_gold_retrieved) != len(correct):
        raise ValueError(f"{len(all_gold_retrieved)} retrieval flags for {len(correct)} correctness flags")
    n = len(correct)
    n_all = sum(map(bool, all_gold_retrieved))
    n_forgot = sum(bool(a) and not c for a, c in zip(all_gold_retrieved, correct))
    return {
        "efr": n_forgot / n_all if n_all else None,
        "forget_rate": n_forgot / n if n else None,
        "all_gold_retrieved_rate": n_all / n if n else None,
    }


# --- answer-containment recall ---------------------------------------------------------------------------


def _contains_sequence(tokens: list[str], sub: list[str]) -> bool:
    n = len(sub)
    return any(tokens[i : i + n] == sub for i in range(len(tokens) - n + 1))


def dpr_tokens(text: str) -> list[str]:
    """DPR's `SimpleTokenizer` words, uncased, of the NFD text: each run of letters, digits and marks is a
    token, each other visible character (punctuation, symbols) a token of its own, and spaces and control or
    format characters separate them. So "Polish-Jewish" is polish, -, jewish: the gold "Jewish" is found."""
    tokens: list[str] = []
    word: list[str] = []
    for ch in unicodedata.normalize("NFD", text):
        kind = unicodedata.category(ch)[0]
        if kind in "LNM":
            word.append(ch)
            continue
        if word:
            tokens.append("".join(word).lower())
            word = []
        if kind not in "ZC":
            tokens.append(ch.lower())
    if word:
        tokens.append("".join(word).lower())
    return tokens


def has_answer(text: str, golds: Golds) -> bool:
    """DPR's `has_answer` (string match): a gold's `dpr_tokens` occur contiguously in the text's. A gold
    without tokens (blank) is ignored, where DPR would find it in every passage."""
    tokens = dpr_tokens(text)
    gold_tokens = (dpr_tokens(g) for g in as_gold_list(golds))
    return any(g and _contains_sequence(tokens, g) for g in gold_tokens)


def contains_answer_string(text: str, golds: Golds) -> bool:
    """FlashRAG's `Retrieval_Recall` hit: an `official_normalize`d gold is a character substring of the
    normalized passage, so "no" is found in "north" and a gold normalizing to nothing in any passage."""
    normalized = official_normalize(text)
    return any(official_normalize(g) in normalized for g in as_gold_list(golds))


def answer_in_top_k(texts: Sequence[str], golds: Golds, k: int | None = None, hit: Hit = has_answer) -> bool:
    """Whether any of the first k passage texts (all when k is None) contains a gold answer by `hit`."""
    _check_k(k)
    golds = as_gold_list(golds)
    return any(hit(t, golds) for t in texts[:k])


def answer_recall_at_k(
    texts: Sequence[Sequence[str]], golds: Sequence[Golds], k: int | None = None, hit: Hit = has_answer
) -> float:
    """The share of questions with a gold answer in a top-k passage: hoprag's `answer_recall@k` (DPR's
    top-k accuracy) with the default `hit`."""
    if len(texts) != len(golds):
        raise ValueError(f"{len(texts)} passage lists for {len(golds)} gold answer sets")
    if not texts:
        raise ValueError("no questions to score")
    return sum(answer_in_top_k(t, g, k, hit) for t, g in zip(texts, golds)) / len(texts)


def retrieval_recall_top_k(texts: Sequence[Sequence[str]], golds: Sequence[Golds], k: int) -> float:
    """FlashRAG's `retrieval_recall_top{k}`: `answer_recall_at_k` with its substring hit."""
    return answer_recall_at_k(texts, golds, k, contains_answer_string)
