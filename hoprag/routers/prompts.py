"""PruningRAG's answer prompts (spec/pruningrag.md §7, paraphrased) and the false-premise examples.

One user message after the system message "You are a helpful assistant.": a task line with the query time,
the guidelines (a false premise → exactly `invalid question`; unsure → `I don't know`; when only the
references may be used, also unsupported by them → `I don't know`, and a grounding line: the "LLM + source"
variants drop both, as the code's LLM_WEB / LLM_KG / LLM_ALL prompts do; short answers), optional false-premise
examples (ICL, N per prompt, from the query's own domain as the code's routed pipeline does, or from other domains
as the paper recommends), then `### Query Time`, `### References`, `### Question` and the cue: `### Answer`,
or `### Thought` for the chain-of-thought variant, whose answer is read after `### Final Answer`.
"""

from __future__ import annotations

from collections.abc import Sequence

from hoprag.llm.prompts import ChatPrompt, Context, ContextPrompt

SYSTEM = "You are a helpful assistant."
FINAL_MARKER = "### Final Answer"
IDK = "i don't know"
# one false-premise question per CRAG domain (our wording of the kinds the spec lists), with why it is invalid
FALSE_PREMISES = {
    "sports": ("What was the final score of OKC's game today?", "OKC did not play a game that day."),
    "finance": ("Which stock performed worst this week, Amazon?", "the question names one stock as a set."),
    "music": ("How long was Phil Rudd the drummer of Van Halen?", "Phil Rudd drummed for AC/DC, not Van Halen."),
    "movie": ("When was Soul released on Hulu?", "Soul was released on Disney+, not Hulu."),
    "open": ("When did Hamburg become the biggest city in Germany?", "Berlin, not Hamburg, is the biggest."),
}


def icl_examples(domain: str | None, n: int, cross_domain: bool) -> list[tuple[str, str]]:
    """N false-premise examples: the query's own domain first (the code), or only other domains (the paper's
    N*), in a fixed order."""
    if n < 0 or n > len(FALSE_PREMISES):
        raise ValueError(f"icl must be in 0..{len(FALSE_PREMISES)}, got {n}")
    if cross_domain:
        pool = [d for d in FALSE_PREMISES if d != domain]
    else:
        pool = ([domain] if domain in FALSE_PREMISES else []) + [d for d in FALSE_PREMISES if d != domain]
    return [FALSE_PREMISES[d] for d in pool[:n]]


def answer_prompt(
    question: str,
    query_time: str,
    references: Context | None,
    examples: Sequence[tuple[str, str]] = (),
    cot: bool = False,
    grounded: bool = True,
) -> ContextPrompt | list[dict[str, str]]:
    """The answer prompt; `references` None = the LLM's own knowledge (no references section)."""
    task = ("You are given a Question, References and the Query Time (in PT). The references may or may not "
            "help. Answer the question in as few words as possible." if references is not None else
            "You are given a Question and the Query Time (in PT). Answer the question in as few words as "
            "possible.")  # fmt: skip
    lines = [task, "Guidelines:",
             "- If the question has a factual error or a false premise, reply exactly: invalid question."]  # fmt: skip
    if examples:
        lines += ["  Examples of invalid questions:"] + [f"  - {q} ({why})" for q, why in examples]
    if grounded and references is not None:  # the source-only prompts; "LLM + source" may combine (the code)
        lines.append("- If you are not sure, or the references do not contain the information, reply: I don't know.")
        lines.append("- Use only the references, not your prior knowledge.")
    else:
        lines.append("- If you are not sure, reply: I don't know.")
    lines.append("- Keep the final answer short.")
    if cot:
        lines.append(f"Think step by step. Start with `### Thought` and your reasoning; the last line is "
                     f"`{FINAL_MARKER}` followed by the answer.")  # fmt: skip
    body = "\n".join(lines) + f"\n\n### Query Time\n{query_time}\n"
    cue = "### Thought" if cot else "### Answer"
    if references is None:
        return ChatPrompt(SYSTEM, "{body}### Question\n{question}\n{cue}\n")(body=body, question=question, cue=cue)
    template = ChatPrompt(SYSTEM, "{body}### References\n{refs}\n### Question\n{question}\n{cue}\n")
    return template.with_context("refs", references, body=body, question=question, cue=cue)


def final_answer(output: str, cot: bool) -> tuple[str, bool]:
    """(answer, parsed): the raw output without CoT; with CoT the text after the last `### Final Answer`,
    stripped, or "i don't know" when the marker is missing (the code's fallback; counted)."""
    if not cot:
        return output.strip(), True
    at = output.rfind(FINAL_MARKER)
    if at < 0:
        return IDK, False
    return output[at + len(FINAL_MARKER):].strip(" :\n"), True
