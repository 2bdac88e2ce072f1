"""NLI-guided MCTS with a scripted LLM and a scripted verifier (spec §5.5, §13): selection, backpropagation,
depth limit, batching, augment children and their rollouts, per-question seeds, log-prob priors, the final
choice, and self-correction."""

from __future__ import annotations

import json
import math
import random
from functools import partial

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt
from hoprag.llm.types import Generation
from hoprag.methods import SCRAGSearch
from hoprag.search.mcts import (
    AnswerSearch,
    MCTSConfig,
    Node,
    backpropagate,
    best_child,
    final_answer,
    iter_nodes,
    puct,
    sample_seed,
    select,
    uct,
)
from hoprag.search.sc_rag_answer import parse_answer, render_snippets
from hoprag.verifiers import ScriptedVerifier
from hoprag.verifiers.reward import EvidenceExtractor, NLIReward
from tests.fakes import KeywordRetriever

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
        retriever=retriever,
        **config,
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


def test_depth_limit_budget_and_batched_llm_calls_per_simulation():
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
    expansions = [c for c in llm.calls if c.params.n == 3]
    rollouts = [c for c in llm.calls if c.params.n == 1]
    assert len(expansions) <= 24 and len(rollouts) <= len(expansions)
    assert len(expansions) + len(rollouts) == len(llm.calls)
    for call in llm.calls:  # both questions' expansions (or rollouts) in one call
        assert call.params.temperature == 0.7 and call.params.top_p == 0.9
        assert call.params.max_new_tokens == 256 and 1 <= len(call.prompts) <= 2
    assert len(llm.calls[0].prompts) == 2 and len(llm.calls[1].prompts) == 2  # step 1: expansions, then rollouts
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


def test_a_deferred_augment_child_is_evaluated_by_sampling_under_its_own_context():
    llm = ScriptedLLM(rules=[("capital", reply("Paris"))])
    search = make_search(llm, KeywordRetriever(CORPUS), simulations=2, branching=2, augment_rollout=False)
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


def test_puct_with_log_prob_priors_and_seeds_per_question_and_step():
    llm = ScriptedLLM(rules=[("capital", [reply("Paris"), reply("Lyon")], [-0.1] * 6)])
    search = make_search(llm, KeywordRetriever(CORPUS), simulations=3, branching=2, selection="puct", prior="logprob",
                         seed=7)  # fmt: skip
    [tree] = search.run([QUESTION], [CORPUS[:1]])
    priors = [ch.prior for ch in tree.root.children]
    assert priors == pytest.approx([1 / 3, 1 / 3, 1 / 3])  # equal log-probs; the augment child gets 1/(k+1)
    assert llm.calls[0].seeds == [sample_seed(7, QUESTION, 0)]  # step 0's expansion ...
    assert llm.calls[1].seeds == [sample_seed(7, QUESTION, 0, 1)]  # ... and its augment child's rollout
    seeds = [s for c in llm.calls for s in c.seeds]
    assert len(set(seeds)) == len(seeds) and all(c.params.seed is None for c in llm.calls)
    assert sample_seed(7, QUESTION, 0) == 35478622  # a stable hash: the same in every process
    unseeded = ScriptedLLM(rules=[("capital", reply("Paris"))])
    make_search(unseeded, simulations=2, branching=2, seed=None).run([QUESTION], [CORPUS[:1]])
    assert all(c.seeds is None and c.params.seed is None for c in unseeded.calls)


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


class SeededLLM(LLM):
    """Draws each sample's answer from a seeded RNG: the prompt's own seed when the caller gives per-prompt
    seeds, else one stream seeded by `params.seed` and shared by the whole call, so that a prompt's samples
    depend on its position in the batch (as a batched sampler's do)."""

    def _generate(self, prompts, params, seeds=None):
        shared = random.Random(params.seed)
        outputs = []
        for i, _ in enumerate(prompts):
            rng = shared if seeds is None else random.Random(seeds[i])
            answers = [rng.choice(["Paris", "Lyon", "Berlin", "Seine"]) for _ in range(params.n)]
            outputs.append([Generation(reply(a), (a,), (-0.5,)) for a in answers])
        return outputs


def test_a_questions_tree_does_not_depend_on_the_questions_sharing_its_batch():
    questions = [QUESTION, "Which city is the capital of France?", "What is the capital of Germany?",
                 "Which river flows through Paris?"]  # fmt: skip
    contexts = [CORPUS[:1], CORPUS[1:2], CORPUS[2:3], CORPUS[3:4]]

    def trees(batch_size: int) -> list[dict]:
        search = make_search(SeededLLM(), KeywordRetriever(CORPUS), simulations=8, seed=11)
        out = []
        for i in range(0, len(questions), batch_size):
            out += [t.to_trace() for t in search.run(questions[i : i + batch_size], contexts[i : i + batch_size])]
        return out

    alone, together = trees(1), trees(4)
    assert alone == together
    assert len({json.dumps(t["nodes"]) for t in together}) == 4  # the trees do differ from one another


