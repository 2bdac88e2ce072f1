"""ProbTree's four prompts, after the official code's HotpotQA prompts (THU-KEG/ProbTree,
src/hotpotqa/Tree_Generation/prompt.txt, RoHT/cb, RoHT/ob, RoHT/aggregate), written here with our own
demonstrations. Every answering prompt asks for an explanation ending "So the answer is: <answer>.", whose
explanation tokens give the confidence (`reasoning.read_answer`); the open-book prompt allows "Unknown".
A sub-question may name an earlier sibling's answer as <1>, <2> ... (the official tree format).
"""

from __future__ import annotations

from collections.abc import Sequence

from hoprag.data.types import Passage
from hoprag.llm.prompts import ChatPrompt, Context, ContextPrompt, PassageFormat

MARKER = "So the answer is:"

DECOMPOSE = ChatPrompt(
    system=(
        "Write a hierarchical question decomposition tree (HQDT) for the question, in JSON. The root is the "
        "question itself; every other node is a sub-question of its parent; leaves are atomic questions that "
        "need no further decomposition. A sub-question may refer to the answer of an earlier sibling as <1>, "
        "<2>, ...; a sub-question that needs its own decomposition appears as a key of its own.\n"
        "Q: Which river flows through the capital of the country where the Eiffel Tower stands?\n"
        'A: {"Which river flows through the capital of the country where the Eiffel Tower stands?": '
        '["What is the capital of the country where the Eiffel Tower stands?", "Which river flows through <1>?"], '
        '"What is the capital of the country where the Eiffel Tower stands?": '
        '["In which country does the Eiffel Tower stand?", "What is the capital of <1>?"]}.\n'
        'Q: Were the composers of "Yesterday" and "Imagine" born in the same city?\n'
        'A: {"Were the composers of \\"Yesterday\\" and \\"Imagine\\" born in the same city?": '
        '["In which city was the composer of \\"Yesterday\\" born?", '
        '"In which city was the composer of \\"Imagine\\" born?"]}.\n'
        "Q: Who founded the company that makes the iPhone?\n"
        'A: {"Who founded the company that makes the iPhone?": '
        '["Which company makes the iPhone?", "Who founded <1>?"]}.'
    ),
    user="Q: {question}\nA:",
)

CLOSED_BOOK = ChatPrompt(
    system=(
        'Answer the question by thinking step by step, then end with "So the answer is: <answer>."\n'
        "Q: Who founded the company that makes the iPhone?\n"
        "A: The iPhone is made by Apple. Apple was founded by Steve Jobs, Steve Wozniak and Ronald Wayne. "
        "So the answer is: Steve Jobs, Steve Wozniak and Ronald Wayne.\n"
        "Q: Which is older, the Eiffel Tower or the Statue of Liberty?\n"
        "A: The Eiffel Tower was completed in 1889. The Statue of Liberty was dedicated in 1886. Thus the Statue "
        "of Liberty is older. So the answer is: the Statue of Liberty.\n"
        "Q: Is Mount Everest in Nepal?\n"
        "A: Mount Everest lies on the border of Nepal and China. So the answer is: yes."
    ),
    user="Q: {question}\nA:",
)

OPEN_BOOK = ChatPrompt(
    system=(
        "Given a question and relevant Wikipedia text, answer the question and explain why, then end with "
        '"So the answer is: <answer>." If you are unsure, answer Unknown.\n'
        "#1 Wikipedia Title: Seine\nText: The Seine is a river in northern France. It flows through Paris into "
        "the English Channel.\n"
        "Q: Which river flows through Paris?\n"
        "A: The Seine flows through Paris. So the answer is: the Seine."
    ),
    user="{passages}\nQ: {question}\nA:",
)

AGGREGATE = ChatPrompt(
    system=(
        "Given a question and a context of sub-questions with their answers, answer the question and explain "
        'why, then end with "So the answer is: <answer>."\n'
        "Context:\nWhich company makes the iPhone? Apple.\nWho founded Apple? Steve Jobs.\n"
        "Question:\nWho founded the company that makes the iPhone?\n"
        "Answer:\nThe iPhone is made by Apple, which Steve Jobs founded. So the answer is: Steve Jobs."
    ),
    user="Context:\n{context}\nQuestion:\n{question}\nAnswer:",
)

PASSAGES = PassageFormat("#{rank} Wikipedia Title: {title}\nText: {text}", separator="\n")


def open_book_prompt(question: str, passages: Sequence[Passage]) -> ContextPrompt:
    """The open-book prompt; over the LLM's input budget its lowest-ranked passages go first."""
    context: Context = PASSAGES.context(passages)
    return OPEN_BOOK.with_context("passages", context, question=question)


def aggregate_prompt(question: str, children: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The child-aggregating prompt over (sub-question, answer) pairs."""
    return AGGREGATE(question=question, context="\n".join(f"{q} {a}." for q, a in children))
