"""ProbTree with the scripted LLM: the decomposition tree, rounds of ready nodes batched across questions, and
the most confident of the closed-book, open-book and child-aggregating answers kept at every node."""

from __future__ import annotations

import json

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.llm.types import Generation
from hoprag.methods import ProbTree
from hoprag.search.probtree import build_tree, read_answer
from hoprag.search.probtree.reasoning import FLOOR
from tests.fakes import KeywordRetriever

ROOT = "Who directed the film that Ann starred in?"
SUB1, SUB2 = "Which film did Ann star in?", "Who directed <1>?"
DECOMPOSITION = json.dumps({ROOT: [SUB1, SUB2]}) + "."
CORPUS = [
    Passage("p1", "Ann", "Ann starred in the film Bravo."),
    Passage("p2", "Bravo", "Bravo is a film directed by Cole."),
    Passage("p3", "Other", "Nothing here."),
]

CB, OB, CA = "thinking step by step", "relevant Wikipedia text", "sub-questions with their answers"


def asks(kind: str, question: str):
    """A rule pattern: the `kind` prompt about `question`."""
    return lambda p: kind in p and (f"Q: {question}\nA:" in p or f"Question:\n{question}\nAnswer:" in p)


RULES = [
    (lambda p: "HQDT" in p and f"Q: {ROOT}" in p, DECOMPOSITION, -0.5),
    (asks(CB, SUB1), "Ann was in Alpha. So the answer is: Alpha.", -0.2),
    (asks(OB, SUB1), "The text names Bravo. So the answer is: Bravo.", -0.1),
    (asks(CB, "Who directed Bravo?"), "Bravo was made by Cole. So the answer is: Cole.", -0.3),
    (asks(OB, "Who directed Bravo?"), "Not said. So the answer is: Unknown.", -0.01),
    (asks(CB, ROOT), "I think Dee. So the answer is: Dee.", -2.0),
    (asks(OB, ROOT), "Maybe Eve. So the answer is: Eve.", -1.5),
    (asks(CA, ROOT), "Ann starred in Bravo, directed by Cole. So the answer is: Cole.", -0.4),
]


def test_every_node_keeps_its_most_confident_answer_and_rounds_wait_for_named_siblings():
    llm = ScriptedLLM(rules=RULES, default_reply="no rule", default_logprob=-9.0)
    retriever = KeywordRetriever(CORPUS)
    costs = [Cost()]
    (out,) = ProbTree(llm, retriever, k=2).answer([QAExample("a", ROOT, ["Cole"])], costs)

    # decompose, then sub-question 1, then sub-question 2 (it names <1>), then the root (CB, OB, CA)
    assert [len(c.prompts) for c in llm.calls] == [1, 2, 2, 3]
    assert retriever.batches == [[SUB1], ["Who directed Bravo?", "Bravo"], [ROOT]]  # a leaf also searches <1>
    tree = out.trace["tree"]
    sub1, sub2 = tree["children"]
    assert sub1["chosen"] == "open_book"  # -0.1 beats closed-book's -0.2
    assert sub2["question"] == "Who directed Bravo?" and sub2["chosen"] == "closed_book"  # "Unknown" scores the floor
    assert [c["score"] for c in sub2["candidates"]] == [-0.3, FLOOR]
    # children: (explanation -0.4 + decomposition -0.5 + children -0.1 and -0.3) / 4 beats -1.5 and -2.0
    assert [(c["kind"], c["score"]) for c in tree["candidates"]] == [
        ("closed_book", -2.0),
        ("open_book", -1.5),
        ("children", -0.325),
    ]
    assert out.prediction == "Cole" and not out.parse_failed
    assert out.stats == {
        "tree_nodes": 3.0,
        "tree_depth": 2.0,
        "retrieval_calls": 4.0,
        "decomposition_failed": 0.0,
        "answers_without_marker": 0.0,
        "unscored_answers": 0.0,
        "capped": 0.0,
        "wins_closed_book": 1.0,
        "wins_open_book": 1.0,
        "wins_children": 1.0,
        "rounds": 3.0,
    }
    assert [p.id for p in out.retrieved] == ["p1", "p2"]  # every passage read, distinct, in reading order
    assert (costs[0].llm_calls, costs[0].retrieval_calls) == (8, 4)
    assert set(costs[0].seconds) == {"decompose", "reasoning", "retrieval"}


