"""PruningRAG's routing plug-in (spec/pruningrag.md behaviour 16): only the chosen sources are consulted, the
answerer is unchanged, abstentions cost no answer call, and every figure is per question."""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods.pruningrag import PruningRAG, reference_context
from hoprag.routers.router import LLMRouter
from hoprag.routers.sources.base import ContextSource, ParametricSource


class RecordingSource:
    def __init__(self, name: str, n: int = 2) -> None:
        self.name, self.n, self.asked = name, n, []

    def fetch(self, examples, costs):
        self.asked += [ex.id for ex in examples]
        for c in costs:
            c.add_retrieval([f"{self.name}-{i}" for i in range(self.n)], 0.0, stage=self.name)
        return [[Passage(f"{ex.id}:{self.name}:{i}", "", f"{self.name} fact {i} for {ex.id}", self.name)
                 for i in range(self.n)] for ex in examples]  # fmt: skip


EXAMPLES = [
    QAExample("q1", "What is the stock price of Funko today?", ["$7.16"], metadata={"domain": "finance"}),
    QAExample("q2", "Who directed Jaws?", ["Steven Spielberg"], metadata={"domain": "movie"}),
    QAExample("q3", "Where did the band break up?", ["Paris"], metadata={"domain": "music"}),
]


def world(router_replies):
    web, api = RecordingSource("web"), RecordingSource("api")
    router_llm = ScriptedLLM(rules=[(q.question.replace("?", r"\?"), r) for q, r in zip(EXAMPLES, router_replies)])
    answer_llm = ScriptedLLM(rules=[(r"### Answer", "Paris")])
    sources = {"web": web, "api": api, "llm": ParametricSource()}
    return web, api, answer_llm, LLMRouter(router_llm, none_policy="abstain"), sources


def test_only_the_routed_sources_are_consulted_and_abstention_skips_the_answer_call():
    web, api, answer_llm, router, sources = world(["b", "c", "d"])
    method = PruningRAG(answer_llm, sources, router)
    costs = [Cost() for _ in EXAMPLES]
    outs = method.answer(EXAMPLES, costs)
    assert api.asked == ["q1"] and web.asked == []  # q2 → llm: no retrieval, no API call
    assert [o.trace["sources"] for o in outs] == [["api"], ["llm"], ["abstain"]]
    assert outs[2].prediction == "I don't know" and costs[2].llm_calls == 1  # the router's call only
    prompts = answer_llm.calls[0].texts
    assert len(prompts) == 2 and "### References" in prompts[0] and "### References" not in prompts[1]
    assert outs[0].stats["route/api"] == 1.0 and outs[0].stats["route/web"] == 0.0 and outs[0].stats["context_tokens"] > 0
    assert outs[1].stats["context_tokens"] == 0.0 and costs[0].retrieval_calls == 1 and costs[1].retrieval_calls == 0


def test_fixed_sources_consult_exactly_those_for_every_question():
    web, api, answer_llm, router, sources = world(["a", "a", "a"])
    outs = PruningRAG(answer_llm, sources, strategy="fixed", fixed=["web", "api"]).answer(EXAMPLES, [Cost() for _ in EXAMPLES])
    assert web.asked == api.asked == ["q1", "q2", "q3"]
    assert all(len(o.retrieved) == 4 and {p.origin for p in o.retrieved} == {"web", "api"} for o in outs)
    with pytest.raises(ValueError, match="not configured"):
        PruningRAG(answer_llm, sources, strategy="fixed", fixed=["kg"])
    with pytest.raises(ValueError, match="needs a router"):
        PruningRAG(answer_llm, sources)


def test_tatqa_sources_are_the_questions_own_table_or_text():
    ex = QAExample("t1", "What was revenue in 2019?", ["5"], context=[
        Passage("t1:table", "table", "Revenue | 2019 | 5", "table"), Passage("t1:p1", "", "Revenue grew.", "text")])  # fmt: skip
    router = LLMRouter(ScriptedLLM(default_reply="a"), options="tatqa")
    llm = ScriptedLLM(rules=[(r"### Answer", "5")])
    sources = {"table": ContextSource("table"), "text": ContextSource("text")}
    (out,) = PruningRAG(llm, sources, router).answer([ex], [Cost()])
    assert [p.origin for p in out.retrieved] == ["table"] and out.prediction == "5"


def test_references_follow_the_codes_format():
    units = [Passage("1", "", "one"), Passage("2", "", "two")]
    assert reference_context([]).text() == "No References"
    assert reference_context(units[:1]).text() == "one"
    assert reference_context(units).text() == "<DOC>\none\n</DOC>\n\n<DOC>\ntwo\n</DOC>"


def test_a_cot_answer_without_the_final_marker_is_a_counted_failure_read_as_i_dont_know():
    llm = ScriptedLLM(rules=[(r"### Thought", "I think it is Paris.")])
    outs = PruningRAG(llm, {"web": RecordingSource("web")}, strategy="fixed", cot=True).answer(EXAMPLES[:1], [Cost()])
    assert outs[0].prediction == "i don't know" and outs[0].parse_failed


def test_a_route_to_an_unavailable_source_is_counted_and_answered_without_it():
    web, api, answer_llm, router, sources = world(["b", "a", "c"])
    sources["api"] = None  # e.g. no mock API server in this run
    outs = PruningRAG(answer_llm, sources, router).answer(EXAMPLES, [Cost() for _ in EXAMPLES])
    assert [o.stats["route_unavailable"] for o in outs] == [1.0, 0.0, 0.0]
    assert outs[0].retrieved == [] and web.asked == ["q2"]
    assert "### References" not in answer_llm.calls[0].texts[0]  # no source left: the LLM's own knowledge
    with pytest.raises(ValueError, match="not configured"):
        PruningRAG(answer_llm, sources, strategy="fixed", fixed=["api"])
