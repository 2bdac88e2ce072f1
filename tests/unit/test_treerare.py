"""TreeRare's traversal on a mock world (spec/treerare.md §8): a scripted LLM that logs every call, a stub
retriever that makes passages from the query string and parse trees given as bracketed strings."""

from __future__ import annotations

import re
from functools import partial

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.llm.prompts import PassageFormat
from hoprag.methods.tree_retrieval import TreeRetrievalMethod
from hoprag.methods.treerare import TreeRare
from hoprag.retrieval import Hit, Retriever
from hoprag.retrieval.rerankers import NoReranker, Reranker
from hoprag.search.treerare import (
    SyntaxTree,
    TreeRareSearch,
    TreeRetrieval,
    final_answer,
    from_bracketed,
    parse_queries,
)
from hoprag.search.treerare.traversal import ordered_context

DEAR_JOHN = "Who sang the theme music for the television show Dear John ?"
DEAR_JOHN_CT = (
    "(ROOT (SBARQ (WHNP (WP Who)) (SQ (VP (VBD sang) (NP (NP (DT the) (NN theme) (NN music)) (PP (IN for) "
    "(NP (DT the) (NN television) (NN show) (NP (NNP Dear) (NNP John))))))) (. ?)))"
)
ARTHUR = "When was Arthur 's Magazine first published ?"
ARTHUR_CT = (
    "(ROOT (SBARQ (WHADVP (WRB When)) (SQ (VBD was) (NP (NP (NNP Arthur) (POS 's)) (NNP Magazine)) "
    "(VP (ADVP (RB first)) (VBN published))) (. ?)))"
)
SHORT = "Who wrote Hamlet ?"
SHORT_CT = "(ROOT (SBARQ (WHNP (WP Who)) (SQ (VP (VBD wrote) (NP (NNP Hamlet)))) (. ?)))"
PARSES = {DEAR_JOHN: DEAR_JOHN_CT, ARTHUR: ARTHUR_CT, SHORT: SHORT_CT}
# kept nodes of DEAR_JOHN in post-order (children before parents, the root last)
DEAR_JOHN_NODES = [
    "the theme music",
    "the television show Dear John",
    "for the television show Dear John",
    "the theme music for the television show Dear John",
    "sang the theme music for the television show Dear John",
    "sang the theme music for the television show Dear John",
    DEAR_JOHN,
    DEAR_JOHN,
]


class BracketParser:
    """Parses the questions it was given bracketed trees for; any other question is a parse error."""

    def __init__(self, parses=PARSES) -> None:
        self.parses = parses

    def parse(self, questions):
        missing = [q for q in questions if q not in self.parses]
        if missing:
            raise ValueError(f"no parse for {missing}")
        return [SyntaxTree(q, from_bracketed(self.parses[q]), "ct") for q in questions]


class StubRetriever(Retriever):
    """k passages per query, named after the query; records every batch searched."""

    def __init__(self, overlap: bool = False) -> None:
        super().__init__([])
        self.batches: list[list[str]] = []
        self.overlap = overlap  # every query's passages share ids (to test the merge)

    def _search(self, queries, k):
        self.batches.append(list(queries))
        key = (lambda q: "shared") if self.overlap else (lambda q: q)
        return [[Hit(Passage(f"{key(q)}#{i}", f"T{i} {q}", f"text {i} of {q}"), 1.0 / i, i) for i in range(1, k + 1)]
                for q in queries]  # fmt: skip


def qg_reply(prompt: str) -> str:
    phrase = re.search(r"Phrase: (.*)\n", prompt).group(1)
    return f"response: what is {phrase} 1?; what is {phrase} 2?; what is {phrase} 3?; what is {phrase} 4?"


def sag_reply(prompt: str) -> str:
    questions = re.search(r"Questions: (.*)\n", prompt).group(1)
    phrase = re.match(r"what is (.*) 1\?", questions.split("; ")[0])
    return f"E[{phrase.group(1) if phrase else questions}]"


