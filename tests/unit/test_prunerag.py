"""PruneRAG driven by the scripted LLM and a stub retriever: the 15 behaviours of spec/prunerag.md §8.

Behaviour numbers are in the test names (b01 ... b15); further tests cover batching, costs and the knobs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from functools import partial

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import Generation, ScriptedLLM
from hoprag.llm.scripted import render
from hoprag.methods import PruneRAG
from hoprag.metrics import EvalRow, MetricSuite, exact_match, token_overlap_match
from hoprag.retrieval import Hit, Retriever
from hoprag.search.prunerag import (
    Aggregator,
    PruneTreeBuilder,
    extract_boxed,
    format_tree,
    parse_decision,
    span_confidence,
)
from hoprag.search.prunerag.efficiency import retrieval_efficiency
from hoprag.search.prunerag.prompts import REFLECTION

Q = "When was Arthur's Magazine first published?"
FINAL = (r"### Inference Tree", r"\\boxed{June 1844}", -0.1)


class StubRetriever(Retriever):
    """k passages per query, made from the query string (ids "<query>#<i>"); records every batch."""

    def __init__(self) -> None:
        super().__init__([])
        self.batches: list[list[str]] = []

    def _search(self, queries, k):
        self.batches.append(list(queries))
        return [[Hit(self.get(f"{q}#{i}"), 1.0 / i, i) for i in range(1, k + 1)] for q in queries]

    def get(self, passage_id: str) -> Passage:
        query, i = passage_id.rsplit("#", 1)
        return Passage(passage_id, f"Title {i} of {query}", f"passage {i} about {query}")


def answer_reply(answer: str) -> str:
    return '```json {"type": "answer", "answer": "%s"} ```' % answer


def answer_logprobs(answer: str, values: list[float], other: float = -3.0) -> list[float]:
    """Log-probs for `answer_reply`'s whitespace tokens: `values` on the answer's words, `other` elsewhere
    (```json, {"type":, "answer",, "answer": come first, ``` last)."""
    assert len(values) == len(answer.split())
    return [other] * 4 + values + [other]


def decompose(sub1: str, sub2: str) -> str:
    return json.dumps({"type": "decomposition", "subquery1": sub1, "subquery2": sub2})


def entity(e1: str, e2: str) -> str:
    return json.dumps({"type": "entity", "entity1": e1, "entity2": e2})


def on(query: str) -> str:
    """The pattern of a decision prompt for `query` (first or retry; the prompt's examples come before)."""
    return re.escape(f"Query: {query}\nOutput:") + f"(?:{re.escape(REFLECTION)})?$"


ANY = r"Query: ([^\n]*)\nOutput:$"  # any first decision, \1 = the node's query


def prunerag(llm, retriever, max_depth=3, batching="round", aggregator=None, **builder) -> PruneRAG:
    """PruneRAG wired as its config wires it: `builder` knobs for its tree builder, `aggregator` knobs for
    its aggregator, the shared settings on the method."""
    return PruneRAG(llm, retriever, partial(PruneTreeBuilder, **builder), partial(Aggregator, **(aggregator or {})),
                    max_depth=max_depth, batching=batching)  # fmt: skip


def make(rules, **knobs) -> tuple[PruneRAG, ScriptedLLM, StubRetriever]:
    llm = ScriptedLLM(rules=[FINAL, *rules], default_reply="no idea")
    retriever = StubRetriever()
    return prunerag(llm, retriever, **knobs), llm, retriever


def ask(method: PruneRAG, *questions: str):
    examples = [QAExample(f"q{i}", q, ["June 1844"]) for i, q in enumerate(questions or (Q,))]
    costs = [Cost() for _ in examples]
    return method.answer(examples, costs), costs


def decision_texts(llm: ScriptedLLM) -> list[str]:
    return [t for call in llm.calls for t in call.texts if "### Inference Tree" not in t]


def final_texts(llm: ScriptedLLM) -> list[str]:
    return [t for call in llm.calls for t in call.texts if "### Inference Tree" in t]


def test_b01_a_confident_answer_is_an_accepted_leaf_shown_in_the_tree():
    rule = (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [-0.01, -0.02]))
    method, llm, retriever = make([rule])
    (out,), (cost,) = ask(method)
    tree = out.trace["tree"]
    assert tree["status"] == "answered" and tree["answer"] == "June 1844" and tree["children"] == []
    assert tree["confidence"] == pytest.approx(math.exp(-0.015), abs=1e-4)  # 0.985 >= 0.95
    assert len(decision_texts(llm)) == 1  # never re-queued
    assert '"answer": "June 1844"' in final_texts(llm)[0]
    assert out.prediction == "June 1844" and not out.parse_failed
    assert retriever.batches == [[Q]]
    assert (cost.llm_calls, cost.retrieval_calls) == (2, 1)