def test_questions_of_a_batch_share_each_rounds_calls_and_finish_independently():
    llm = ScriptedLLM(rules=RULES, default_reply="no JSON here", default_logprob=-1.0)
    method = ProbTree(llm, KeywordRetriever(CORPUS), k=1)
    examples = [QAExample("a", ROOT, ["Cole"]), QAExample("b", "Where is Bravo set?", ["x"])]
    outputs = method.answer(examples, [Cost(), Cost()])
    # the second question's decomposition is unreadable: its root alone is answered, in round 1
    assert [len(c.prompts) for c in llm.calls] == [2, 4, 2, 3]
    assert outputs[1].stats["decomposition_failed"] == 1.0 and outputs[1].stats["rounds"] == 1.0
    assert outputs[1].parse_failed and outputs[1].stats["answers_without_marker"] == 2.0
    assert outputs[0].prediction == "Cole"


def test_batching_by_question_makes_one_call_per_prompt_with_the_same_answers():
    llm = ScriptedLLM(rules=RULES, default_reply="none", default_logprob=-1.0)
    (out,) = ProbTree(llm, KeywordRetriever(CORPUS), k=2, batching="question").answer(
        [QAExample("a", ROOT, ["Cole"])], [Cost()]
    )
    assert [len(c.prompts) for c in llm.calls] == [1] * 8 and out.prediction == "Cole"
    with pytest.raises(ValueError, match="method.batching"):
        ProbTree(llm, KeywordRetriever(CORPUS), batching="node")


def test_the_tree_is_capped_at_max_nodes_and_says_what_it_left_out():
    llm = ScriptedLLM(rules=RULES, default_reply="none", default_logprob=-1.0)
    (out,) = ProbTree(llm, KeywordRetriever(CORPUS), max_nodes=2).answer([QAExample("a", ROOT, ["Cole"])], [Cost()])
    assert out.stats["capped"] == 1.0 and out.stats["tree_nodes"] == 1.0
    assert out.trace["capped"]["questions_not_added"] == [SUB1, SUB2]


def test_nested_decomposition_and_self_repeating_lists():
    text = '{"R?": ["A?", "B?"], "A?": ["A1?", "A2 of <1>?"], "B?": ["B?"]}'
    tree = build_tree("R?", Generation(text, tuple(text.split()), (-1.0,) * len(text.split())), max_nodes=16)
    a, b = tree.root.children
    assert [c.question for c in a.children] == ["A1?", "A2 of <1>?"] and b.children == []  # B? repeats itself
    assert a.decomposition_score == -1.0 and b.decomposition_score is None


def test_confidence_is_the_explanation_s_mean_log_prob_and_unscorable_replies_get_the_floor():
    text = "Because X. So the answer is: Y."
    tokens = tuple(text.split())
    scored = read_answer(Generation(text, tokens, (-1.0, -3.0, -9.0, -9.0, -9.0, -9.0, -9.0)), "closed_book")
    assert (scored.answer, scored.score) == ("Y", -2.0)
    assert read_answer(Generation(text, tokens, None), "open_book").score == FLOOR  # no log-probs
    bare = read_answer(Generation("Y", ("Y",), (-0.1,)), "open_book")
    assert (bare.answer, bare.score, bare.marked) == ("Y", FLOOR, False)
    whole = read_answer(Generation(text, tokens, (-1.0,) * 7), "closed_book", confidence="answer_tokens")
    assert whole.score == -1.0


def test_log_probs_are_declared():
    method = ProbTree(ScriptedLLM(), KeywordRetriever(CORPUS))
    assert "logprobs" in method.required_capabilities()
