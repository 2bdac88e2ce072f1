"""NLI-guided MCTS with a scripted LLM and a scripted verifier (spec §5.5, §13): selection, backpropagation,
depth limit, batching, augment children, the final choice, and self-correction."""

from __future__ import annotations

import json
import math
import random

import pytest

from hoprag.data.types import Passage
from hoprag.llm import ScriptedLLM
from tests.fakes import KeywordRetriever
from hoprag.search.mcts import (
    AnswerSearch,
    MCTSConfig,
    Node,
    backpropagate,
    best_child,
    final_answer,
    iter_nodes,
    puct,
    select,
    uct,
)
from hoprag.search.sc_rag_answer import parse_answer, render_snippets
from hoprag.verifiers import ScriptedVerifier
from hoprag.verifiers.reward import EvidenceExtractor, NLIReward

CORPUS = [
    Passage("p1", "Paris", "Paris is the capital of France."),
    Passage("p2", "Lyon", "Lyon is a city in France."),
    Passage("p3", "Berlin", "Berlin is the capital of Germany."),
    Passage("p4", "Seine", "The Seine flows through Paris."),
    Passage("p5", "Louvre", "The Louvre is a museum in Paris."),
    Passage("p6", "Rhine", "The Rhine flows through Germany."),
]
QUESTION = "What is the capital of France?"


def reply(answer: str, reasoning: str = "") -> str:
    return json.dumps({"answer": answer, "evidence_doc_ids": [1], "reasoning": reasoning})


def make_search(llm, retriever=None, verifier=None, **config):
    verifier = verifier or ScriptedVerifier(
        rules=[(".", "Berlin", (0.02, 0.03, 0.95)), ("capital of France", "is Paris", (0.95, 0.04, 0.01))],
        default=(0.1, 0.8, 0.1),
    )
    reward = NLIReward(verifier, EvidenceExtractor())
    return AnswerSearch(
        llm,
        prompt=lambda q, passages: f"Question: {q}\n{render_snippets(passages)}",
        parse=lambda raw: parse_answer(raw, lambda text: text.strip()),
        reward=reward,
        config=MCTSConfig(**config),
        retriever=retriever,
    )


def node(id, q=0.0, visits=0, reward=None, kind="answer", prior=1.0):
    n = Node(id=id, kind=kind, depth=1, ctx=(), reward=reward, prior=prior)
    n.visits, n.value_sum = visits, q * visits
    return n


def test_uct_takes_unvisited_children_first_then_follows_the_formula():
    parent = node(0, kind="root", visits=10)
    a, b, c = node(1, q=0.5, visits=2), node(2, q=0.9, visits=7), node(3)
    parent.children = [a, b, c]
    parent.expanded = True
    assert uct(c, 10, 1.4) == math.inf and best_child(parent, "uct", 1.4) is c
    assert uct(a, 10, 1.4) == pytest.approx(0.5 + 1.4 * math.sqrt(math.log(10) / 2))  # 2.002
    assert uct(b, 10, 1.4) == pytest.approx(0.9 + 1.4 * math.sqrt(math.log(10) / 7))  # 1.701
    parent.children = [b, a]
    assert best_child(parent, "uct", 1.4) is a and select(parent) is a
    assert puct(a, 10, 1.4) == pytest.approx(0.5 + 1.4 * 1.0 * math.sqrt(10) / 3)
    b.prior = 3.0
    assert best_child(parent, "puct", 1.4) is b  # 0.9 + 1.4*3*sqrt(10)/8 = 2.56 > 1.976


def test_backpropagation_keeps_running_means_along_the_path():
    root = node(0, kind="root")
    child = node(1)
    child.parent = root
    leaf = node(2)
    leaf.parent = child
    for r in (1.0, -2.0, 0.4):
        backpropagate(leaf, r)
    backpropagate(child, 0.6)
    assert (leaf.visits, leaf.q) == (3, pytest.approx(-0.2))
    assert (child.visits, child.q) == (4, pytest.approx(0.0))
    assert root.visits == 4 and root.q == pytest.approx(0.0)