def test_b02_a_low_confidence_answer_is_retried_with_the_reflection_note_and_no_new_retrieval():
    rule = (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [-0.5, -0.5]))
    method, llm, retriever = make([rule])
    (out,), _ = ask(method)
    first, second = decision_texts(llm)
    assert REFLECTION not in first and second == first + REFLECTION  # same node, same passages
    assert retriever.batches == [[Q]]
    tree = out.trace["tree"]
    assert tree["rejected"] == 2 and tree["confidence"] == pytest.approx(math.exp(-0.5), abs=1e-4)


def test_b03_a_node_rejected_in_the_last_round_ends_unresolved_and_keeps_its_passages():
    rule = (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [-0.5, -0.5]))
    method, llm, _ = make([rule], max_depth=2)
    (out,), _ = ask(method)
    tree = out.trace["tree"]
    assert (tree["status"], tree["answer"], tree["rejected"]) == ("unresolved", "", 1)
    final = final_texts(llm)[0]
    for i in range(1, 6):
        assert f"[Doc {i}] Title {i} of {Q}" in final


def test_b04_a_decomposition_makes_two_children_retrieved_with_their_strings_and_queued():
    method, llm, retriever = make([(on(Q), decompose("Who founded it?", "When did it start?"))], max_depth=3)
    (out,), (cost,) = ask(method)
    tree = out.trace["tree"]
    assert tree["status"] == "decomposed"
    assert [(c["query"], c["depth"], c["kind"]) for c in tree["children"]] == [
        ("Who founded it?", 2, "query"), ("When did it start?", 2, "query")
    ]  # fmt: skip
    assert retriever.batches == [[Q], ["Who founded it?", "When did it start?"]]
    assert len(llm.calls[1].prompts) == 2  # both children decided together in round 2
    assert [c["status"] for c in tree["children"]] == ["parse_error", "parse_error"]  # "no idea" did not parse
    assert cost.retrieval_calls == 3 and out.stats["retrieval_calls"] == 3


def test_b05_entity_children_retrieve_but_never_reach_the_decision_llm():
    method, llm, retriever = make([(on(Q), entity("Arthur's Magazine", "Founder of Arthur's Magazine"))])
    (out,), _ = ask(method)
    tree = out.trace["tree"]
    assert tree["status"] == "entity_parent"
    assert [(c["kind"], c["status"]) for c in tree["children"]] == [("entity", "entity")] * 2
    assert retriever.batches == [[Q], ["Arthur's Magazine", "Founder of Arthur's Magazine"]]
    assert len(decision_texts(llm)) == 1 and len(llm.calls) == 2  # round 1, then straight to the final call
    assert "[Doc 1] Title 1 of Founder of Arthur's Magazine" in final_texts(llm)[0]


def test_b06_a_full_depth_3_tree_has_7_nodes_7_retrievals_and_3_decisions():
    rule = (ANY, '{"type": "decomposition", "subquery1": "\\1 a", "subquery2": "\\1 b"}')
    method, llm, retriever = make([rule], max_depth=3)
    (out,), (cost,) = ask(method, "root?")
    nodes = [n for n in _walk(out.trace["tree"])]
    assert len(nodes) == 7 and all(n["kind"] == "query" for n in nodes)
    assert [len(b) for b in retriever.batches] == [1, 2, 4] and cost.retrieval_calls == 7
    assert len(decision_texts(llm)) == 3 and out.stats["decision_calls"] == 3
    depth3 = [n for n in nodes if n["depth"] == 3]
    assert len(depth3) == 4 and all(n["status"] == "unresolved" and not n["outputs"] for n in depth3)
    assert [n["query"] for n in depth3] == ["root? a a", "root? a b", "root? b a", "root? b b"]
    assert not any("Query: root? a a\nOutput:" in t for t in decision_texts(llm))
    assert out.stats["tree_depth"] == 3


