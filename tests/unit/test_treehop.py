"""TreeHop: the update network, the paired InfoNCE loss, tree construction and the pruned tree search."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hoprag.data.twowiki import parse_2wiki
from hoprag.treehop import TreeHop, build_tree, build_trees, tree_search
from hoprag.treehop.module import info_nce
from hoprag.treehop.search import official_keep, topk_keep

# -- the network -----------------------------------------------------------------------------------------


def test_paper_sizes_give_the_papers_parameter_count():
    model = TreeHop(1024)
    assert model.config["gate_dim"] == 2048 and model.config["mlp_dim"] == 2048
    assert model.n_parameters() == 25_192_448


def test_widths_follow_the_embedder_dimension():
    model = TreeHop(384)
    q = F.normalize(torch.randn(3, 384), dim=-1)
    assert model(q, q).shape == (3, 384)
    assert model.config["gate_dim"] == 768 and model.heads[0].value.out_features == 768


def test_zeroed_output_projection_leaves_exactly_q_minus_c():
    model = TreeHop(16, gate_init_scale=0.0)
    q, c = torch.randn(4, 16), torch.randn(4, 16)
    assert torch.equal(model(q, c), q - c)


def test_zero_initialised_correction_makes_the_untrained_model_exactly_q_minus_c():
    torch.manual_seed(0)
    model = TreeHop(16, correction_init=0.0, learn_scale=True)
    q, c = torch.randn(4, 16), torch.randn(4, 16)
    assert torch.equal(model(q, c), q - c) and not model.update(q, c)[1].any()
    assert model.gate(q, c).abs().sum() > 0  # the gate is live: only the learnt α holds it back
    assert model.n_parameters() == TreeHop(16).n_parameters() + 1 and model.alpha.item() == 0.0


def test_the_papers_parameterisation_has_no_learnt_scale():
    model = TreeHop(16)
    q, c = torch.randn(4, 16), torch.randn(4, 16)
    assert "alpha" not in dict(model.named_parameters()) and model.config["learn_scale"] is False
    assert torch.equal(model(q, c), q - c + model.gate(q, c))


@pytest.mark.parametrize("kwargs", [{"learn_scale": False}, {"learn_scale": True, "gate_init_scale": 0.0}])
def test_a_correction_that_could_never_train_is_refused(kwargs):
    with pytest.raises(ValueError, match="is `q − c` forever"):
        TreeHop(16, correction_init=0.0, **kwargs)


def test_gate_attention_is_a_softmax_over_features():
    model = TreeHop(16)
    a = model.heads[0].attention(torch.randn(5, 16), torch.randn(5, 16))
    assert (a >= 0).all() and torch.allclose(a.sum(-1), torch.ones(5))


def test_rows_are_independent_and_eval_is_deterministic():
    model = TreeHop(16).eval()
    q, c = torch.randn(6, 16), torch.randn(6, 16)
    perm = torch.randperm(6)
    assert torch.allclose(model(q, c)[perm], model(q[perm], c[perm]), atol=1e-6)
    assert torch.equal(model(q, c), model(q, c))


# -- the loss --------------------------------------------------------------------------------------------


def test_paired_info_nce_equals_a_hand_computation():
    h = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    p = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    n = torch.tensor([[[0.0, 1.0], [-1.0, 0.0]], [[1.0, 0.0], [3.0, 0.0]]], dtype=torch.float64)
    mask = torch.tensor([[True, True], [True, False]])
    tau = 0.15
    by_hand = []
    for pos, negs in ((1 / math.sqrt(2), [0.0, -1.0]), (1.0, [0.0])):
        by_hand.append(-math.log(math.exp(pos / tau) / (math.exp(pos / tau) + sum(math.exp(x / tau) for x in negs))))
    loss = info_nce(h, p, n, mask, tau)
    assert loss.item() == pytest.approx(sum(by_hand) / 2, rel=1e-9)
    assert info_nce(3 * h, 0.5 * p, 7 * n, mask, tau).item() == pytest.approx(loss.item(), rel=1e-9)


def test_info_nce_reference_value_with_orthogonal_negatives():
    h = torch.eye(8)[:1]
    negatives = torch.eye(8)[1:6][None]
    assert info_nce(h, h, negatives).item() == pytest.approx(math.log(1 + 5 * math.exp(-1 / 0.15)), rel=1e-4)


def test_in_batch_negatives_add_the_other_positives():
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    p = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    n = torch.zeros(2, 1, 2) + torch.tensor([0.0, -1.0])
    usable = ~torch.eye(2, dtype=torch.bool)
    tau = 0.15
    first = -math.log(math.exp(1 / tau) / (math.exp(1 / tau) + math.exp(0.0) + math.exp(0.6 / tau)))
    second = -math.log(math.exp(0.8 / tau) / (math.exp(0.8 / tau) + math.exp(-1 / tau) + math.exp(0.0)))
    assert info_nce(h, p, n, None, tau, usable).item() == pytest.approx((first + second) / 2, rel=1e-5)


# -- trees from 2Wiki records ----------------------------------------------------------------------------


def record(qtype, evidences, gold, distractors=("D1", "D2", "D3", "D4", "D5", "D6")):
    titles = [*gold, *distractors]
    return parse_2wiki({
        "_id": f"{qtype}-1", "type": qtype, "question": "Who founded the distributor of La La Land?",
        "answer": "x", "context": [[t, [f"{t} is a paragraph about {t}."]] for t in titles],
        "supporting_facts": [[t, 0] for t in gold], "evidences": evidences,
    })  # fmt: skip


def test_compositional_record_gives_a_two_layer_chain_with_five_negatives_each():
    ex = record(
        "compositional",
        [["La La Land", "distributor", "Summit Entertainment"], ["Summit Entertainment", "founded by", "Bernd Eichinger"]],
        ["La La Land", "Summit Entertainment"],
    )
    tree = build_tree(ex)
    ids = {p.title: p.id for p in ex.context}
    assert [(n.passage_id, n.parent, n.depth) for n in tree.nodes] == [
        (ids["La La Land"], -1, 1),
        (ids["Summit Entertainment"], 0, 2),
    ]
    layer1, layer2 = tree.nodes
    # layer 1 excludes its positive and its child; layer 2 excludes only its own positive
    assert set(layer1.negatives) == {ids[f"D{i}"] for i in range(1, 7)}
    assert set(layer2.negatives) == {ids[f"D{i}"] for i in range(1, 7)} | {ids["La La Land"]}
    assert all(len(n.negatives) >= 5 for n in tree.nodes)


def test_bridge_comparison_record_gives_two_first_layer_branches():
    ex = record(
        "bridge_comparison",
        [["La La Land", "director", "Damien Chazelle"], ["Tenet", "director", "Christopher Nolan"],
         ["Damien Chazelle", "date of birth", "1985"], ["Christopher Nolan", "date of birth", "1970"]],
        ["La La Land", "Tenet", "Damien Chazelle", "Christopher Nolan"],
    )  # fmt: skip
    tree = build_tree(ex)
    ids = {p.title: p.id for p in ex.context}
    assert [(n.passage_id, n.parent) for n in tree.nodes] == [
        (ids["La La Land"], -1), (ids["Tenet"], -1), (ids["Damien Chazelle"], 0), (ids["Christopher Nolan"], 1),
    ]  # fmt: skip
    excluded = {ids[t] for t in ("La La Land", "Tenet", "Damien Chazelle", "Christopher Nolan")}
    assert not excluded & set(tree.nodes[0].negatives)


def test_records_without_a_valid_tree_are_skipped_and_counted():
    comparison = record("comparison", [["A", "born", "1900"], ["B", "born", "1901"]], ["A", "B"])
    cyclic = record("compositional", [["A", "r", "B"], ["B", "r", "A"]], ["A", "B"])
    single = record("compositional", [["A", "born", "1900"]], ["A"])
    unmatched = record("compositional", [["Nobody Here", "r", "A"]], ["A"])
    broken = record("inference", [["A", "r", "B"], ["C", "r", "B"]], ["A", "B", "C"])  # two first-layer nodes
    trees, skipped = build_trees([comparison, cyclic, single, unmatched, broken])
    assert trees == []
    assert skipped == {"type": 1, "cycle": 1, "single_hop": 1, "unmatched": 1, "integrity": 1}


# -- tree search -----------------------------------------------------------------------------------------


def test_layerwise_topk_keeps_the_k_best_and_the_quirk_does_not():
    scores = np.array([0.9, 0.5, 0.8, 0.7])
    assert set(scores[topk_keep(scores, 2)]) == {0.9, 0.8}
    assert set(scores[official_keep(scores, 2)]) == {0.5, 0.8}
    tied = np.array([0.5, 0.7, 0.5, 0.5])
    assert topk_keep(tied, 2).tolist() == [True, True, False, False]  # ties: the earlier candidate


def line_index(n: int = 12, dim: int = 3):
    """Passages on a known geometry: the search is exact inner product; the step moves queries by hand."""
    rng = np.random.default_rng(0)
    passages = rng.normal(size=(n, dim)).astype(np.float32)
    passages /= np.linalg.norm(passages, axis=1, keepdims=True)

    def search(queries, owners, k):
        scores = queries @ passages.T
        rows = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(scores, rows, 1), rows

    return passages, search


def test_one_hop_is_direct_top_k_in_order():
    passages, search = line_index()
    q = passages[:2] + 0.1
    results = tree_search(q, passages, search, None, top_k=4, n_hops=1)
    _, direct = search(q / np.linalg.norm(q, axis=1, keepdims=True), None, 4)
    assert [r.hops[0] for r in results] == direct.tolist()


def test_pruning_keeps_exactly_the_k_best_new_candidates_across_branches():
    # hop 1 keeps rows 0, 1 and 5; each branch's next query points at its chunk and finds (score, row):
    passages = np.eye(8, dtype=np.float32)
    table = {
        0: [(0.9, 0), (0.8, 1), (0.1, 5)],
        10: [(0.95, 0), (0.9, 2), (0.4, 3)],
        11: [(0.99, 1), (0.6, 3), (0.5, 4)],
        15: [(0.3, 6), (0.2, 5), (0.1, 0)],
    }

    def search(queries, owners, k):
        keys = [0 if q[7] > 0.5 else 10 + int(np.argmax(q[:7])) for q in queries]
        rows = [table[key][:k] for key in keys]
        return np.array([[s for s, _ in r] for r in rows]), np.array([[i for _, i in r] for r in rows])

    step = lambda q, c: c  # noqa: E731
    q = np.zeros((1, 8), dtype=np.float32)
    q[0, 7] = 1
    [result] = tree_search(q, passages, search, step, top_k=3, n_hops=2)
    # 0, 1 and 5 are pruned as redundant; of 2 (.9), 3 (.6, .4), 4 (.5), 6 (.3) the best three survive
    assert result.hops == [[0, 1, 5], [2, 3, 4]]
    assert result.candidates == [3, 5] and result.kept == [3, 3]
    [no_redundancy] = tree_search(q, passages, search, step, 3, 2, redundancy_pruning=False)
    assert no_redundancy.hops[1] == [2] and no_redundancy.kept == [3, 3]  # 1 (.99), 0 (.95), 2 (.9)
    [neither] = tree_search(q, passages, search, step, 3, 2, redundancy_pruning=False, layerwise_topk=False)
    assert neither.candidates == [3, 9] and neither.rows() == [0, 1, 5, 2, 3, 4, 6]
    [quirk] = tree_search(q, passages, search, step, 3, 2, official_rank_quirk=True)
    assert quirk.hops[1] == [3]  # the argsort positions keep 3 (.4), 1 (redundant, -5) and 3 (.6)


def test_growth_is_bounded_by_k_times_hops_and_never_repeats_a_passage():
    passages, search = line_index(n=40, dim=6)
    rng = np.random.default_rng(1)
    step = lambda q, c: q - c + 0.3 * rng.normal(size=q.shape)  # noqa: E731
    q = rng.normal(size=(5, 6)).astype(np.float32)
    for result in tree_search(q, passages, search, step, top_k=3, n_hops=3):
        rows = result.rows()
        assert len(rows) == len(set(rows)) <= 9
    for result in tree_search(q, passages, search, step, 3, 2, redundancy_pruning=False, layerwise_topk=False):
        assert result.candidates == [3, 9]


def test_musique_decomposition_gives_a_chain_following_its_references():
    from hoprag.data.corpus import make_passage
    from hoprag.data.types import Hop, QAExample

    context = [make_passage(t, f"{t} text") for t in ("Aschenbrödel", "Johann Strauss II", "Austria", "Other")]
    ex = QAExample(
        "3hop1__1", "Who led the country of the composer of Aschenbrödel?", ["Karl Renner"], dataset="musique",
        type="3hop1", supporting_titles=["Aschenbrödel", "Johann Strauss II", "Austria"], context=context,
        decomposition=[Hop("Aschenbrödel >> composer", "Johann Strauss II", "Aschenbrödel"),
                       Hop("#1 >> country of citizenship", "Austria", "Johann Strauss II"),
                       Hop("Who was in charge of #2 ?", "Karl Renner", "Austria")],
    )  # fmt: skip
    tree = build_tree(ex)
    assert [(n.passage_id, n.parent, n.depth) for n in tree.nodes] == [
        (context[0].id, -1, 1), (context[1].id, 0, 2), (context[2].id, 1, 3),
    ]  # fmt: skip
    assert context[3].id in tree.nodes[0].negatives and context[1].id not in tree.nodes[0].negatives


def test_a_learnt_subtraction_starts_at_q_minus_c_and_trains():
    model = TreeHop(dim=8, gate_dim=16, correction_init=0.0, learn_subtraction=True)
    q, c = torch.randn(4, 8), torch.randn(4, 8)
    assert torch.equal(model(q, c), q - c) and model.config["learn_subtraction"] is True
    target = q - 0.5 * c  # a loss that wants half of c subtracted moves β towards 0.5
    opt = torch.optim.SGD([model.beta], lr=0.2)
    for _ in range(50):
        opt.zero_grad()
        ((model(q, c) - target) ** 2).mean().backward()
        opt.step()
    assert abs(float(model.beta) - 0.5) < 0.05


def test_a_model_whose_gate_can_never_open_builds_none():
    model = TreeHop(dim=8, gate_dim=16, correction_init=0.0, learn_subtraction=True)
    assert [name for name, _ in model.named_parameters()] == ["beta"] and model.n_parameters() == 1
    q, c = torch.randn(4, 8), torch.randn(4, 8)
    assert torch.equal(model.update(q, c)[1], torch.zeros_like(q))
    with pytest.raises(ValueError, match="no gate"):
        model.gate(q, c)
