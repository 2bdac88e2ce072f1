"""PruningRAG's answer prompts (spec/pruningrag.md §7, paraphrased) and the false-premise examples.

One user message after the system message "You are a helpful assistant.": a task line with the query time,
the guidelines (a false premise → exactly `invalid question`; unsure → `I don't know`; when only the
references may be used, also unsupported by them → `I don't know`, and a grounding line: the "LLM + source"
variants drop both, as the code's LLM_WEB / LLM_KG / LLM_ALL prompts do; short answers), optional false-premise
examples (ICL, N per prompt, from the query's own domain as the code's routed pipeline does, or from other domains
as the paper recommends: `icl_examples`), then `### Query Time`, `### References`, `### Question` and the cue:
`### Answer`, or `### Thought` for the chain-of-thought variant, whose answer is read after `### Final Answer`.
"""

from __future__ import annotations

from collections.abc import Sequence

from hoprag.llm.prompts import ChatPrompt, Context, ContextPrompt

SYSTEM = "You are a helpful assistant."
FINAL_MARKER = "### Final Answer"
IDK = "i don't know"
# CRAG's domains in the fixed order the cross-domain examples cycle through
DOMAINS = ("sports", "finance", "music", "movie", "open")
# three false-premise questions per domain (our wording), each with why it is invalid; the first of each is
# the kind the spec lists (§7), the others are further real false premises of the same domain
FALSE_PREMISES = {
    "sports": (
        ("What was the final score of OKC's game today?", "OKC did not play a game that day."),
        ("How many NBA championships did Charles Barkley win?", "Charles Barkley never won an NBA title."),
        ("In which year did Lionel Messi win the Ballon d'Or as a Real Madrid player?",
         "Messi never played for Real Madrid."),
    ),
    "finance": (
        ("Which stock performed worst this week, Amazon?", "the question names one stock as a set."),
        ("What dividend did Berkshire Hathaway pay per share in 2023?", "Berkshire Hathaway pays no dividend."),
        ("How much did Tesla pay to acquire Twitter in 2022?", "Elon Musk, not Tesla, bought Twitter."),
    ),
    "music": (
        ("How long was Phil Rudd the drummer of Van Halen?", "Phil Rudd drummed for AC/DC, not Van Halen."),
        ("On which Beatles album did Mick Jagger sing lead vocals?", "Mick Jagger sang for the Rolling Stones."),
        ("How many Grammys did Bob Marley win while he was alive?", "Bob Marley won no Grammy in his lifetime."),
    ),
    "movie": (
        ("When was Soul released on Hulu?", "Soul was released on Disney+, not Hulu."),
        ("Which Oscar did Leonardo DiCaprio win for Titanic?", "DiCaprio was not nominated for Titanic."),
        ("Which Pixar film did Hayao Miyazaki direct?", "Miyazaki directed for Studio Ghibli, never for Pixar."),
    ),
    "open": (
        ("When did Hamburg become the biggest city in Germany?", "Berlin, not Hamburg, is the biggest."),
        ("In which year did Canada adopt the euro?", "Canada uses the Canadian dollar, never the euro."),
        ("When did Albert Einstein win his second Nobel Prize?", "Einstein won one Nobel Prize, in physics."),
    ),
}  # fmt: skip
MAX_ICL = 3  # Table 5's N (the code's `icl`, 0-3)


def icl_examples(domain: str | None, n: int, cross_domain: bool) -> list[tuple[str, str]]:
    """The `n` (0-3) false-premise examples a question of `domain` is shown, always the same ones.

    Same domain (`cross_domain=False`, the code's routed pipeline): the first `n` examples of that domain.
    Cross domain (the paper's N*, Table 5): the first example of each of the `n` domains that follow the
    question's own in `DOMAINS`, cyclically (music: movie, open, sports), so none is from its domain and the
    examples differ between domains. A domain outside `DOMAINS` (or None: no domain known) has no examples of
    its own: both modes give the first example of the first `n` domains of `DOMAINS`.
    """
    if not 0 <= n <= MAX_ICL:
        raise ValueError(f"icl must be in 0..{MAX_ICL}, got {n}")
    if domain not in FALSE_PREMISES:
        return [FALSE_PREMISES[d][0] for d in DOMAINS[:n]]
    if not cross_domain:
        return list(FALSE_PREMISES[domain][:n])
    at = DOMAINS.index(domain)
    following = DOMAINS[at + 1 :] + DOMAINS[:at]
    return [FALSE_PREMISES[d][0] for d in following[:n]]


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
    return output[at + len(FINAL_MARKER) :].strip(" :\n"), True