def test_b07_depth_1_makes_no_decision_and_answers_from_the_root_passages_alone():
    method, llm, retriever = make([], max_depth=1)
    (out,), (cost,) = ask(method)
    assert decision_texts(llm) == [] and cost.llm_calls == 1
    final = final_texts(llm)[0]
    tree = json.loads(final.split("### Inference Tree:\n", 1)[1].split("\n\nUse the tree", 1)[0])
    assert tree["query"] == Q and tree["children"] == []
    assert tree["context"].count("[Doc ") == 5
    assert retriever.batches == [[Q]]


def test_b08_the_last_json_wins_think_blocks_are_ignored_and_malformed_json_is_a_parse_error():
    text = '<think>maybe {"type": "answer", "answer": "1850"}</think>\n' + entity("A", "B")
    assert parse_decision(text).items == ("A", "B")
    two = decompose("x?", "y?") + "\nActually:\n" + answer_reply("1844")
    assert parse_decision(two).answer == "1844"
    unclosed = decompose("x?", "y?") + '<think>{"type": "answer", "answer": "1850"}'
    assert parse_decision(unclosed).action == "decomposition"
    bad = parse_decision('```json {"type": "answer", "answer": 1844,} ```')
    assert bad.action is None and "invalid JSON" in bad.error
    assert parse_decision('{"type": "decomposition", "subquery1": "only one"}').action is None
    assert parse_decision('{"type": "query", "subquery1": "a", "subquery2": "b"}').action == "decomposition"

    method, llm, _ = make([(on(Q), '```json {"type": "entity", "entity1": "A" ```')])
    (out,), _ = ask(method)
    tree = out.trace["tree"]
    assert tree["status"] == "parse_error" and tree["children"] == [] and tree["error"]
    assert out.stats["decision_parse_errors"] == 1
    assert "[Doc 5] Title 5 of" in final_texts(llm)[0]  # its passages still reach the final prompt
    assert len(out.retrieved) == 5


def test_b09_only_the_answer_span_tokens_count_in_json_value_mode():
    tokens = ("```json\n", '{"type": "answer", "answer": "', "Jack", " Lee", '"}', "\n```")
    generation = Generation("".join(tokens), tokens, (-2.0, -2.0, -0.1, -0.3, -5.0, -5.0))
    decision = parse_decision(generation.text)
    assert decision.answer == "Jack Lee"
    assert span_confidence(generation, decision.span) == pytest.approx(math.exp(-0.2))
    assert span_confidence(generation, decision.span, mean=False) == pytest.approx(math.exp(-0.4))
    assert span_confidence(generation, None) == 0.0


def test_b09_first_occurrence_mode_searches_the_reply_after_the_think_text():
    """The code searched the whole output, think text included; the LLM layer now holds a reasoning block
    apart (hoprag.llm.reasoning), so both modes score the answer's tokens in the reply."""
    think = "<think> Jack Lee </think> "
    reply = think + answer_reply("Jack Lee")
    logprobs = [-1.0, -0.9, -0.9, -1.0] + answer_logprobs("Jack Lee", [-0.01, -0.01])
    for span in ("json_value", "first_occurrence"):
        method, _, _ = make([(on(Q), reply, logprobs)], confidence_span=span, max_depth=2)
        (out,), costs = ask(method)
        assert out.trace["tree"]["status"] == "answered"
        assert costs[0].reasoning_tokens == 4


def test_b10_threshold_0_accepts_every_answer_and_above_1_accepts_none():
    rule = (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [-20.0, -20.0]))
    method, _, _ = make([rule], threshold=0.0)
    (out,), _ = ask(method)
    assert out.trace["tree"]["status"] == "answered"
    certain = (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [0.0, 0.0]))
    method, _, _ = make([certain], threshold=1.01)
    (out,), _ = ask(method)
    assert out.trace["tree"]["status"] == "unresolved" and out.trace["tree"]["rejected"] == 2


def test_b10_strict_threshold_rejects_a_tie():
    certain = (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [0.0, 0.0]))
    for strict, status in ((False, "answered"), (True, "unresolved")):
        method, _, _ = make([certain], threshold=1.0, strict_threshold=strict)
        (out,), _ = ask(method)
        assert out.trace["tree"]["status"] == status


