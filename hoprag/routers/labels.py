"""Router training labels: TAT-QA's gold source labels, and the paper's labels from judged outcomes.

PruningRAG labels each training question with the sources whose answer was judged correct, and a question
no source answered with the source that did best on *similar* questions (spec/pruningrag.md §5.3, P2).
Similar means the same bucket, CRAG's (domain, static_or_dynamic, question_type); a bucket where no source
was ever correct backs off to its domain, then to every question. Running and judging the answerer per
source (and caching that) is the method's job: these functions only turn its outcomes into labels.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Hashable, Sequence
from typing import TypeVar

from hoprag.data.types import QAExample

TATQA_SOURCES = {"table": ("table",), "text": ("text",), "table-text": ("table", "text")}
MODES = ("single", "subset")
CRAG_PRIORITY = ("api", "web", "llm")  # §5.3: lowest hallucination first (Table 1)
T = TypeVar("T", bound=Hashable)


def gold_labels(examples: Sequence[QAExample]) -> list[tuple[str, ...]]:
    """TAT-QA's `answer_from` as sources: table → (table,), text → (text,), table-text → (table, text)."""
    labels = []
    for ex in examples:
        answer_from = ex.metadata.get("answer_from")
        if answer_from not in TATQA_SOURCES:
            raise ValueError(f"question {ex.id}: no gold source label (metadata answer_from={answer_from!r})")
        labels.append(TATQA_SOURCES[answer_from])
    return labels


def outcome_labels(
    outcomes: Sequence[Collection[str]],
    buckets: Sequence[Sequence[Hashable]],
    mode: str = "single",
    priority: Sequence[str] = CRAG_PRIORITY,
) -> list[tuple[str, ...]]:
    """One label per training question from `outcomes[i]`, the sources whose answer to it was judged correct.

    `single`: the first correct source in `priority` order; `subset`: every correct source (priority order).
    No correct source: the source with the highest accuracy over the questions of the same bucket
    (`buckets[i]`, e.g. (domain, static_or_dynamic, question_type)), else of its first key's bucket
    (domain), else of all questions, ties broken by `priority`; where no source was ever correct, the first
    of `priority`. A label is never empty ("none" is not a training target).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if len(outcomes) != len(buckets):
        raise ValueError(f"{len(outcomes)} outcomes for {len(buckets)} buckets")
    if not priority or len(set(priority)) != len(priority):
        raise ValueError(f"priority must name each source once, got {list(priority)}")
    known = set(priority)
    for i, correct in enumerate(outcomes):
        if unknown := set(correct) - known:
            raise ValueError(f"outcome {i}: sources {sorted(unknown)} are not in priority {list(priority)}")
    levels = [[tuple(b) for b in buckets], [tuple(b)[:1] for b in buckets], [() for _ in buckets]]
    wins = [_wins(outcomes, keys) for keys in levels]
    labels = []
    for i, correct in enumerate(outcomes):
        if correct:
            chosen = tuple(s for s in priority if s in correct)
            labels.append(chosen[:1] if mode == "single" else chosen)
            continue
        tallies = (level_wins[keys[i]] for keys, level_wins in zip(levels, wins))
        tally = next((t for t in tallies if t), Counter())
        labels.append((max(priority, key=lambda s: (tally[s], -priority.index(s))),))
    return labels


def _wins(outcomes: Sequence[Collection[str]], keys: Sequence[tuple]) -> dict[tuple, Counter]:
    """Per bucket, how many of its questions each source answered correctly: the bucket's accuracy ranking
    (every source is tried on every question, so counts rank the sources as accuracies do)."""
    wins: dict[tuple, Counter] = {}
    for key, correct in zip(keys, outcomes):
        wins.setdefault(key, Counter()).update(set(correct))
    return wins


def majority_label(labels: Sequence[T], order: Sequence[T]) -> T:
    """The most frequent label (ties: the earlier in `order`): the majority-class baseline."""
    counts = Counter(labels)
    return max(order, key=lambda label: (counts[label], -list(order).index(label)))
