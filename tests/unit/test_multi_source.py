"""Evidence beyond one corpus: a method that reads each question's own documents and facts from elsewhere
(as PruningRAG reads CRAG's pages and a knowledge graph) is scored by the runner without any corpus."""

from __future__ import annotations

import json

from hoprag.cost import Cost
from hoprag.data.corpus import make_passage
from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods import Method, MethodOutput
from hoprag.metrics import MetricSuite


class TwoSourceMethod(Method):
    """Reads the question's own pages and one knowledge-graph fact; no retriever, no global corpus."""

    name = "two_sources"
    needs_retriever = False

    def answer(self, examples, costs):
        outputs = []
        for ex, cost in zip(examples, costs):
            pages = [Passage(p.id, p.title, p.text, origin="web") for p in ex.context]
            fact = Passage(f"kg:{ex.id}", "knowledge graph", f"{ex.question} -> {ex.metadata['kg']}", origin="kg")
            cost.add_retrieval([p.id for p in pages] + [fact.id], 0.0, stage="sources")
            outputs.append(MethodOutput(ex.metadata["kg"], [*pages, fact]))
        return outputs


EXAMPLES = [
    QAExample("q1", "Who founded Acme?", ["Ada Smith"], supporting_titles=["Acme"],
              context=[make_passage("Acme", "Acme is a company."), make_passage("Other", "Unrelated.")],
              metadata={"kg": "Ada Smith"}),
    QAExample("q2", "Where is Acme based?", ["Paris"], supporting_titles=["Acme HQ"],
              context=[make_passage("Blog", "A post about Paris.")], metadata={"kg": "Lyon"}),
]  # fmt: skip


def test_evidence_from_per_question_documents_and_facts_is_scored_without_a_corpus(tmp_path):
    method = TwoSourceMethod(ScriptedLLM())
    metrics = run(method, EXAMPLES, tmp_path, suite=MetricSuite(ks=[1, 3]))
    assert metrics["em"] == 50.0
    assert metrics["retrieval/passage_recall"] == 50.0  # q1's gold page "Acme" was read, q2's was not
    assert metrics["retrieval/answer_recall"] == 100.0  # q1 by its KG fact, q2 by the blog page
    assert metrics["retrieval/answer_recall@1"] == 50.0  # q2 has it in its top page, q1 only in its fact
    assert metrics["cost/mean/passages_read"] == 2.5
    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert records[0]["retrieved"][-1] == {
        "id": "kg:q1", "title": "knowledge graph", "text": "Who founded Acme? -> Ada Smith", "origin": "kg"
    }  # fmt: skip
    assert {r.get("origin") for r in records[0]["retrieved"]} == {"web", "kg"}


def test_cost_records_accept_any_evidence_ids():
    cost = Cost()
    cost.add_retrieval(["kg:1", "table:3/row:2"], 0.1, stage="sources")
    assert cost.to_dict()["passages_read"] == 2 and cost.to_dict()["seconds"] == {"sources": 0.1}