def scripted(**kwargs) -> ScriptedLLM:
    return ScriptedLLM(
        rules=[
            (r"Phrase: ", qg_reply),
            (r"Questions: ", sag_reply),
            (r"Answer the question using", "Explanations: step by step.\nFINAL: The answer is Simply Red."),
            (r"may be ambiguous", "Explanations (Step 2): two.\nFINAL (Step 2): Simply Red, and Dusty."),
        ],
        **kwargs,
    )


def build(llm=None, retriever=None, parser=None, **kwargs) -> TreeRare:
    search = partial(TreeRareSearch, **{"k": kwargs.pop("k", 2), **kwargs.pop("search", {})})
    return TreeRare(llm or scripted(), retriever or StubRetriever(), {"ct": parser or BracketParser()}, search,
                    tree="ct", **kwargs)  # fmt: skip


def ask(method, questions=(DEAR_JOHN,)):
    costs = [Cost() for _ in questions]
    examples = [QAExample(str(i), q, ["Simply Red"]) for i, q in enumerate(questions)]
    return method.answer(examples, costs), costs


def stage(call_text: str) -> str:
    if "Phrase: " in call_text:
        return "qg"
    if "Questions: " in call_text:
        return "sag"
    return "fag"


def logged(llm: ScriptedLLM) -> list[tuple[str, str]]:
    """(stage, phrase or questions) per prompt, in call order."""
    out = []
    for call in llm.calls:
        for text in call.texts:
            kind = stage(text)
            if kind == "qg":
                out.append((kind, re.search(r"Phrase: (.*)\n", text).group(1)))
            elif kind == "sag":
                out.append((kind, re.search(r"Questions: what is (.*) 1\?", text).group(1)))
            else:
                out.append((kind, ""))
    return out


@pytest.mark.parametrize("batching", ["node", "level"])
def test_children_finish_before_their_parent_and_the_root_sag_is_the_last_call_before_fag(batching):
    llm = scripted()
    (out,), _ = ask(build(llm, batching=batching))
    log = logged(llm)
    nodes = out.trace["tree"]["nodes"]
    assert [n["phrase"] for n in nodes] == DEAR_JOHN_NODES
    # identical phrases (unary chains) are told apart by their order of appearance
    at = {}
    for i, entry in enumerate(log):
        at.setdefault(entry, []).append(i)
    by_node = {index: (at["qg", n["phrase"]][_seen(nodes, index)], at["sag", n["phrase"]][_seen(nodes, index)])
               for index, n in enumerate(nodes)}  # fmt: skip
    for index, node in enumerate(nodes):
        for child in node["children"]:
            assert by_node[child][1] < by_node[index][0]  # the child's SAG before the parent's QG
    assert log[-1][0] == "fag" and log[-2] == ("sag", DEAR_JOHN) and sum(s == "fag" for s, _ in log) == 1


def _seen(nodes, index):
    """How many earlier nodes share this node's phrase (the n-th occurrence in the call log)."""
    return sum(n["phrase"] == nodes[index]["phrase"] for n in nodes[:index])


def test_a_parent_qg_prompt_holds_every_processed_descendants_evidence_in_post_order():
    llm = scripted()
    ask(build(llm))
    qg_prompts = [t for c in llm.calls for t in c.texts if "Phrase: " in t]
    root = [t for t in qg_prompts if f"Phrase: {DEAR_JOHN}\n" in t][-1]
    positions = [root.index(f"#context: E[{p}]") for p in DEAR_JOHN_NODES[:5]]
    assert positions == sorted(positions)
    assert root.count("#context:") == 7  # all seven processed descendants, the unary duplicate included
    middle = [t for t in qg_prompts if "Phrase: the theme music for the television show Dear John\n" in t][0]
    assert middle.count("#context:") == 3  # its subtree: "the theme music", "the television show ...", "for ..."


def test_a_node_without_kept_children_gets_empty_evidence_and_no_child_queries():
    llm = scripted()
    ask(build(llm))
    leaf = [t for c in llm.calls for t in c.texts if "Phrase: the theme music\n" in t][0]
    assert "Documents:\n(none yet)" in leaf and "other experts" not in leaf
    parent = [t for c in llm.calls for t in c.texts if "Phrase: for the television show Dear John\n" in t][0]
    assert 'about "the television show Dear John": what is the television show Dear John 1?' in parent