def test_a_new_augment_child_gets_one_scored_rollout_answer_at_once():
    llm = ScriptedLLM(rules=[("capital", reply("Paris"))])
    [tree] = make_search(llm, KeywordRetriever(CORPUS), simulations=1, branching=2).run([QUESTION], [CORPUS[:1]])
    *answers, augment = tree.root.children
    assert [n.kind for n in answers] == ["answer", "answer"] and augment.kind == "augment" and not augment.expanded
    [rollout] = augment.children
    assert rollout.kind == "answer" and rollout.ctx == augment.ctx and rollout.depth == 2
    assert rollout.reward is not None and rollout.parsed.answer == "Paris"
    assert augment.visits == 1 and augment.q == pytest.approx(rollout.reward) and tree.root.visits == 3
    assert tree.samples == 3 and [c.params.n for c in llm.calls] == [2, 1]
    assert "[doc_id=2]" in llm.calls[1].texts[0]  # the rollout reads the augmented context

    # later expansions of an augment child add `branching` answers next to its rollout answer
    llm = ScriptedLLM(rules=[("capital", [reply("Paris"), reply("Lyon")])])
    [tree] = make_search(llm, KeywordRetriever(CORPUS), simulations=12, branching=2).run([QUESTION], [CORPUS[:1]])
    augments = [n for n in iter_nodes(tree.root) if n.kind == "augment"]
    assert any(a.expanded for a in augments)
    for a in augments:
        answers = [ch for ch in a.children if ch.kind == "answer"]
        assert len(answers) == (3 if a.expanded else 1) and a.children[0] is answers[0]

    deferred = ScriptedLLM(rules=[("capital", reply("Paris"))])
    search = make_search(deferred, KeywordRetriever(CORPUS), simulations=1, branching=2, augment_rollout=False)
    [tree] = search.run([QUESTION], [CORPUS[:1]])
    augment = tree.root.children[-1]
    assert augment.kind == "augment" and augment.children == [] and augment.visits == 0
    assert len(deferred.calls) == 1 and tree.samples == 2


class FixedLLM(LLM):
    """Paris, Lyon, Berlin for every prompt, with the given log-probs (None: the backend gave none)."""

    def __init__(self, logprobs) -> None:
        super().__init__()
        self.logprobs = logprobs

    def _generate(self, prompts, params, seeds=None):
        answers = ["Paris", "Lyon", "Berlin"][: params.n]
        return [[Generation(reply(a), (a,), lp) for a, lp in zip(answers, self.logprobs)] for _ in prompts]


def test_an_answer_without_log_probs_gets_the_prior_of_its_least_confident_sibling():
    search = make_search(FixedLLM([(-0.1,), None, (-2.0,)]), simulations=1, branching=3, selection="puct",
                         prior="logprob", augment=False)  # fmt: skip
    [tree] = search.run([QUESTION], [CORPUS[:1]])
    paris, lyon, berlin = tree.root.children
    total = math.exp(-0.1) + 2 * math.exp(-2.0)
    assert paris.prior == pytest.approx(math.exp(-0.1) / total)
    assert lyon.prior == pytest.approx(berlin.prior) == pytest.approx(math.exp(-2.0) / total)  # unknown: unconfident
    assert lyon.mean_logprob is None and tree.missing_logprobs == 1

    unknown = make_search(FixedLLM([None] * 3), simulations=1, branching=3, selection="puct", prior="logprob")
    [tree] = unknown.run([QUESTION], [CORPUS[:1]])
    assert [ch.prior for ch in tree.root.children] == pytest.approx([1 / 3] * 3) and tree.missing_logprobs == 3


def test_sc_rag_search_reports_the_samples_without_log_probs():
    verifier = ScriptedVerifier(rules=[], default=(0.6, 0.3, 0.1))
    method = SCRAGSearch(
        FixedLLM([(-0.1,), None, None]), KeywordRetriever(CORPUS), verifier,
        ChatPrompt("Answer in JSON.", "Question: {question}\n{passages}"), k=1,
        search=partial(AnswerSearch, simulations=1, branching=3, augment=False), faithfulness=False,
    )  # fmt: skip
    [out] = method.answer([QAExample("q0", QUESTION, ["Paris"])], [Cost()])
    assert out.stats["missing_logprobs"] == 2


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="selection"):
        MCTSConfig(selection="greedy")
    with pytest.raises(ValueError, match="positive"):
        MCTSConfig(max_depth=0)
    with pytest.raises(ValueError, match="temperature"):
        MCTSConfig(temperature=0.0)
