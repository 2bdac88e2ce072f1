"""Training and evaluation splits of questions that share no context (spec/pruningrag.md P5), for the source
routers and the classifiers that read the question alone (CRAG's domain classifier).

A router sees only the question, so a question whose twin (the same text, asked of another table) is in
the training split would be scored on an answer it was taught. Questions are therefore grouped by their
context (`metadata["context_uid"]`, TAT-QA's table; each question is its own context where there is none)
and contexts are joined when they share a question's text; whole groups go to one side. `check_disjoint`
is the check training and evaluation both run, so a split made any other way is refused, not trusted.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from hoprag.data.heldout import context_of, question_key
from hoprag.data.types import QAExample
from hoprag.utils.refusals import Refusal


def _groups(examples: Sequence[QAExample]) -> list[list[int]]:
    """Indices of the examples, grouped: same context, or contexts linked by an identical question (union-find)."""
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        while parent.setdefault(node, node) != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for ex in examples:
        a, b = find("c:" + context_of(ex)), find("q:" + question_key(ex))
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[str, list[int]] = {}
    for i, ex in enumerate(examples):
        groups.setdefault(find("c:" + context_of(ex)), []).append(i)
    return [groups[root] for root in sorted(groups)]


def split_by_context(
    examples: Sequence[QAExample], eval_fraction: float = 0.5, seed: int = 0
) -> tuple[list[QAExample], list[QAExample]]:
    """(train, eval): the groups shuffled with `seed`, then drawn into eval until it holds `eval_fraction`
    of the questions. Both keep file order; the same examples and seed always give the same split."""
    if not 0.0 < eval_fraction < 1.0:
        raise ValueError(f"eval_fraction must be in (0, 1), got {eval_fraction}")
    groups = _groups(examples)
    if len(groups) < 2:
        raise ValueError(f"{len(examples)} questions form {len(groups)} context group(s): nothing to split")
    random.Random(seed).shuffle(groups)
    target, taken = eval_fraction * len(examples), set()
    for group in groups:
        if len(taken) >= target:
            break
        taken.update(group)
    if len(taken) == len(examples):  # one group larger than the rest together: keep something to train on
        taken.difference_update(groups[-1])
    train = [ex for i, ex in enumerate(examples) if i not in taken]
    evaluation = [ex for i, ex in enumerate(examples) if i in taken]
    check_disjoint(train, evaluation)
    return train, evaluation


class LeakError(Refusal, ValueError):
    """A router-evaluation question (or its context, or its exact text) is also in the training split."""


def check_disjoint(train: Sequence[QAExample], evaluation: Sequence[QAExample]) -> None:
    """Raise `LeakError` naming what the two splits share: question ids, contexts or question texts."""
    shared = {
        "question ids": {ex.id for ex in train} & {ex.id for ex in evaluation},
        "contexts": {context_of(ex) for ex in train} & {context_of(ex) for ex in evaluation},
        "question texts": {question_key(ex) for ex in train} & {question_key(ex) for ex in evaluation},
    }
    problems = [f"{len(items)} {what} (e.g. {sorted(items)[0]!r})" for what, items in shared.items() if items]
    if problems:
        raise LeakError("router training and evaluation splits overlap: " + "; ".join(problems))