def test_b11_efr_is_conditional_on_all_gold_retrieved_and_the_forget_rate_is_over_all():
    gold = Passage("g", "Gold", "alpha beta gamma delta")
    other = Passage("o", "Other", "nothing relevant here")
    rows = [
        EvalRow("wrong", ["right"], [gold], gold_passages=[gold.text]),  # all gold, EM 0
        EvalRow("right", ["right"], [gold], gold_passages=[gold.text]),  # all gold, EM 1
        EvalRow("wrong", ["right"], [other], gold_passages=[gold.text]),  # not all gold, EM 0
    ]
    metrics = MetricSuite(passage_match="token_overlap")(rows)
    assert metrics["efr"] == 50.0 and metrics["forget_rate"] == 33.3
    assert metrics["retrieval/all_gold_retrieved"] == 66.7


def test_b12_a_gold_passage_matches_at_80_percent_overlap_but_not_at_70():
    gold = " ".join(f"w{i}" for i in range(10))
    assert token_overlap_match(gold, " ".join(f"w{i}" for i in range(8)) + " other words")
    assert not token_overlap_match(gold, " ".join(f"w{i}" for i in range(7)) + " other words")


def test_b13_retrieval_efficiency_averages_recall_over_rn_across_datasets():
    table3 = {"hotpotqa": (60.7, 2.06), "2wiki": (47.4, 3.40), "musique": (23.2, 3.39)}
    assert retrieval_efficiency(table3.values()) == pytest.approx(16.7, abs=0.06)  # 16.75, printed 16.7
    react = [(47.5, 2.61), (47.0, 3.25), (20.0, 2.83)]
    assert round(retrieval_efficiency(react), 1) == 13.2
    with pytest.raises(ValueError):
        retrieval_efficiency([(50.0, 0.0)])


def test_b14_em_normalizes_and_the_boxed_text_is_unwrapped():
    assert exact_match("The Beatles.", ["beatles"]) == 1.0
    assert extract_boxed(r"so \boxed{\text{Paris}}") == "Paris"
    assert extract_boxed(r"\boxed{London} no, \boxed{ (Paris) }") == "Paris"
    assert extract_boxed(r"\boxed{x^{2}}") == "x^{2}"
    assert extract_boxed("no box") is None and extract_boxed(r"\boxed{open") is None

    llm = ScriptedLLM(rules=[(r"### Inference Tree", r"It is \\boxed{\\text{The Beatles.}}")], default_reply="?")
    (out,), _ = ask(prunerag(llm, StubRetriever(), max_depth=1))
    assert out.prediction == "The Beatles." and exact_match(out.prediction, ["beatles"]) == 1.0


def test_b14_an_output_without_a_box_is_a_counted_parse_failure_read_by_the_extractor():
    llm = ScriptedLLM(rules=[(r"### Inference Tree", "Answer: June 1844")])
    (out,), _ = ask(prunerag(llm, StubRetriever(), max_depth=1))
    assert out.parse_failed and out.prediction == "June 1844"


def test_b15_without_adaptive_expansion_every_decided_node_decomposes():
    rules = [
        (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [0.0, 0.0])),  # offered no more
        (ANY, '{"type": "decomposition", "subquery1": "\\1 a", "subquery2": "\\1 b"}'),
    ]
    method, llm, _ = make(rules, actions=["decomposition"], use_confidence=False)
    (out,), _ = ask(method, "root?")
    prompt = decision_texts(llm)[0]
    assert '"type": "decomposition"' in prompt and '"type": "answer"' not in prompt and '"type": "entity"' not in prompt
    nodes = list(_walk(out.trace["tree"]))
    assert [n["status"] for n in nodes if n["outputs"]] == ["decomposed"] * 3
    (refused,), _ = ask(method)  # an answer is not an offered action: a parse error, never an answer
    assert refused.trace["tree"]["status"] == "parse_error" and "not offered" in refused.trace["tree"]["error"]


def test_ablation_switches_change_the_offered_actions():
    method, llm, _ = make([], actions=["decomposition", "entity"])
    ask(method)
    assert '"type": "answer"' not in decision_texts(llm)[0] and '"type": "entity"' in decision_texts(llm)[0]
    method, llm, _ = make([], all_decom_depth=1)
    ask(method)
    assert '"type": "answer"' not in decision_texts(llm)[0]
    method, llm, _ = make(
        [(on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [-1.0, -1.0]))],
        retry_actions=["decomposition", "entity"],
    )
    ask(method)
    first, retry = decision_texts(llm)
    assert '"type": "answer"' in first and '"type": "answer"' not in retry


