"""The shortcut probe (issue 46 item 3): per question, whether the run's LLM answers it without multi-hop
reasoning, so that `compare.py --shortcuts` can report every method again on the genuinely multi-hop rest.

Two probes, as in MuSiQue's disconnected-reasoning test (Trivedi et al., 2022): (a) the closed-book answer, the
question alone (the `no_retrieval` baseline's prompt), and (b) each gold paragraph alone as the only context
(the `standard_rag` prompt over that one passage). A question is a *shortcut* question when (a) or any (b) is
correct: its answer's `metric` (a per-question answer score of `hoprag.metrics.answer_metrics`, as every run's
records hold it) is at least `threshold`. The default, EM = 1 (the normalized answer equals a gold), is the
correctness rule hoprag already uses for PruneRAG's EFR; `metric=f1 threshold=0.8` is a looser one.

    python eval.py +method=shortcut_probe data=hotpotqa [llm=scripted] [method.metric=f1 method.threshold=0.8]

Run it with the compared runs' `llm=` (the flags are the LLM's): it is an ordinary eval run, so its run
directory is the cache (computed once per dataset x LLM, resumed and never mixed with other settings), and its
cost is recorded as any method's. Its record per question holds the closed-book answer (its `prediction`, so the
run's EM/F1 are the closed-book answer's), each single-paragraph answer and the flags (`trace`), and the flags as
figures (`stats`: `shortcut`, `closed_book_correct`, `single_paragraph_correct`, `gold_paragraphs`), which
metrics.json averages as `method/shortcut` (the share of shortcut questions) etc. The gold paragraphs are the
question's context passages with a supporting title (the gold passages every record scores), so a dataset with a
context (HotpotQA, 2Wiki, MuSiQue) probes both ways; a question without one (an open-domain dataset's) is flagged by
its closed-book answer alone, said before any is asked, and counted in the compare report. It retrieves nothing:
its record's `retrieved` is empty, so its run reports no recall.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from hoprag.config import ConfigError
from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, PassageFormat
from hoprag.methods.base import Method, MethodOutput
from hoprag.metrics.answer import answer_metrics
from hoprag.search.steps import llm_step

log = logging.getLogger(__name__)

METRICS = ("em", "f1", "acc", "cover_em", "precision", "recall")  # `answer_metrics`' per-question scores
NAMES = {"em": "EM", "f1": "F1", "acc": "Acc", "cover_em": "cover-EM", "precision": "precision", "recall": "recall"}


def shortcut_rule(metric: str, threshold: float) -> str:
    """The flag rule in words, as metrics.json's `run.shortcut_rule` and the compare report state it."""
    score = f"{NAMES[metric]} = 1" if float(threshold) == 1.0 else f"{NAMES[metric]} ≥ {float(threshold):g}"
    return f"closed-book answer or any single-gold-paragraph answer with {score}"


def gold_paragraphs(example: QAExample) -> list[Passage]:
    """The question's gold paragraphs: its context passages with a supporting title, in context order."""
    supporting = set(example.supporting_titles)
    return [p for p in example.context if p.title in supporting]


class ShortcutProbe(Method):
    """`closed_book`'s user template has a {question} field; `single_paragraph`'s has {question} and {passages}
    (one gold paragraph, written with `passage_template`). `metric` and `threshold` are the flag rule."""

    name = "shortcut_probe"
    needs_retriever = False

    def __init__(
        self,
        llm: LLM,
        closed_book: ChatPrompt,
        single_paragraph: ChatPrompt,
        passage_template: str = "[{rank}] {title}\n{text}",
        metric: str = "em",
        threshold: float = 1.0,
        **kwargs,
    ) -> None:
        self.check_settings({"metric": metric, "threshold": threshold})
        super().__init__(llm, **kwargs)
        self.closed_book = closed_book
        self.single_paragraph = single_paragraph
        self.passages = PassageFormat(passage_template)
        self.metric, self.threshold = metric, float(threshold)

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        metric, threshold = settings.get("metric", "em"), settings.get("threshold", 1.0)
        if metric not in METRICS:
            raise ConfigError(f"method.metric must be one of {list(METRICS)} (answer scores), not {metric!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 < threshold <= 1:
            raise ConfigError(f"method.threshold must be a number in (0, 1], not {threshold!r}")

    def check_questions(self, examples: Sequence[QAExample]) -> None:
        """Say, before any is asked, how many questions have no gold paragraph in their context (an open-domain
        dataset's): their flag rests on the closed-book answer alone (their records' `gold_paragraphs` is 0, and
        the compare report counts them)."""
        missing = [ex.id for ex in examples if not gold_paragraphs(ex)]
        if missing:
            log.warning(
                "%d of %d questions (e.g. %r) have no gold paragraph in their context: their shortcut flag rests on "
                "the closed-book answer alone (a dataset with a context probes both: data=hotpotqa, 2wiki, musique)",
                len(missing), len(examples), missing[0],
            )  # fmt: skip

    def correct(self, answer: str, golds: Sequence[str]) -> bool:
        """The flag rule on one answer: its `metric` against the golds is at least `threshold`."""
        return answer_metrics(answer, golds)[self.metric] >= self.threshold

    def run_info(self) -> dict[str, Any]:
        rule = {"shortcut_rule": shortcut_rule(self.metric, self.threshold), "shortcut_metric": self.metric,
                "shortcut_threshold": self.threshold}  # fmt: skip
        return {**super().run_info(), **rule}

    def _read(self, text: str, golds: Sequence[str]) -> dict[str, Any]:
        extraction = self.extractor(text)
        return {"answer": extraction.answer, "output": text, "parse_failed": extraction.failed,
                "correct": self.correct(extraction.answer, golds)}  # fmt: skip

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        """Two batched calls: every question's closed-book prompt, then every gold paragraph's prompt, each
        charged to its question."""
        closed = llm_step(self.llm, [self.closed_book(question=ex.question) for ex in examples], costs,
                          "closed_book", **self.generation)  # fmt: skip
        golds = [gold_paragraphs(ex) for ex in examples]
        owners = [i for i, paragraphs in enumerate(golds) for _ in paragraphs]
        prompts = [
            self.single_paragraph.with_context("passages", self.passages.context([p]), question=examples[i].question)
            for i, paragraphs in enumerate(golds) for p in paragraphs
        ]  # fmt: skip
        singles = iter(llm_step(self.llm, prompts, [costs[i] for i in owners], "single_paragraph", **self.generation))
        outputs = []
        for ex, generation, paragraphs in zip(examples, closed, golds):
            book = self._read(generation.text, ex.answers)
            each = [{"title": p.title, **self._read(next(singles).text, ex.answers)} for p in paragraphs]
            single = any(s["correct"] for s in each)
            trace = {"closed_book": book, "single_paragraph": each, "shortcut": book["correct"] or single}
            stats = {"shortcut": float(trace["shortcut"]), "closed_book_correct": float(book["correct"]),
                     "single_paragraph_correct": float(single), "gold_paragraphs": float(len(paragraphs))}  # fmt: skip
            outputs.append(MethodOutput(book["answer"], [], trace, book["parse_failed"], stats))
        return outputs
