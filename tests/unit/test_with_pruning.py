"""A framework with source pruning in front (PruningRAG Tables 1 and 8's "+ Pruning", P18): the router's choice
decides what each question's framework searches, the framework runs unchanged (its queries, k and rounds), the
LLM route is answered closed-book, an abstention costs no answer call, and the run is named honestly."""

from __future__ import annotations

import functools

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ChatPrompt, ScriptedLLM
from hoprag.methods import CoT, IterRetGen, NoRetrieval, StandardRAG, WithPruning
from hoprag.routers.router import LLMRouter
from hoprag.sources.base import ParametricSource

PROMPT = ChatPrompt("Answer from the passages.", "{passages}\n\nQuestion: {question}\nAnswer:")
CLOSED = functools.partial(NoRetrieval, prompt=ChatPrompt("Answer.", "Closed book: {question}\nAnswer:"))


class RankedSource:
    """Like the web source: ranks each query's own question pages, `top_k` per query."""

    def __init__(self) -> None:
        self.queries: list[tuple[str, str]] = []

    def retrieve(self, queries, pages, top_k=3, query_vectors=None):
        self.question_stats = [{"no_pages": float(not p)} for p in pages]
        out = []
        for query, question_pages in zip(queries, pages):
            self.queries.append((query, question_pages[0]["page_name"]))
            out.append([Passage(f"{question_pages[0]['page_name']}:{i}", question_pages[0]["page_name"],
                                f"chunk {i} of {question_pages[0]['page_name']}", "web") for i in range(10)][:top_k])  # fmt: skip
        return out


class FixedSource:
    """Like the API source: evidence from the question alone, fetched once per question."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def fetch(self, examples, costs):
        self.asked += [ex.id for ex in examples]
        self.question_stats = [{"api_calls": 2.0} for _ in examples]
        return [[Passage(f"{ex.id}:api", "", f"API fact for {ex.id}", "api")] for ex in examples]


def page(name):
    return {"page_name": name, "page_url": f"https://{name}", "page_snippet": "", "page_result": ""}


EXAMPLES = [QAExample(f"q{i}", f"Question number {i}?", ["x"], metadata={"search_results": [page(f"page-of-q{i}")]})
            for i in range(1, 5)]  # fmt: skip


def pruned(framework, replies, answer="Paris", **settings):
    web, api = RankedSource(), FixedSource()
    rules = [(ex.question.replace("?", r"\?"), r) for ex, r in zip(EXAMPLES, replies)]
    router = functools.partial(LLMRouter, none_policy="abstain")
    llm = ScriptedLLM(default_reply=answer)  # the answering LLM; the router has its own
    method = WithPruning(llm, framework, {"web": web, "api": api, "llm": ParametricSource()}, router=router,
                         router_llm=ScriptedLLM(rules=rules), closed_book=CLOSED, **settings)  # fmt: skip
    return method, llm, web, api


def test_the_routers_choice_decides_what_the_framework_reads():
    framework = functools.partial(StandardRAG, prompt=PROMPT, k=2)
    method, llm, web, api = pruned(framework, ["a", "b", "c", "d"])  # web, api, llm, none (abstain)
    costs = [Cost() for _ in EXAMPLES]
    outs = method.answer(EXAMPLES, costs)
    assert method.name == "standard_rag+pruning"
    assert [o.trace["pruning"]["answered_by"] for o in outs] == ["framework", "framework", "closed_book", "abstain"]
    assert [p.id for p in outs[0].retrieved] == ["page-of-q1:0", "page-of-q1:1"]  # its own pages, the framework's k
    assert [p.id for p in outs[1].retrieved] == ["q2:api"] and api.asked == ["q2"]  # fixed evidence, fetched once
    assert outs[2].retrieved == [] and outs[3].prediction == "I don't know"
    framework_prompts, closed_prompts = llm.calls[0].texts, llm.calls[1].texts
    assert len(framework_prompts) == 2 and "chunk 0 of page-of-q1" in framework_prompts[0]
    assert "API fact for q2" in framework_prompts[1] and "page-of-q" not in framework_prompts[1]
    assert closed_prompts == [closed_prompts[0]] and "Closed book: Question number 3?" in closed_prompts[0]
    assert costs[3].llm_calls == 1 and costs[2].retrieval_calls == 0  # the router's call; no search for q3
    assert outs[0].stats["route/web"] == 1.0 and outs[1].stats["api/api_calls"] == 2.0
    assert outs[0].stats["web/no_pages"] == 0.0 and outs[0].stats["router_parse_failed"] == 0.0


def test_every_search_of_a_multi_round_framework_stays_on_its_questions_sources():
    framework = functools.partial(IterRetGen, prompt=PROMPT, rounds=3, k=3)
    method, llm, web, _ = pruned(framework, ["a", "a", "a", "a"], strategy="fixed", fixed=["web"])
    outs = method.answer(EXAMPLES, [Cost() for _ in EXAMPLES])
    assert len(web.queries) == 3 * len(EXAMPLES)  # three rounds, every question, one batched search a round
    for query, page_name in web.queries:  # round 2's query is the question plus the last generation
        assert query.startswith(f"Question number {page_name[-1]}?")
    assert all(len(o.trace["rounds"]) == 3 and "router_reply" not in o.trace["pruning"] for o in outs)
    assert method.run_info()["router"] == "none" and method.run_info()["pruning"] == "fixed"


def test_an_untuned_router_is_reported_as_such():
    method, *_ = pruned(functools.partial(StandardRAG, prompt=PROMPT), ["a"] * 4)
    assert method.run_info()["router"] == "untuned" and method.run_info()["oracle_domain"] is False


def test_a_framework_that_reads_no_passages_or_the_llm_first_fallback_is_refused():
    with pytest.raises(ValueError, match="reads none"):
        pruned(CLOSED, ["a"] * 4)
    with pytest.raises(ValueError, match="routed or fixed"):
        pruned(functools.partial(StandardRAG, prompt=PROMPT), ["a"] * 4, strategy="fallback")


def test_a_search_not_charged_to_a_scoped_question_is_refused():
    method, *_ = pruned(functools.partial(StandardRAG, prompt=PROMPT), ["a"] * 4)
    method.retriever.scope(EXAMPLES[:1], [("web",)], [Cost()])
    with pytest.raises(ValueError, match="cost record"):
        method.retriever.search(["anything"], 3, costs=[Cost()])


def test_a_closed_book_setting_builds_no_retriever_and_cannot_be_pruned(compose_cfg):
    """`cot`/`self_consistency`/`tot` with `with_documents=false` read no passages: the runner builds no retriever
    (nor its index) for them, the fingerprint leaves `retriever` out, and `+pruning` refuses them."""
    from hoprag.evaluation.fingerprint import eval_fingerprint, uses_retriever
    from hoprag.evaluation.runner import build

    class NoCorpus:
        def corpus(self):
            raise AssertionError("a closed-book run built a retriever")

    for name in ("cot", "self_consistency", "tot"):
        cfg = compose_cfg("eval", [f"+method={name}", "llm=scripted", "method.with_documents=false"])
        assert not uses_retriever(cfg) and "retriever" not in eval_fingerprint(cfg)
        assert build(cfg, NoCorpus()).retriever is None
        assert uses_retriever(compose_cfg("eval", [f"+method={name}", "llm=scripted"]))
    with pytest.raises(ValueError, match="reads none"):
        pruned(functools.partial(CoT, with_documents=False), ["a"] * 4)