def test_final_choice_follows_the_tie_breaks():
    root = node(0, kind="root")
    a, b, c, d = node(1, q=0.5, visits=2, reward=0.1), node(2, q=0.5, visits=3, reward=0.0), node(3, q=0.9), node(4)
    root.children = [a, b, c, d]
    c.visits, c.value_sum, c.kind = 4, 3.6, "augment"  # the best Q, but not an answer node
    assert final_answer(root) is b  # equal Q: more visits wins
    b.visits, b.value_sum = 2, 1.0
    assert final_answer(root) is a  # equal Q and visits: higher own reward wins
    b.reward = 0.1
    assert final_answer(root) is a  # all equal: the older node
    assert final_answer(node(0, kind="root")) is None


def test_a_contradicted_branch_loses_visits_and_the_entailed_answer_wins():
    llm = ScriptedLLM(rules=[("capital of France", [reply("Berlin"), reply("Paris"), reply("Berlin")])])
    search = make_search(llm, simulations=24, augment=False)
    [tree] = search.run([QUESTION], [CORPUS[:2]])
    first = tree.root.children
    assert [n.parsed.answer for n in first] == ["Berlin", "Paris", "Berlin"]
    assert first[0].reward < -1.5 and first[1].reward > 0.5
    # the scripted re-samples under the Paris branch are 2/3 contradicted too, so exploration returns to the
    # contradicted siblings now and then; they still get a fraction of the visits
    assert first[1].visits > 3 * max(first[0].visits, first[2].visits)
    best = tree.best()
    assert best.parsed.answer == "Paris" and best.q > 0.5
    assert tree.root.visits == sum(ch.visits for ch in first)  # every evaluation reached the root


@pytest.mark.parametrize("seed", range(5))
def test_with_contradicted_samples_half_the_time_the_entailed_answer_is_returned(seed):
    rng = random.Random(seed)
    llm = ScriptedLLM(rules=[("capital", lambda _: [reply(rng.choice(["Berlin", "Paris"])) for _ in range(3)])])
    [tree] = make_search(llm, KeywordRetriever(CORPUS), simulations=24).run([QUESTION], [CORPUS[:2]])
    assert tree.best().parsed.answer == "Paris"


def test_depth_limit_budget_and_one_batched_llm_call_per_simulation():
    llm = ScriptedLLM(rules=[("capital", [reply("Paris"), reply("Lyon"), reply("Berlin")])])
    retriever = KeywordRetriever(CORPUS)
    search = make_search(llm, retriever, simulations=24, branching=3, max_depth=2)
    questions = [QUESTION, "What is the capital of Germany?"]
    trees = search.run(questions, [CORPUS[:1], CORPUS[2:3]])
    for tree in trees:
        nodes = iter_nodes(tree.root)
        assert max(n.depth for n in nodes) == 2
        assert tree.samples <= 24 * (3 + 1) and tree.simulations == 24
        assert all(n.kind != "augment" or n.depth < 2 for n in nodes)  # an augment node must be expandable
    assert len(llm.calls) <= 24
    for call in llm.calls:  # both questions' expansions in one call, with n = branching samples
        assert call.params.n == 3 and call.params.temperature == 0.7 and call.params.top_p == 0.9
        assert call.params.max_new_tokens == 256 and 1 <= len(call.prompts) <= 2
    assert len(llm.calls[0].prompts) == 2
    assert len(retriever.batches[0]) == 2  # augment retrieval batched too


def test_once_every_leaf_is_at_max_depth_no_more_samples_are_drawn():
    llm = ScriptedLLM(rules=[("capital", reply("Paris"))])
    search = make_search(llm, simulations=10, branching=2, max_depth=1, augment=False)
    [tree] = search.run([QUESTION], [CORPUS[:1]])
    assert len(llm.calls) == 1 and tree.samples == 2 and tree.root.visits == 11  # 2 rewards, then 9 re-uses
    assert max(n.depth for n in iter_nodes(tree.root)) == 1


