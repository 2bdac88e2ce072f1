"""Search-o1 (Li et al., 2025): the model searches inside its own reasoning; a Reason-in-Documents call condenses
what was found back into it.

    python eval.py +method=search_o1 data=hotpotqa [method.max_turns=7] [method.max_searches=7] [method.k=5]

Each turn the model continues its reasoning (an assistant prefill: the reasoning so far) and stops at
"<|end_search_query|>". A query between the search markers retrieves the top k passages; one batched
Reason-in-Documents call reads them with the reasoning so far (lines as steps; past 5 steps only the first,
the last 4 and the search steps are kept, as the official code does) and its "**Final Information**" is
inserted between "<|begin_search_result|>" and "<|end_search_result|>"; the reasoning then continues. A
turn without a query ends the reasoning. The answer is the last \\boxed{...} of the reasoning (empty, and a
parse failure, without one). Settings of PruneRAG's `run_baselines.sh`: at most 7 turns (a question still
searching then is answered from its reasoning so far, counted `method/max_turns_reached`), at most 7
searches (a later query gets "The maximum search limit is exceeded", counted `method/search_limit_hits`; a
repeated one "You have searched this query", counted `method/repeated_searches`), top 5. A Reason-in-Documents
output without "**Final Information**" keeps its last 5 lines (counted `method/rid_format_failures`).
"""

from __future__ import annotations

import re
from typing import Any

from hoprag.data.types import Passage
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, ContextPrompt
from hoprag.llm.types import Generation
from hoprag.methods.turn_method import TurnBasedMethod
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.turns import TurnLoop, TurnState, transcript_context

BEGIN_QUERY, END_QUERY = "<|begin_search_query|>", "<|end_search_query|>"
BEGIN_RESULT, END_RESULT = "<|begin_search_result|>", "<|end_search_result|>"
FINAL_INFO = "**Final Information**"
LIMIT_NOTE = "The maximum search limit is exceeded. You are not allowed to search."
REPEAT_NOTE = "You have searched this query. Please refer to previous results."


class SearchO1(TurnBasedMethod):
    """`prompt`'s user template has {question} and {max_searches}; `rid_prompt`'s has {previous} (the
    reasoning so far), {query} and {documents} (the passages, written with `passage_template`);
    `rid_generation` samples the Reason-in-Documents calls."""

    name = "search_o1"
    counters = ("search_limit_hits", "repeated_searches", "rid_format_failures")

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        prompt: ChatPrompt,
        rid_prompt: ChatPrompt,
        max_searches: int = 7,
        rid_generation: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.prompt, self.rid_prompt, self.max_searches = prompt, rid_prompt, max_searches
        self.rid_generation = dict(rid_generation or {})

    def required_capabilities(self) -> dict[str, str]:
        return {"prefill": "no switch: Search-o1 continues its own reasoning; use an in-process LLM (llm=hf)"}

    def turn_prompt(self, state: TurnState, turn: int) -> ContextPrompt:
        fields = {"question": state.example.question, "max_searches": self.max_searches}
        return ContextPrompt(
            lambda text: self.prompt(prefill=text or None, **fields), transcript_context(state.segments)
        )

    def turn_params(self, turn: int) -> dict[str, Any]:
        return {**self.generation, "stop": [END_QUERY]}

    def read_turn(self, state: TurnState, generation: Generation, turn: int) -> str | None:
        text = generation.text
        state.steps.append({"turn": turn, "output": text})
        start = text.rfind(BEGIN_QUERY)
        query = text[start + len(BEGIN_QUERY) :].strip() if start >= 0 and generation.finish_reason == "stop" else ""
        if not query:
            state.segments.append(text)
            self.conclude(state)
            return None
        state.segments.append(text + END_QUERY)
        asked = [step.get("query") for step in state.steps]
        state.steps[-1]["query"] = query
        limited = state.searches >= self.max_searches
        if limited or query in asked:
            state.count("search_limit_hits" if limited else "repeated_searches")
            note = LIMIT_NOTE if limited else REPEAT_NOTE
            state.segments.append(f"\n{BEGIN_RESULT}\n{note}\n{END_RESULT}\n")
            return None
        return query

    def observe(self, loop: TurnLoop, states: list[TurnState], queries: list[str], hits: list[list[Passage]]) -> None:
        prompts = [
            self.rid_prompt.with_context(
                "documents", self.passages.context(passages), previous=previous_steps("".join(s.segments)), query=q
            )
            for s, q, passages in zip(states, queries, hits)
        ]
        generations = loop.generate(states, prompts, "reason_in_documents", **self.rid_generation)
        for state, passages, generation in zip(states, hits, generations):
            state.take(passages)
            info, found = final_information(generation.text)
            state.count("rid_format_failures", not found)
            state.steps[-1].update(passages=[p.id for p in passages], rid_output=generation.text, result=info)
            state.segments.append(f"\n\n{BEGIN_RESULT}{info}{END_RESULT}\n\n")

    def force_finish(self, loop: TurnLoop, states: list[TurnState]) -> None:
        """The official pipeline's rule at `max_turns`: the answer is read from the reasoning so far."""
        for state in states:
            self.conclude(state)

    def conclude(self, state: TurnState) -> None:
        answer = last_boxed("".join(state.segments))
        state.finish(answer or "", failed=not answer)


def previous_steps(reasoning: str) -> str:
    """The reasoning as numbered steps (one per line); past 5 steps, the first, the last 4 and every step with
    a search query or result are kept and each run of the others becomes one "..." (the official rule)."""
    lines = reasoning.replace("\n\n", "\n").split("\n")
    steps = [f"Step {i}: {line}" for i, line in enumerate(lines, 1)]
    if len(steps) <= 5:
        return "\n\n".join(steps)
    kept: list[str] = []
    for i, step in enumerate(steps):
        if i == 0 or i >= len(steps) - 4 or BEGIN_QUERY in step or BEGIN_RESULT in step:
            kept.append(step)
        elif not kept or kept[-1] != "...":
            kept.append("...")
    return "\n\n".join(kept)


def final_information(output: str) -> tuple[str, bool]:
    """The text after the last "**Final Information**", or (not found) the output's last 5 lines."""
    if FINAL_INFO in output:
        return output.rsplit(FINAL_INFO, 1)[1].replace("\n", " ").strip(" :`"), True
    return "\n".join(output.strip().replace("\n\n", "\n").split("\n")[-5:]), False


def last_boxed(text: str) -> str | None:
    """The content of the last \\boxed{...} (braces balanced), with \\text{...} unwrapped and surrounding
    parentheses stripped; None without a complete box."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            content = re.sub(r"\\text\{(.*?)\}", r"\1", text[i + 1 : j]).strip()
            return content.strip("()").strip()
    return None
