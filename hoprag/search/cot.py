"""Chain-of-thought prompting, shared by the `cot`, `self_consistency` and `tot` baselines.

The prompts ask for TreeRare's answer form (spec/treerare.md §3 items 4 and 6, App. B),
`#Explanations: <step-by-step reasoning>` then `#FINAL: The answer is <answer>.`: zero-shot with the trigger
"Let's think step by step" (Kojima et al. 2022), or few-shot with 3 in-dataset exemplars
(`hoprag/search/cot_exemplars.py`), each with or without the retriever's passages (a shortenable context,
fitted to the LLM's input budget and counted by `hoprag.llm.prompts`). `task: ambiguous` asks for a long-form
answer holding every correct answer after `#FINAL:` (TreeRare's ASQA / AmbigDocs form), as the ASQA and
AmbigDocs exemplars show it.

`read_final` reads a reply: the answer is the extractor's reading of the text after the last FINAL marker
(so "The answer is X." gives "X"); without the marker it is the extractor's reading of the whole reply, the
documented fallback, and a parse failure.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hoprag.data.types import Passage
from hoprag.llm.prompts import ChatPrompt, ContextPrompt, PassageFormat, Prompt
from hoprag.search.cot_exemplars import Exemplar, LongFormExemplar
from hoprag.search.treerare.parsing import final_answer

MODES = ("zero_shot", "few_shot")
TASKS = ("multihop", "ambiguous")
TRIGGER = "Let's think step by step."
ANSWER_LINES = {  # the final line each task asks for (few-shot exemplars show theirs: `Exemplar.final`)
    "multihop": "#FINAL: The answer is <a short answer of a few words>.",
    "ambiguous": "#FINAL: <a long-form answer that contains every correct answer>",
}
AMBIGUOUS = (
    " The question may be ambiguous and have several correct answers: then the final answer is a long-form"
    " answer that contains all of them."
)


def read_final(text: str, task: str, extractor: Callable[[str], Any]) -> tuple[str, bool]:
    """(answer, parse failed): multi-hop answers the `extractor`'s (a method's `AnswerExtractor`) reading of
    the text after FINAL, ambiguous ones the whole long-form text after it; without the marker, the
    extractor's reading of the whole reply (a failure)."""
    after = final_answer(text)
    if task == "ambiguous":
        return (text.strip(), True) if after is None else (after, not after)
    if after is None:
        return extractor(text).answer, True
    extraction = extractor(after)
    return extraction.answer, extraction.failed


@dataclass(frozen=True)
class CoTPrompt:
    """Builds the prompts: the system message holds the instructions (and the exemplars), the user message
    the passages (when given), the question and what is asked (`ask`)."""

    mode: str = "few_shot"
    exemplars: tuple[Exemplar, ...] = ()
    task: str = "multihop"
    passages: PassageFormat = field(default_factory=PassageFormat)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"method.mode must be one of {MODES}, got {self.mode!r}")
        if self.task not in TASKS:
            raise ValueError(f"method.task must be one of {TASKS}, got {self.task!r}")
        if self.mode == "few_shot" and not self.exemplars:
            raise ValueError("method.mode=few_shot needs exemplars (method.exemplars=<dataset>)")
        if self.task != "ambiguous" and any(isinstance(e, LongFormExemplar) for e in self.exemplars):
            raise ValueError("the ASQA and AmbigDocs exemplars answer in long form: set method.task=ambiguous")

    @property
    def few_shot(self) -> bool:
        return self.mode == "few_shot"

    @property
    def answer_line(self) -> str:
        """The task's final line: a short answer (multi-hop) or a long-form one (ambiguous)."""
        return ANSWER_LINES[self.task]

    def instructions(self, lead: str) -> str:
        """`lead` plus the ambiguous-task note."""
        return lead + (AMBIGUOUS if self.task == "ambiguous" else "")

    def build(self, system: str, question: str, ask: str, passages: Sequence[Passage] | None) -> Prompt | ContextPrompt:
        """Chat messages; with `passages` (even none found) a `ContextPrompt` whose passages can be shortened."""
        if passages is None:
            return ChatPrompt(system, "Question: {question}\n{ask}")(question=question, ask=ask)
        chat = ChatPrompt(system, "Passages:\n{passages}\n\nQuestion: {question}\n{ask}")
        return chat.with_context("passages", self.passages.context(passages), question=question, ask=ask)

    def __call__(self, question: str, passages: Sequence[Passage] | None = None) -> Prompt | ContextPrompt:
        """The CoT prompt: the reply is the whole `#Explanations … #FINAL` answer."""
        reply = f"#Explanations: <your reasoning, step by step>\n{self.answer_line}"
        system = self.instructions("Answer the question. Reply in this format:\n" + reply)
        if self.few_shot:
            shown = "\n\n".join(f"Question: {e.question}\nAnswer: {e.explained()}" for e in self.exemplars)
            system += "\n\nExamples:\n\n" + shown
        ask = "Answer:" if self.few_shot else f"{TRIGGER}\nAnswer:"
        return self.build(system, question, ask, passages)
