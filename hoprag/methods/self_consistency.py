"""Self-consistency baseline (TreeRare's SC rows, spec/treerare.md App. B): N sampled CoT replies, one answer.

    python eval.py +method=self_consistency data=hotpotqa retriever=bm25 method.k=20   # 10 samples, majority
    python eval.py +method=self_consistency data=asqa method.task=ambiguous method.mode=zero_shot   # USC

The CoT prompt is `cot`'s (mode, exemplars, documents). Each question's `samples` replies come from one prompt
with `n=samples` (one batched call for the batch; a server without `n` is asked once per sample), each
question with its own sampling seed. `vote: majority` votes over the normalised answers, `usc` lets the LLM
pick the most consistent reply (one more batched call); `vote: null` is majority for multi-hop and USC for
`task: ambiguous`, as TreeRare does (`hoprag.search.consistency`: tie rule, unparsed samples, fallbacks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.types import Generation
from hoprag.methods.base import MethodOutput, setting
from hoprag.methods.cot import CoT, cut
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.consistency import Vote, majority_vote, tally, usc_choice, usc_prompt
from hoprag.search.mcts import sample_seed
from hoprag.search.steps import llm_samples, llm_step

VOTES = ("majority", "usc")


class SelfConsistency(CoT):
    """`cot`'s settings, plus `samples` (N), `vote`, `seed` (per-question sampling seeds; null: unseeded)
    and `usc_generation` (sampling of the USC selection call)."""

    name = "self_consistency"

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever | None = None,
        samples: int = 10,
        vote: str | None = None,
        seed: int | None = 0,
        usc_generation: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.vote = chosen_vote(vote, samples, self.prompt.task)
        self.samples = samples
        self.seed = seed
        self.usc_generation = dict(usc_generation or {})

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """`cot`'s checks, and the vote's and the number of samples'."""
        super().check_settings(settings)
        chosen_vote(setting(cls, settings, "vote"), setting(cls, settings, "samples"), setting(cls, settings, "task"))

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        shown = self.documents(examples, costs)
        prompts = [self.prompt(ex.question, passages) for ex, passages in zip(examples, shown)]
        seeds = None if self.seed is None else [sample_seed(self.seed, ex.question, 0) for ex in examples]
        drawn = llm_samples(
            self.llm, prompts, costs, "samples", self.one_by_one, seeds=seeds, n=self.samples, **self.generation
        )
        readings = [[self.read(g.text) for g in replies] for replies in drawn]
        if self.vote == "majority":
            votes = [majority_vote(r) for r in readings]
            selections: list[str | None] = [None] * len(examples)
        else:
            votes, selections = self._usc(examples, drawn, readings, costs)
        return [self._chosen(*row) for row in zip(drawn, readings, votes, selections, shown)]

    def _usc(
        self,
        examples: Sequence[QAExample],
        drawn: Sequence[Sequence[Generation]],
        readings: Sequence[Sequence[tuple[str, bool]]],
        costs: Sequence[Cost],
    ) -> tuple[list[Vote], list[str]]:
        """One batched selection call; each question's vote is for the reply its selection names."""
        prompts = [usc_prompt(ex.question, [g.text for g in replies]) for ex, replies in zip(examples, drawn)]
        picks = llm_step(self.llm, prompts, costs, "usc", self.one_by_one, **self.usc_generation)
        chosen = [usc_choice(pick.text, len(replies)) for pick, replies in zip(picks, drawn)]
        return [tally(r, c or 0) for r, c in zip(readings, chosen)], [p.text for p in picks]

    def _chosen(
        self,
        replies: Sequence[Generation],
        readings: Sequence[tuple[str, bool]],
        vote: Vote,
        selection: str | None,
        passages: list[Passage] | None,
    ) -> MethodOutput:
        prediction, failed = readings[vote.index]
        unparsed = sum(f for _, f in readings)
        trace: dict[str, Any] = {
            "vote": self.vote,
            "samples": [{"output": g.text, "answer": a, "parsed": not f} for g, (a, f) in zip(replies, readings)],
            "chosen": vote.index,
            "passages": [p.id for p in passages or []],
        }
        stats = {
            "samples": float(len(replies)),
            "samples_unparsed": float(unparsed),
            "distinct_answers": float(vote.distinct),
            "vote_share": round(vote.share, 4),
            "llm_steps": 1.0 + (selection is not None),
            "retrievals": float(passages is not None),
            "cut_at_max_tokens": sum(cut(g) for g in replies),
        }
        if selection is not None:
            trace["selection"] = selection
            stats["usc_unparsed"] = float(usc_choice(selection, len(replies)) is None)
        return MethodOutput(prediction, list(passages or []), trace, failed, stats)


def chosen_vote(vote: str | None, samples: int, task: str) -> str:
    """The vote of these settings (null: USC for long-form answers, else majority); refuses an unknown vote or
    fewer than one sample."""
    chosen = vote or ("usc" if task == "ambiguous" else "majority")
    if chosen not in VOTES:
        raise ValueError(f"method.vote must be one of {VOTES} (or null), got {vote!r}")
    if samples < 1:
        raise ValueError(f"method.samples must be positive, got {samples}")
    return chosen
