"""PruneRAG's prompts, written for hoprag (the paper prints none; roles follow the official code, spec §3/§9.3).

The decision prompt is assembled from the actions a run offers, so the ablations are switches: without
"answer" (w/o Ans.), without "entity" (w/o Ent.), decomposition only (w/o Ada., or depths up to
`all_decom_depth`). Every prompt is a single user message, as the code sends them, unless a small-model
option adds turns: examples as earlier chat turns, or an assistant prefill that starts the reply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hoprag.llm.base import Message
from hoprag.search.prunerag.parsing import ANSWER, DECOMPOSITION, ENTITY

RULES = {
    ANSWER: 'answer it directly, only if you are completely sure the context supports the answer; keep the answer '
    "short (a name, date, number or phrase)",
    DECOMPOSITION: "split it into {n} simpler sub-queries that are logically linked and together answer the query "
    "(the parent query is the overall goal)",
    ENTITY: "if it can be neither answered nor split, name {n} entities (or {n} views of one entity) whose passages "
    "should be retrieved to answer it",
}
# worked examples with two items each (shown when branching is 2)
EXAMPLES = {
    ANSWER: (
        "Context: The Eiffel Tower was completed in 1889 for the World's Fair.",
        "Parent query: ROOT",
        "Query: When was the Eiffel Tower completed?",
        {"type": ANSWER, "answer": "1889"},
    ),
    DECOMPOSITION: (
        "Context: Jaws is a 1975 thriller film directed by Steven Spielberg.",
        "Parent query: ROOT",
        "Query: In which city was the director of Jaws born?",
        {"type": DECOMPOSITION, "subquery1": "Who directed Jaws?", "subquery2": "Where was Steven Spielberg born?"},
    ),
    ENTITY: (
        "Context: (nothing about the film)",
        "Parent query: Where was the director of Nightwatch born?",
        "Query: Who directed Nightwatch?",
        {"type": ENTITY, "entity1": "Nightwatch (film)", "entity2": "Director of Nightwatch"},
    ),
}
EXAMPLE_PLACES = ("inline", "chat", "none")
REFLECTION = (
    "\nNote: your last action for this query was a direct answer, but its confidence was very low. "
    "Reconsider which action to take."
)


def _template(action: str, branching: int) -> dict[str, str]:
    if action == ANSWER:
        return {"type": ANSWER, "answer": "..."}
    prefix = "subquery" if action == DECOMPOSITION else "entity"
    return {"type": action, **{f"{prefix}{i}": "..." for i in range(1, branching + 1)}}


def decision_prompt(
    context: str,
    parent_query: str,
    query: str,
    actions: Sequence[str],
    branching: int = 2,
    retry: bool = False,
    prefix: str = "",
    examples: str = "inline",
) -> list[Message]:
    """The per-node decision: exactly one of `actions`, as one JSON object in a ```json block.

    The worked examples (when `branching` is 2) sit `inline` in the one user message (the default), or as
    earlier `chat` turns (user: the example's input, assistant: its JSON), which small models imitate more
    readily, or `none`. A `prefix` becomes the start of the assistant's reply (a prefill the model continues).
    """
    if examples not in EXAMPLE_PLACES:
        raise ValueError(f"decision_examples must be one of {EXAMPLE_PLACES}, got {examples!r}")
    lines = ["You are building a decomposition tree to answer a question. Read the context and the query, then "
             "choose exactly one action:"]  # fmt: skip
    for action in actions:
        lines.append(f'- "{action}": {RULES[action].format(n=branching)}. Output: '
                     f"{json.dumps(_template(action, branching))}")  # fmt: skip
    lines += [
        "Ignore passages that are not relevant. Every value is a string. Reply with a single JSON object in a "
        "```json code block and nothing else.",
    ]
    shown = [EXAMPLES[a] for a in actions] if branching == 2 and examples != "none" else []
    turns: list[Message] = []
    if shown and examples == "inline":
        lines.append("\nExamples:")
        for *given, output in shown:
            lines += [*given, f"Output:\n```json\n{json.dumps(output)}\n```\n"]
    elif shown:  # chat: the instructions open the first example's turn
        for i, (*given, output) in enumerate(shown):
            text = "\n".join((lines if i == 0 else []) + ["", *given, "Output:"]).strip()
            turns += [{"role": "user", "content": text}, {"role": "assistant", "content": json.dumps(output)}]
        lines = []
    lines += [f"Context:\n{context}", f"\nParent query: {parent_query}", f"Query: {query}", "Output:"]
    text = "\n".join(lines).strip() + (REFLECTION if retry else "")
    return _with_prefix([*turns, {"role": "user", "content": text}], prefix)


def final_prompt(tree_json: str, question: str, prefix: str = "") -> list[Message]:
    """The single-call aggregation over the serialized tree (the code's "Inference Tree" prompt); a
    `prefix` (e.g. `\\boxed{`) starts the assistant's reply."""
    text = (
        "An inference tree was built for the question below. Each node holds a query, the answer found for it "
        "(if any) and context passages.\n\n### Inference Tree:\n"
        f"{tree_json}\n\n"
        "Use the tree where it helps. Give a short answer, not a sentence, inside \\boxed{}"
        + ("" if prefix else ", e.g. \\boxed{Paris}")  # no example after a prefilled box: small models copy it
        + ".\n"
        f"\n### Question: {question}\n### Answer:"
    )
    return _with_prefix([{"role": "user", "content": text}], prefix)


def summary_prompt(entity: str, parent_query: str, passages: str) -> list[Message]:
    """Recursive aggregation (eq. 5 iii): an entity node's passages summarized into evidence."""
    text = (
        f"Passages:\n{passages}\n\nIn one or two sentences, state what these passages say about {entity} that "
        f"helps answer: {parent_query}\nEvidence:"
    )
    return [{"role": "user", "content": text}]


def node_answer_prompt(query: str, evidence: str, boxed: bool, prefix: str = "") -> list[Message]:
    """Recursive aggregation (eq. 5 ii): a query node answered from its children's results (or its own
    passages when it has no children); the root answers in `\\boxed{}`, its reply started by `prefix`."""
    form = ("inside \\boxed{}" + ("" if prefix else ", e.g. \\boxed{Paris}")) if boxed else "on one line"
    text = f"Evidence:\n{evidence}\n\nAnswer the query with a short phrase, not a sentence, {form}.\n"
    text += f"Query: {query}\nAnswer:"
    return _with_prefix([{"role": "user", "content": text}], prefix if boxed else "")


def _with_prefix(messages: list[Message], prefix: str) -> list[Message]:
    """`messages`, plus an assistant message `prefix` for the model to continue when one is given."""
    return messages + ([{"role": "assistant", "content": prefix}] if prefix else [])