def test_query_parsing_keeps_three_for_multihop_and_five_for_ambiguous():
    assert parse_queries("#response: A?; B? ; ;C?;D?", 3) == ["A?", "B?", "C?"]
    assert parse_queries("#response: A?; B? ; ;C?;D?", 5) == ["A?", "B?", "C?", "D?"]
    assert parse_queries("Sure! Response: X?\nmore text", 3) == ["X?"]
    assert parse_queries("no marker here; just text", 3) is None
    assert parse_queries("response: ; ;", 3) is None


def test_three_queries_make_three_searches_of_k_merged_for_sag_and_duplicates_merge_by_id():
    retriever = StubRetriever()
    llm = scripted()
    (out,), costs = ask(build(llm, retriever, k=15))
    leaf = out.trace["tree"]["nodes"][0]
    assert len(leaf["queries"]) == 3 and len(leaf["passages"]) == 45
    assert costs[0].retrieval_calls == sum(len(n["queries"]) for n in out.trace["tree"]["nodes"]) == 24
    sag = [t for c in llm.calls for t in c.texts if "Questions: what is the theme music 1?" in t][0]
    assert sag.count("text ") == 45
    shared = StubRetriever(overlap=True)
    (out,), _ = ask(build(scripted(), shared, k=15))
    assert len(out.trace["tree"]["nodes"][0]["passages"]) == 15


def test_llm_calls_are_two_per_processed_node_plus_one_and_searches_one_per_query():
    (out,), costs = ask(build(batching="node"))
    nodes = out.stats["processed_nodes"]
    assert nodes == 8 and out.stats["tree_nodes"] == 22  # every constituent and pre-terminal
    assert costs[0].llm_calls == 2 * nodes + 1
    assert costs[0].retrieval_calls == out.stats["queries"] == 3 * nodes


def test_level_batching_makes_two_calls_per_level_for_the_whole_batch_and_charges_each_question_its_own():
    questions = (DEAR_JOHN, ARTHUR, SHORT)
    llm, retriever = scripted(), StubRetriever()
    outs, costs = ask(build(llm, retriever), questions)
    height = max(o.stats["tree_height"] for o in outs)
    assert height == 7 and len(llm.calls) == 2 * height + 1 and len(retriever.batches) == height
    assert [c.llm_calls for c in costs] == [2 * o.stats["processed_nodes"] + 1 for o in outs]
    node_llm = scripted()
    node_outs, node_costs = ask(build(node_llm, batching="node"), questions)
    assert len(node_llm.calls) == sum(c.llm_calls for c in node_costs) > len(llm.calls)
    assert [o.prediction for o in node_outs] == [o.prediction for o in outs]
    assert [o.trace for o in node_outs] == [o.trace for o in outs]
    assert [(c.llm_calls, c.prompt_tokens, c.completion_tokens, c.retrieval_calls, c.passage_ids)
            for c in node_costs] == [(c.llm_calls, c.prompt_tokens, c.completion_tokens, c.retrieval_calls,
                                      c.passage_ids) for c in costs]  # fmt: skip


def test_fag_reads_one_evidence_paragraph_per_processed_node_and_the_answer_after_the_last_final():
    llm = scripted()
    (out,), _ = ask(build(llm))
    fag = [t for c in llm.calls for t in c.texts if stage(t) == "fag"][0]
    assert fag.count("#context:") == out.stats["processed_nodes"] == 8
    assert out.prediction == "Simply Red." and not out.parse_failed
    assert final_answer("FINAL: a\nExplanations: x\n#FINAL: b ") == "b"
    assert final_answer("Explanations (Step 2): x\nFINAL (Step 2): Simply Red and Dusty") == "Simply Red and Dusty"
    assert final_answer("no marker, finally") is None


