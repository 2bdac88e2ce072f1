"""AmbigDocs (Lee et al., 2024; `yoonsanglee/AmbigDocs` on the HF hub, e.g. `test.json`, which TreeRare
reads as `AmbigDoc_test.json`): a question about a name shared by several entities.

One JSON list of `{question, ambiguous_entity, qid, documents: [{title, text, pid, answer}]}`: each
document is a DPR wiki-2018 passage (`pid`) about one of the entities, its `title` the disambiguated
entity and `answer` that entity's answer. `ambiguous_entity` is the shared name, sometimes with a
"(disambiguation)" suffix, as the Wikipedia page it came from.

The documents become the question's `context` (so `corpus: null` is the paper's gold-only setting) and
their titles the supporting titles; `answers` are their answers. What the AmbigDocs metrics read (answer
and entity recall) is `metadata["ambiguity"] = {"ambiguous_entity", "documents": [{"title", "answer"}]}`,
which the runner keeps in each prediction record; the `pid`s stay in `metadata["pids"]`.
"""

from __future__ import annotations

from typing import Any

from hoprag.data import validation as check
from hoprag.data.corpus import make_passage, unique_passages
from hoprag.data.records import distinct, extra_fields
from hoprag.data.types import QAExample

AMBIGDOCS_KEYS = ("qid", "question", "ambiguous_entity", "documents")


def parse_ambigdocs(record: dict[str, Any]) -> QAExample:
    documents = check.objects(record["documents"], "documents")
    titles = [check.text(d["title"], f"documents[{i}].title") for i, d in enumerate(documents)]
    texts = [check.text(d["text"], f"documents[{i}].text") for i, d in enumerate(documents)]
    answers = [check.answer(d["answer"], f"documents[{i}].answer") for i, d in enumerate(documents)]
    pids = [check.identifier(d["pid"], f"documents[{i}].pid") for i, d in enumerate(documents)]
    entity = check.question(record["ambiguous_entity"], "ambiguous_entity")
    return QAExample(
        id=check.identifier(record["qid"], "qid"),
        question=check.question(record["question"]),
        answers=distinct(answers),
        dataset="ambigdocs",
        supporting_titles=distinct(titles),
        context=unique_passages(make_passage(title, text) for title, text in zip(titles, texts)),
        metadata={
            **extra_fields(record, AMBIGDOCS_KEYS),
            "pids": pids,
            "ambiguity": {
                "ambiguous_entity": entity,
                "documents": [{"title": t, "answer": a} for t, a in zip(titles, answers)],
            },
        },
    )