def test_without_confidence_a_low_probability_answer_is_accepted_once():
    rule = (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [-9.0, -9.0]))
    method, llm, _ = make([rule], use_confidence=False)
    (out,), _ = ask(method)
    assert out.trace["tree"]["status"] == "answered" and out.trace["tree"]["confidence"] is None
    assert len(decision_texts(llm)) == 1


class PartlyWithoutLogprobs(ScriptedLLM):
    """Drops the log-probs of every output for a prompt that names `without` (a server giving null log-probs)."""

    def __init__(self, without: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.without = without

    def _generate(self, prompts, params, seeds=None):
        outputs = super()._generate(prompts, params, seeds)
        return [
            [replace(g, logprobs=None) if self.without in render(p) else g for g in gens]
            for p, gens in zip(prompts, outputs)
        ]


def test_an_answer_without_logprobs_is_unconfident_counted_and_retried_without_stopping_the_batch():
    q2 = "Who founded Arthur's Magazine?"
    rules = [
        FINAL,
        (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [0.0, 0.0])),
        (on(q2), answer_reply("Arthur"), answer_logprobs("Arthur", [0.0])),  # certain, but the log-probs are lost
    ]
    llm = PartlyWithoutLogprobs(q2, rules=rules, default_reply="no idea")
    (sure, unknown), _ = ask(prunerag(llm, StubRetriever()), Q, q2)
    assert sure.trace["tree"]["status"] == "answered" and sure.stats["missing_logprobs"] == 0
    tree = unknown.trace["tree"]
    assert (tree["status"], tree["answer"], tree["confidence"]) == ("unresolved", "", None)
    assert tree["rejected"] == tree["missing_logprobs"] == 2  # round 1 and its retry: rejected like low confidence
    assert unknown.stats["missing_logprobs"] == 2 and unknown.stats["answers_rejected"] == 2
    first, retry = [t for t in decision_texts(llm) if q2 in t]
    assert retry == first + REFLECTION
    [final] = [t for t in final_texts(llm) if q2 in t]
    assert f"[Doc 1] Title 1 of {q2}" in final  # an unresolved leaf keeps its passages
    assert "2 without log-probs" in format_tree(tree)
    assert span_confidence(Generation("x", ("x",), None), (0, 1)) is None

    llm = PartlyWithoutLogprobs(q2, rules=rules, default_reply="no idea")
    (out,), _ = ask(prunerag(llm, StubRetriever(), use_confidence=False), q2)
    assert out.trace["tree"]["status"] == "answered" and out.stats["missing_logprobs"] == 0  # no confidence asked


def test_a_round_is_one_llm_call_and_one_search_for_all_questions_of_the_batch():
    rules = [(on("A?"), decompose("A1?", "A2?")), (on("B?"), entity("Be1", "Be2"))]
    method, llm, retriever = make(rules, max_depth=3)
    outputs, costs = ask(method, "A?", "B?", "C?")
    assert [len(c.prompts) for c in llm.calls] == [3, 2, 3]  # round 1: 3 roots, round 2: A's children, finals
    assert retriever.batches == [["A?", "B?", "C?"], ["A1?", "A2?", "Be1", "Be2"]]
    assert [c.retrieval_calls for c in costs] == [3, 3, 1]
    assert [c.llm_calls for c in costs] == [4, 2, 2]
    assert [o.stats["decision_calls"] for o in outputs] == [3, 1, 1]
    assert set(costs[0].seconds) == {"decision", "answer", "retrieval"}


def test_node_batching_makes_the_same_trees_with_one_call_per_node():
    rules = [(on("A?"), decompose("A1?", "A2?")), (on("B?"), entity("Be1", "Be2"))]
    by_round, _, _ = make(rules)
    by_node, llm, retriever = make(rules, batching="node")
    trees = [[o.trace["tree"] for o in ask(m, "A?", "B?", "C?")[0]] for m in (by_round, by_node)]
    assert trees[0] == trees[1]
    assert all(len(c.prompts) == 1 for c in llm.calls) and len(llm.calls) == 8
    assert all(len(b) == 1 for b in retriever.batches) and len(retriever.batches) == 7


def test_every_passage_of_the_tree_is_retrieved_once_in_the_output():
    method, _, _ = make([(on(Q), decompose("S1?", "S2?"))], max_depth=2)
    (out,), _ = ask(method)
    ids = [p.id for p in out.retrieved]
    assert len(ids) == len(set(ids)) == 15 and ids[0] == f"{Q}#1"