def test_a_missing_final_marker_is_a_counted_parse_failure_read_by_the_extractor():
    llm = ScriptedLLM(rules=[(r"Phrase: ", qg_reply), (r"Questions: ", sag_reply)], default_reply="Simply Red.")
    (out,), _ = ask(build(llm))
    assert out.prediction == "Simply Red." and out.parse_failed


def test_ambiguous_task_keeps_five_queries_and_the_whole_long_form_answer():
    llm = scripted()
    (out,), _ = ask(build(llm, task="ambiguous"))
    assert all(len(n["queries"]) == 4 for n in out.trace["tree"]["nodes"])  # the reply has 4, up to 5 kept
    assert out.prediction == "Simply Red, and Dusty." and not out.parse_failed
    assert any("disambiguation expert" in t for c in llm.calls for t in c.texts)


def test_unparsable_qg_falls_back_to_the_phrase_and_empty_sag_to_the_raw_passages_both_counted():
    llm = ScriptedLLM(rules=[
        (r"Phrase: the theme music\n", "I cannot do that."),
        (r"Phrase: ", qg_reply),
        (r"Questions: the theme music\n", ""),
        (r"Questions: ", sag_reply),
        (r"Answer the question using", "FINAL: Simply Red"),
    ])  # fmt: skip
    (out,), _ = ask(build(llm))
    leaf = out.trace["tree"]["nodes"][0]
    assert leaf["queries"] == ["the theme music"] and leaf["fallbacks"] == ["qg_unparsed", "sag_empty"]
    assert leaf["evidence"][0] == "T1 the theme music\ntext 1 of the theme music"
    assert out.stats["qg_fallbacks"] == 1 and out.stats["sag_fallbacks"] == 1


def test_a_question_that_cannot_be_parsed_falls_back_to_bm25_for_the_question():
    retriever = StubRetriever()
    outs, costs = ask(build(retriever=retriever, k=3), (DEAR_JOHN, "An unparsable question?"))
    assert outs[1].stats["traversal_fallback"] == 1 and outs[0].stats["traversal_fallback"] == 0
    assert [p.id for p in outs[1].retrieved] == [f"An unparsable question?#{i}" for i in (1, 2, 3)]
    assert costs[1].llm_calls == 1 and costs[1].retrieval_calls == 1 and outs[1].prediction == "Simply Red."


def test_without_qg_the_bm25_queries_are_the_phrases_themselves():
    retriever, llm = StubRetriever(), scripted()
    (out,), _ = ask(build(llm, retriever, search={"query_generation": False}))
    assert sorted(q for batch in retriever.batches for q in batch) == sorted(DEAR_JOHN_NODES)
    assert all(n["queries"] == [n["phrase"]] for n in out.trace["tree"]["nodes"])
    assert not any("Phrase: " in t for c in llm.calls for t in c.texts)


def test_without_sag_fag_reads_the_raw_passages_and_no_sag_call_is_made():
    llm = scripted()
    (out,), costs = ask(build(llm, search={"subanswers": False}, k=1))
    assert not any(stage(t) == "sag" for c in llm.calls for t in c.texts)
    fag = [t for c in llm.calls for t in c.texts if stage(t) == "fag"][0]
    assert "#context: T1 what is the theme music 1?" in fag and "E[" not in fag
    assert costs[0].llm_calls == out.stats["processed_nodes"] + 1


def test_the_other_ablations_cut_exactly_their_module():
    retriever, llm = StubRetriever(), scripted()
    (out,), costs = ask(build(llm, retriever, search={"retrieval": False}))  # w/o IR
    assert not retriever.batches and costs[0].llm_calls == 2 * out.stats["processed_nodes"] + 1
    assert all("Documents:\n(none)" in t for c in llm.calls for t in c.texts if stage(t) == "sag")

    llm = scripted()
    (out,), costs = ask(build(llm, retriever, search={"retrieval": False, "subanswers": False}))  # QG only
    fag = [t for c in llm.calls for t in c.texts if stage(t) == "fag"][0]
    assert "#context: what is the theme music 1?; what is the theme music 2?" in fag
    assert costs[0].llm_calls == out.stats["processed_nodes"] + 1 and not retriever.batches

    llm = scripted()
    (out,), costs = ask(build(llm, retriever, search={"query_generation": False, "subanswers": False}))  # IR only
    assert costs[0].llm_calls == 1 and costs[0].retrieval_calls == out.stats["processed_nodes"]

    llm = scripted()
    (out,), costs = ask(build(llm, StubRetriever(), search={"use_tree": False}))  # CoT only
    assert costs[0].llm_calls == 1 and costs[0].retrieval_calls == 0 and out.retrieved == []
    assert "Documents:\n(none yet)" in llm.calls[0].texts[0]