def test_augment_children_add_at_most_three_new_passages_from_question_and_answer():
    llm = ScriptedLLM(rules=[("capital", reply("Paris"))])
    retriever = KeywordRetriever(CORPUS)
    search = make_search(llm, retriever, simulations=3, branching=1, max_depth=3, temperature=0.7)
    [tree] = search.run([QUESTION], [CORPUS[:1]])
    augments = [n for n in iter_nodes(tree.root) if n.kind == "augment"]
    assert augments
    for aug in augments:
        parent_ids = [p.id for p in aug.parent.ctx]
        ids = [p.id for p in aug.ctx]
        assert ids[: len(parent_ids)] == parent_ids and len(ids) == len(set(ids))
        assert 1 <= len(ids) - len(parent_ids) <= 3
    assert retriever.batches[0] == [QUESTION]  # the root has no answer yet
    assert f"{QUESTION} Paris" in [q for batch in retriever.batches for q in batch]  # an answer leaf's query

    full = KeywordRetriever(CORPUS[:2])  # knows nothing beyond the context
    [tree] = make_search(llm, full, simulations=3, branching=1).run([QUESTION], [CORPUS[:2]])
    assert all(n.kind != "augment" for n in iter_nodes(tree.root))


def test_an_augment_child_is_evaluated_by_sampling_under_its_own_context():
    llm = ScriptedLLM(rules=[("capital", reply("Paris"))])
    search = make_search(llm, KeywordRetriever(CORPUS), simulations=2, branching=2)
    [tree] = search.run([QUESTION], [CORPUS[:1]])
    augment = tree.root.children[-1]
    assert augment.kind == "augment" and augment.expanded and augment.visits == 2  # chosen first as unvisited
    assert all(ch.ctx == augment.ctx for ch in augment.children if ch.kind == "answer")
    assert "[doc_id=2]" in llm.calls[1].texts[0]  # the second step's prompt reads the augmented context


def test_one_simulation_one_sample_degenerates_to_a_single_answer():
    llm = ScriptedLLM(rules=[("capital", reply("Paris"))])
    search = make_search(llm, KeywordRetriever(CORPUS), simulations=1, branching=1, augment=False, temperature=0.0)
    [tree] = search.run([QUESTION], [CORPUS[:1]])
    assert len(llm.calls) == 1 and llm.calls[0].params.n == 1 and tree.size == 2
    assert tree.best().parsed.answer == "Paris"


def test_puct_with_log_prob_priors_and_seeds_per_step():
    llm = ScriptedLLM(rules=[("capital", [reply("Paris"), reply("Lyon")], [-0.1] * 6)])
    search = make_search(llm, KeywordRetriever(CORPUS), simulations=3, branching=2, selection="puct", prior="logprob",
                         seed=7)  # fmt: skip
    [tree] = search.run([QUESTION], [CORPUS[:1]])
    priors = [ch.prior for ch in tree.root.children]
    assert priors == pytest.approx([1 / 3, 1 / 3, 1 / 3])  # equal log-probs; the augment child gets 1/(k+1)
    assert [c.params.seed for c in llm.calls] == [7, 8, 9]


def test_trace_holds_visits_values_and_rewards():
    llm = ScriptedLLM(rules=[("capital", [reply("Berlin"), reply("Paris")])])
    [tree] = make_search(llm, simulations=4, branching=2, augment=False).run([QUESTION], [CORPUS[:1]])
    trace = tree.to_trace()
    assert trace["chosen"] == tree.best().id and trace["best_reward_answer"] == "Paris"
    root, *nodes = trace["nodes"]
    assert root == {"id": 0, "parent": None, "kind": "root", "depth": 0, "visits": 7, "value": round(tree.root.q, 4)}
    assert tree.samples == 6 and tree.simulations == 4  # 3 expansions (6 rewards), then 1 re-used terminal reward
    assert all({"visits", "value", "reward", "answer", "format"} <= set(n) for n in nodes)
    json.dumps(trace)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="selection"):
        MCTSConfig(selection="greedy")
    with pytest.raises(ValueError, match="positive"):
        MCTSConfig(max_depth=0)
    with pytest.raises(ValueError, match="temperature"):
        MCTSConfig(temperature=0.0)