def test_the_final_prompt_hides_internal_passages_unless_asked():
    method, llm, _ = make([(on(Q), decompose("S1?", "S2?"))], max_depth=2)
    ask(method)
    assert f"Title 1 of {Q}" not in final_texts(llm)[0] and "Title 1 of S1?" in final_texts(llm)[0]
    method, llm, _ = make([(on(Q), decompose("S1?", "S2?"))], max_depth=2, aggregator={"show_internal_context": True})
    ask(method)
    assert f"Title 1 of {Q}" in final_texts(llm)[0]


def test_code_exact_serialization_drops_an_undecided_leaf_above_depth_d():
    rules = [
        (re.escape(f"Query: {Q}\nOutput:{REFLECTION}"), decompose("S1?", "S2?")),
        (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [-1.0, -1.0])),
    ]
    for all_leaves, shown in ((True, True), (False, False)):
        method, llm, _ = make(rules, max_depth=3, aggregator={"include_context_for_all_leaves": all_leaves})
        (out,), _ = ask(method)
        children = out.trace["tree"]["children"]
        assert [(c["depth"], c["status"]) for c in children] == [(2, "unresolved")] * 2
        assert ("Title 1 of S1?" in final_texts(llm)[0]) is shown


def test_recursive_aggregation_summarizes_entities_and_answers_bottom_up():
    rules = [
        (on(Q), decompose("S1?", "S2?")),
        (on("S1?"), answer_reply("Arthur"), answer_logprobs("Arthur", [0.0])),
        (on("S2?"), entity("E1", "E2")),
        (r"say about (E\d)", r"fact about \1"),
        (r"Query: S2\?\nAnswer:", "from entities"),
        (r"Query: .*\nAnswer:", r"\\boxed{June 1844}"),
    ]
    llm = ScriptedLLM(rules=rules)
    method = prunerag(llm, StubRetriever(), max_depth=3, aggregator={"mode": "recursive"})
    (out,), (cost,) = ask(method)
    assert out.prediction == "June 1844" and not out.parse_failed
    assert [len(c.prompts) for c in llm.calls] == [1, 2, 2, 1, 1]  # 2 rounds, then depth 3, 2, 1
    root_prompt = llm.calls[-1].texts[0]
    assert "- S1?: Arthur" in root_prompt and "- S2?: from entities" in root_prompt
    assert "- About E1: fact about E1" in llm.calls[-2].texts[0]
    assert out.trace["node_results"][:3] == ["June 1844", "Arthur", "from entities"]
    assert set(cost.seconds) == {"decision", "aggregate", "answer", "retrieval"}


def test_an_accepted_root_answer_is_the_recursive_prediction_without_another_call():
    rule = (on(Q), answer_reply("June 1844"), answer_logprobs("June 1844", [0.0, 0.0]))
    llm = ScriptedLLM(rules=[rule])
    (out,), _ = ask(prunerag(llm, StubRetriever(), aggregator={"mode": "recursive"}))
    assert out.prediction == "June 1844" and len(llm.calls) == 1


def test_bad_knobs_are_refused():
    for knobs in ({"batching": "tree"}, {"confidence_span": "last"}, {"actions": ["guess"]}, {"max_depth": 0},
                  {"aggregator": {"mode": "vote"}}):  # fmt: skip
        with pytest.raises(ValueError):
            prunerag(ScriptedLLM(), StubRetriever(), **knobs)


def test_format_tree_prints_statuses_answers_and_passage_titles():
    sure = (on("S1?"), answer_reply("Arthur"), answer_logprobs("Arthur", [0.0]))
    method, _, _ = make([(on(Q), decompose("S1?", "S2?")), sure])
    (out,), _ = ask(method)
    text = format_tree(out.trace["tree"], outputs=True)
    lines = text.splitlines()
    assert lines[0].startswith(f"[Q1 decomposed] {Q}")
    assert any("├─ [Q2 answered] S1?  => 'Arthur'  (conf 1.000)" in line for line in lines)
    assert any("└─ [Q2 parse_error] S2?" in line for line in lines)
    assert "docs: Title 1 of S1? | Title 2 of S1?" in text and "llm: no idea" in text


def _walk(tree):
    yield tree
    for child in tree["children"]:
        yield from _walk(child)
