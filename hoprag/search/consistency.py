"""Choosing one answer from N sampled CoT replies: Self-Consistency and Universal Self-Consistency.

- Majority vote (Wang et al. 2023, "Self-Consistency Improves Chain of Thought Reasoning"): the answers that
  parsed are grouped by `normalize_answer`; the largest group wins, a tie goes to the group whose first member
  was sampled first; the prediction is that first member's answer as written. Samples whose answer did not
  parse (no FINAL marker) are left out of the vote and counted; when none parsed, the first sample's fallback
  reading is the prediction (a parse failure).
- Universal Self-Consistency (Chen et al. 2023): the LLM is shown the N replies, numbered, and names the one
  most consistent with the others ("Response <i>"); for long, open answers whose normalised strings never
  agree (TreeRare's ASQA / AmbigDocs baselines). A selection that names no valid response falls back to
  response 1, counted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hoprag.data.types import Passage
from hoprag.llm.prompts import ChatPrompt, ContextPrompt, PassageFormat
from hoprag.metrics.answer import normalize_answer

Reading = tuple[str, bool]  # (answer, parse failed), as `hoprag.search.cot.read_final` gives it
CHOICE = re.compile(r"response\s*#?\s*(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Vote:
    """The chosen sample's index, the vote's figures, and whether the chosen answer is a fallback."""

    index: int
    votes: int
    counted: int
    distinct: int
    failed: bool

    @property
    def share(self) -> float:
        """The winner's share of the counted (parsed) samples; 0 when none parsed."""
        return self.votes / self.counted if self.counted else 0.0


def groups(readings: Sequence[Reading]) -> dict[str, list[int]]:
    """The parsed samples' indices by normalised answer, in order of first appearance."""
    found: dict[str, list[int]] = {}
    for i, (answer, failed) in enumerate(readings):
        if not failed:
            found.setdefault(normalize_answer(answer), []).append(i)
    return found


def tally(readings: Sequence[Reading], index: int) -> Vote:
    """The vote's figures when sample `index` is chosen: its group's size among the parsed samples."""
    found = groups(readings)
    answer, failed = readings[index]
    votes = 0 if failed else len(found[normalize_answer(answer)])
    return Vote(index, votes, sum(map(len, found.values())), len(found), failed)


def majority_vote(readings: Sequence[Reading]) -> Vote:
    """The module docstring's majority vote over one question's samples."""
    found = groups(readings)
    winner = max(found.values(), key=len, default=[0])  # max keeps the first of equal groups: the first seen
    return tally(readings, winner[0])


USC_PROMPT = ChatPrompt(
    "You are shown several responses to the same question. Pick the response that agrees most with the"
    " majority of the responses. Reply only with: The most consistent response is Response <number>.",
    "Question: {question}\n\n{responses}\n\nThe most consistent response is",
)
RESPONSES = PassageFormat("Response {rank}: {text}")


def usc_prompt(question: str, replies: Sequence[str]) -> ContextPrompt:
    """The USC selection prompt: the replies numbered from 1 (the last ones are dropped first, counted, when
    the prompt is over the LLM's input budget)."""
    units = [Passage(f"response-{i}", "", text.strip()) for i, text in enumerate(replies, 1)]
    return USC_PROMPT.with_context("responses", RESPONSES.context(units), question=question)


def usc_choice(text: str, n: int) -> int | None:
    """The 0-based index of the first "Response <i>" in `text` with 1 <= i <= n; None when there is none."""
    for match in CHOICE.finditer(text):
        if 1 <= int(match.group(1)) <= n:
            return int(match.group(1)) - 1
    return None