def test_children_scope_shows_only_the_kept_childrens_evidence():
    llm = scripted()
    ask(build(llm, search={"evidence_scope": "children"}))
    middle = [t for c in llm.calls for t in c.texts if "Phrase: the theme music for the television show Dear John\n" in t]
    assert middle[0].count("#context:") == 2  # "the theme music" and "for the television show Dear John"


def test_over_budget_contexts_lose_their_lowest_priority_units_but_keep_their_order():
    units = [(Passage(f"p{i}", "", f"unit {i}"), key) for i, key in enumerate([(2,), (0,), (1,), (0,)])]
    context = ordered_context(units, PassageFormat("{text}", "|"))
    assert context.text() == "unit 0|unit 1|unit 2|unit 3"
    assert context.text(keep=2) == "unit 1|unit 3"
    assert context.text(keep=3) == "unit 1|unit 2|unit 3"
    llm = scripted(max_input_tokens=200)
    (out,), costs = ask(build(llm, k=1))
    fag = [t for c in llm.calls for t in c.texts if stage(t) == "fag"][0]
    assert f"E[{DEAR_JOHN}]" in fag and costs[0].truncated_prompts > 0  # the root's evidence survives


class ReverseReranker(Reranker):
    """Scores candidates by passage id (descending order) and records the queries it reranked against."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def _score(self, queries, pools):
        self.asked += queries
        return [[-sorted(h.passage.id for h in pool).index(h.passage.id) * -1 for h in pool] for pool in pools]


def test_tree_retrieval_reranks_subtree_passages_against_the_question_and_keeps_at_most_15_without_llm():
    llm, retriever, reranker = scripted(), StubRetriever(), ReverseReranker()
    search = partial(TreeRetrieval, reranker=reranker, k=10, keep=15)
    method = TreeRetrievalMethod(llm, retriever, {"ct": BracketParser()}, search, tree="ct")
    (out,), costs = ask(method)
    assert not llm.calls and costs[0].llm_calls == 0 and out.prediction == ""
    assert set(reranker.asked) == {DEAR_JOHN} and len(out.retrieved) == 15
    assert [q for batch in retriever.batches for q in batch].count("the theme music") == 1
    ids = [p.id for p in out.retrieved]
    assert ids == sorted(ids, reverse=True)  # the reranker's order
    # the root's candidates include its subtree's (children carry theirs upward)
    assert any(i.startswith("the theme music#") for i in ids) or any(i.startswith("the television") for i in ids)
    search = partial(TreeRetrieval, reranker=NoReranker())
    method = TreeRetrievalMethod(llm, StubRetriever(), {"ct": BracketParser()}, search, tree="ct", generate=True)
    (out,), costs = ask(method)
    assert out.prediction == "Simply Red." and costs[0].llm_calls == 1
    assert llm.calls[-1].texts[0].count("#context:") == 15


def test_an_unknown_tree_kind_or_task_is_refused_at_construction():
    with pytest.raises(ValueError, match="tree must be one of"):
        TreeRare(scripted(), StubRetriever(), {"ct": BracketParser()}, tree="dt")
    with pytest.raises(ValueError, match="task must be one of"):
        build(task="multi-hop")
    with pytest.raises(ValueError, match="tree must be one of"):
        TreeRetrievalMethod(scripted(), StubRetriever(), {"ct": BracketParser()}, TreeRetrieval, tree="dt")
