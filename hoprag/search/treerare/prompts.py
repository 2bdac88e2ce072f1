"""TreeRare's prompts, after the paper's Appendix G (spec/treerare.md §3), in hoprag's words.

QG (per node, task-specific) writes search queries about the node's phrase, `response: q1; q2; ...`; SAG
(per node, shared) condenses the retrieved passages into one short evidence paragraph; FAG (once per
question, task-specific) answers from all evidence, `Explanations:` then `FINAL:`. The evidence and the
documents are each a prompt's shortenable context (`hoprag.llm.prompts`); everything else is instructions.
"""

from __future__ import annotations

from hoprag.llm.prompts import ChatPrompt, PassageFormat

TASKS = ("multihop", "ambiguous")

QG = {
    "multihop": ChatPrompt(
        system="You are an expert analyzing a phrase within a main query.",
        user=(
            "Main query: {question}\nPhrase: {phrase}\n{child_queries}\n"
            "Here is what we currently know:\nDocuments:\n{context}\n\n"
            "1. Generate at most 5 simple questions that mainly ask about the phrase and help to understand the "
            "main query. Each question must be single-hop, clear and search-friendly.\n"
            "2. Using the documents, pick the top {n} questions that best decompose the main query toward its "
            "final answer.\n"
            "Reply strictly in this format:\nresponse: question1; question2; question3"
        ),
    ),
    "ambiguous": ChatPrompt(
        system="You are a disambiguation expert.",
        user=(
            "Main query: {question}\nPhrase: {phrase}\n{child_queries}\n"
            "1. Analyze the query for these types of ambiguity: temporal, entity, semantic (polysemy), scope, "
            "intent, cultural, quantitative, linguistic (syntax or reference), categorical and contextual "
            "(background knowledge).\n"
            "2. Go through the phrase word by word and write disambiguated questions, one for each meaning.\n"
            "Here is what we currently know:\nDocuments:\n{context}\n\n"
            "Pick the top {n} questions that best disambiguate the query and cover its different meanings.\n"
            "Reply strictly in this format:\nresponse: question1; question2; question3"
        ),
    ),
}

SAG = ChatPrompt(
    system="You answer questions from documents.",
    user=(
        "Questions: {questions}\n\nDocuments:\n{context}\n\n"
        "Answer the questions using the documents. Find as many answers as possible for each question; if the "
        "documents lack the information, answer from your own knowledge. Reply with all the answers in one short "
        "paragraph, as specific as possible."
    ),
)

FAG = {
    "multihop": ChatPrompt(
        system="You answer questions using documents.",
        user=(
            "Question: {question}\n\nDocuments:\n{context}\n\n"
            "Answer the question using the documents. Let's think step by step.\n"
            "Reply in this format:\nExplanations: <your step-by-step analysis>\n"
            "FINAL: <the concise answer, only a few words>"
        ),
    ),
    "ambiguous": ChatPrompt(
        system="You answer questions using documents.",
        user=(
            "Question: {question}\n\nDocuments:\n{context}\n\n"
            "The question may be ambiguous and have several correct answers. Read all the documents and use them "
            "and your own knowledge; if the question is ambiguous, give a long-form answer that contains all the "
            "correct answers. Let's think step by step.\n"
            "Reply only in this format:\nExplanations (Step 2): <your step-by-step analysis>\n"
            "FINAL (Step 2): <the answer>"
        ),
    ),
}

# evidence (SAG paragraphs, or raw passages in the ablations) as the official code shows it: `#context: ...`
EVIDENCE = PassageFormat("#context: {text}", "\n")
NO_EVIDENCE = "(none yet)"


def child_queries_block(children: dict[str, list[str]]) -> str:
    """The children's queries as the parent's QG prompt shows them ("questions asked by other experts")."""
    if not children:
        return ""
    lines = [f'- about "{phrase}": {"; ".join(queries)}' for phrase, queries in children.items()]
    return "Questions other experts asked about parts of the phrase:\n" + "\n".join(lines) + "\n"
