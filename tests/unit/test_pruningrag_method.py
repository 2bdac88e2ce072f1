"""PruningRAG's routing plug-in (spec/pruningrag.md behaviour 16): only the chosen sources are consulted, the
answerer is unchanged, abstentions cost no answer call, and every figure is per question."""

from __future__ import annotations

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods.pruningrag import PruningRAG, reference_context
from hoprag.routers.router import LLMRouter
from hoprag.sources.base import ContextSource, ParametricSource


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


class CountingSource(RecordingSource):
    """A source reporting figures per question of its last fetch, as the API source's `question_stats`."""

    def fetch(self, examples, costs):
        self.question_stats = [{"no_match": float(ex.id == "q1"), "api_calls": 2} for ex in examples]
        return super().fetch(examples, costs)


def fallback_world(fixed=("web",), **kwargs):
    """q2 is answered by the LLM alone; q1 abstains plainly and q3 inside a longer answer (CRAG's substring)."""
    web, api = RecordingSource("web"), CountingSource("api")
    llm = ScriptedLLM(rules=[(r"### References", "Paris"), (r"Jaws", "Steven Spielberg"),
                             (r"band", "I don't know, maybe Lyon")], default_reply="I don't know")  # fmt: skip
    method = PruningRAG(llm, {"web": web, "api": api, "llm": ParametricSource()}, strategy="fallback",
                        fixed=list(fixed), **kwargs)  # fmt: skip
    return web, api, llm, method


def test_fallback_consults_the_sources_only_for_the_questions_the_llm_alone_abstains_on():
    web, api, llm, method = fallback_world()
    costs = [Cost() for _ in EXAMPLES]
    outs = method.answer(EXAMPLES, costs)
    assert web.asked == ["q1", "q3"] and api.asked == []
    assert len(llm.calls) == 2 and len(llm.calls[1].texts) == 2  # all three alone, then the two abstainers
    assert not any("### References" in t for t in llm.calls[0].texts)
    assert all("### References" in t for t in llm.calls[1].texts)
    assert [o.prediction for o in outs] == ["Paris", "Steven Spielberg", "Paris"]
    assert [o.trace["answered_by"] for o in outs] == ["fallback", "llm", "fallback"]
    assert outs[2].trace["llm_output"] == "I don't know, maybe Lyon" and outs[2].trace["output"] == "Paris"
    assert outs[1].trace["llm_output"] == outs[1].trace["output"] == "Steven Spielberg"
    assert [o.trace["sources"] for o in outs] == [["llm", "web"], ["llm"], ["llm", "web"]]
    assert [o.stats["fallback_used"] for o in outs] == [1.0, 0.0, 1.0]
    assert [o.stats["route/web"] for o in outs] == [1.0, 0.0, 1.0] and all(o.stats["route/llm"] == 1.0 for o in outs)
    assert outs[1].retrieved == [] and outs[1].stats["context_tokens"] == 0.0 and outs[0].stats["context_tokens"] > 0
    assert [c.llm_calls for c in costs] == [2, 1, 2] and [c.retrieval_calls for c in costs] == [1, 0, 1]
    assert set(costs[0].seconds) == {"llm_first", "answer", "web"} and set(costs[1].seconds) == {"llm_first"}


def test_fallback_to_several_sources_reads_them_together_grounded_and_needs_no_second_call_when_none_abstains():
    web, api, llm, method = fallback_world(fixed=("web", "api"))
    outs = method.answer(EXAMPLES, [Cost() for _ in EXAMPLES])
    assert web.asked == api.asked == ["q1", "q3"]
    assert {p.origin for p in outs[0].retrieved} == {"web", "api"}
    assert all("Use only the references" in t for t in llm.calls[1].texts)  # Table 3's "LLM → X": X alone
    web, api, llm, method = fallback_world()
    outs = method.answer(EXAMPLES[1:2], [Cost()])
    assert len(llm.calls) == 1 and web.asked == [] and outs[0].stats["fallback_used"] == 0.0
    assert outs[0].stats["llm_first_parse_failed"] == 0.0
    with pytest.raises(ValueError, match="not llm"):
        fallback_world(fixed=("llm", "web"))
    with pytest.raises(ValueError, match="not configured"):
        PruningRAG(llm, {"web": web}, strategy="fallback", fixed=["api"])


def test_a_cot_answer_without_the_final_marker_counts_as_abstaining_and_falls_back():
    llm = ScriptedLLM(rules=[(r"### References", "### Thought\nIt says Paris.\n### Final Answer\nParis")],
                      default_reply="### Thought\nI recall Paris.")  # fmt: skip
    web = RecordingSource("web")
    (out,) = PruningRAG(llm, {"web": web}, strategy="fallback", cot=True).answer(EXAMPLES[:1], [Cost()])
    assert web.asked == ["q1"] and out.prediction == "Paris" and not out.parse_failed
    assert out.stats["llm_first_parse_failed"] == 1.0  # the first pass's fallback answer is counted


def test_a_sources_question_stats_are_merged_only_into_the_questions_that_consulted_it():
    _, _, answer_llm, router, sources = world(["b", "a", "b"])
    sources["api"] = CountingSource("api")
    outs = PruningRAG(answer_llm, sources, router).answer(EXAMPLES, [Cost() for _ in EXAMPLES])
    assert outs[0].stats["api/no_match"] == 1.0 and outs[2].stats["api/no_match"] == 0.0
    assert outs[0].stats["api/api_calls"] == 2.0 and isinstance(outs[0].stats["api/api_calls"], float)
    assert not any(k.startswith("api/") for k in outs[1].stats)  # q2 went to the web only
    *_, method = fallback_world(fixed=("api",))
    outs = method.answer(EXAMPLES, [Cost() for _ in EXAMPLES])
    assert [o.stats.get("api/no_match") for o in outs] == [1.0, None, 0.0]  # q2 never reached the API


def test_a_source_whose_question_stats_do_not_match_its_batch_is_an_error():
    class Broken(RecordingSource):
        def fetch(self, examples, costs):
            self.question_stats = [{"empty": 1.0}]
            return super().fetch(examples, costs)

    method = PruningRAG(ScriptedLLM(), {"web": Broken("web")}, strategy="fixed")
    with pytest.raises(RuntimeError, match="question_stats for 1 questions; it was asked 3"):
        method.answer(EXAMPLES, [Cost() for _ in EXAMPLES])


def test_llm_plus_a_source_may_answer_from_its_own_knowledge_and_a_source_alone_may_not():
    """The code's LLM_WEB prompt drops both the grounding line and "the references lack it → I don't know"."""
    llm = ScriptedLLM(default_reply="Paris")
    for grounded in (True, False):
        method = PruningRAG(llm, {"web": RecordingSource("web")}, strategy="fixed", grounded=grounded)
        method.answer(EXAMPLES[:1], [Cost()])
    grounded_prompt, open_prompt = llm.calls[0].texts[0], llm.calls[1].texts[0]
    for line in ("Use only the references", "the references do not contain the information"):
        assert line in grounded_prompt and line not in open_prompt
    assert "If you are not sure, reply: I don't know." in open_prompt
    PruningRAG(llm, {"llm": ParametricSource()}, strategy="fixed", fixed=["llm"]).answer(EXAMPLES[:1], [Cost()])
    assert "references" not in llm.calls[2].texts[0].lower()  # the LLM alone is told of no references
