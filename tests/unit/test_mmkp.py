"""MMKP solvers (spec §13): exactness against brute force on thousands of random instances, feasibility,
backtracking, dominance pruning, degenerate cases, the official greedy and the FPTAS."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hoprag.selectors import (
    MMKPInstance,
    brute_force,
    dense_dp,
    fptas_knapsack,
    official_greedy,
    pareto_dp,
    pareto_front,
)

EXACT = (pareto_dp, dense_dp, brute_force)
values = st.one_of(st.floats(0, 1, allow_nan=False, width=32), st.integers(0, 5).map(lambda x: x / 5))  # with ties


@st.composite
def instances(draw, max_groups: int = 6, max_items: int = 4, max_per_group: int = 1):
    sizes = draw(st.lists(st.integers(1, max_items), max_size=max_groups))
    n = sum(sizes)
    order = draw(st.permutations(range(n)))
    groups, at = [], 0
    for size in sizes:
        groups.append(tuple(order[at : at + size]))
        at += size
    return MMKPInstance(
        values=draw(st.lists(values, min_size=n, max_size=n)),
        tokens=draw(st.lists(st.integers(0, 40), min_size=n, max_size=n)),
        redundancy=draw(st.lists(st.integers(0, 20), min_size=n, max_size=n)),
        groups=tuple(groups),
        token_budget=draw(st.integers(0, 100)),
        redundancy_budget=draw(st.integers(0, 40)),
        max_per_group=draw(st.integers(1, max_per_group)),
    )


def assert_feasible(instance: MMKPInstance, items) -> None:
    assert len(set(items)) == len(items)
    assert instance.tokens[list(items)].sum() <= instance.token_budget
    assert instance.redundancy[list(items)].sum() <= instance.redundancy_budget
    for group in instance.groups:
        assert len(set(group) & set(items)) <= instance.max_per_group


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(instances())
def test_pareto_dp_equals_dense_dp_equals_brute_force(instance):
    best = brute_force(instance).value
    for solve in EXACT:
        solution = solve(instance)
        assert solution.value == pytest.approx(best, abs=1e-9), solve.__name__
        assert_feasible(instance, solution.items)
        # the backtracked items reproduce the reported value and costs
        again = instance.solution(solution.items)
        assert again.value == pytest.approx(solution.value, abs=1e-9)
        assert (again.tokens, again.redundancy) == (solution.tokens, solution.redundancy)


@settings(max_examples=500, deadline=None)
@given(instances(max_groups=4, max_items=3, max_per_group=2))
def test_soft_group_constraint_is_solved_exactly_too(instance):
    best = brute_force(instance).value
    for solve in (pareto_dp, dense_dp):
        solution = solve(instance)
        assert solution.value == pytest.approx(best, abs=1e-9)
        assert_feasible(instance, solution.items)


@settings(max_examples=300, deadline=None)
@given(instances(), st.integers(0, 60))
def test_raising_the_token_budget_never_lowers_the_optimum(instance, extra):
    richer = MMKPInstance(
        instance.values, instance.tokens, instance.redundancy, instance.groups,
        instance.token_budget + extra, instance.redundancy_budget, instance.max_per_group,
    )  # fmt: skip
    assert pareto_dp(richer).value >= pareto_dp(instance).value - 1e-12


@settings(max_examples=300, deadline=None)
@given(instances())
def test_greedy_is_feasible_and_never_beats_the_optimum(instance):
    greedy = official_greedy(instance)
    assert_feasible(instance, greedy.items)
    assert greedy.value <= pareto_dp(instance).value + 1e-9


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 12), st.integers(0, 6), st.integers(0, 8).map(float)), min_size=1, max_size=40)
)
def test_pareto_front_keeps_exactly_the_non_dominated_states(states):
    tokens, redundancy, value = (np.array(x) for x in zip(*states))
    kept = pareto_front(tokens, redundancy, value)
    assert len(set(kept.tolist())) == len(kept)

    def dominates(a, b):  # a dominates b (Eq. 6), a different state
        return (tokens[a] <= tokens[b] and redundancy[a] <= redundancy[b] and value[a] >= value[b]) and (
            (tokens[a], redundancy[a], value[a]) != (tokens[b], redundancy[b], value[b])
        )

    for a, b in itertools.permutations(kept.tolist(), 2):
        assert not dominates(a, b)
    key = {(tokens[i], redundancy[i], value[i]) for i in kept.tolist()}
    for i in range(len(states)):  # every dropped state is dominated by (or equal to) a kept one
        if i not in kept:
            assert any(dominates(j, i) or (tokens[j], redundancy[j], value[j]) == (tokens[i], redundancy[i], value[i])
                       for j in kept.tolist())
    costs = [(tokens[i], redundancy[i]) for i in kept.tolist()]
    assert len(costs) == len(set(costs))  # a duplicate cost key keeps one state ...
    for i in range(len(states)):  # ... the one with the largest value
        same = [value[j] for j in range(len(states)) if (tokens[j], redundancy[j]) == (tokens[i], redundancy[i])]
        if (tokens[i], redundancy[i], max(same)) not in key:
            assert any(tokens[j] <= tokens[i] and redundancy[j] <= redundancy[i] and value[j] >= max(same)
                       for j in kept.tolist())


def singletons(values, tokens, budget, red_budget=10**6):
    n = len(values)
    return MMKPInstance(values, tokens, [0] * n, tuple((i,) for i in range(n)), budget, red_budget)


def test_singleton_groups_without_redundancy_budget_are_a_knapsack():
    inst = singletons([6.0, 10.0, 12.0], [1, 2, 3], budget=5)  # the textbook example: take items 1 and 2
    assert pareto_dp(inst).items == (1, 2) and pareto_dp(inst).value == 22.0


def test_equal_token_costs_take_the_top_value_items():
    rng = np.random.default_rng(3)
    vals = rng.random(12)
    inst = singletons(vals, [10] * 12, budget=40)
    assert set(pareto_dp(inst).items) == set(np.argsort(-vals)[:4].tolist())


@pytest.mark.parametrize("solve", [pareto_dp, dense_dp, brute_force, official_greedy])
def test_everything_over_budget_or_nothing_to_choose_gives_an_empty_result(solve):
    over = singletons([1.0, 2.0], [50, 60], budget=40)
    empty = MMKPInstance([], [], [], (), 1500, 120)
    for inst in (over, empty):
        solution = solve(inst)
        assert solution.items == () and solution.value == 0.0 and solution.tokens == 0


def test_one_item_per_group_and_the_redundancy_budget_bind():
    # group 0 holds two near-duplicates; items 2 and 3 are singletons with redundancy costs
    inst = MMKPInstance([0.9, 0.8, 0.5, 0.4], [10, 10, 10, 10], [0, 0, 70, 60], ((0, 1), (2,), (3,)), 100, 100)
    assert pareto_dp(inst).items == (0, 2)  # never 0 and 1 together; 2 and 3 together cost 130 > 100


def test_the_official_greedy_walks_groups_in_order_and_the_dp_does_strictly_better():
    # group 0's best item is long and eats the budget the two later groups would use better
    inst = MMKPInstance([1.0, 0.2, 0.9, 0.9], [90, 10, 50, 40], [0, 0, 0, 0], ((0, 1), (2,), (3,)), 100, 120)
    greedy = official_greedy(inst)
    assert greedy.items == (0,) and greedy.value == 1.0  # best-value fitting item of group 0, then nothing fits
    best = pareto_dp(inst)
    assert best.items == (1, 2, 3) and best.value == pytest.approx(2.0) and best.value > greedy.value
    assert dense_dp(inst).value == pytest.approx(best.value)


def test_pareto_dp_reports_its_largest_frontier():
    inst = singletons([1.0, 2.0, 4.0], [1, 2, 4], budget=7)
    assert pareto_dp(inst).states == 8  # every subset sum 0..7 is reachable and on the frontier


def test_instance_validation():
    with pytest.raises(ValueError, match="partition"):
        MMKPInstance([1.0, 1.0], [1, 1], [0, 0], ((0,),), 10, 10)
    with pytest.raises(ValueError, match="non-negative"):
        MMKPInstance([1.0], [-1], [0], ((0,),), 10, 10)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0.01, 1, allow_nan=False), st.integers(0, 30)), min_size=1, max_size=10),
    st.integers(0, 80),
    st.sampled_from([0.05, 0.1, 0.3, 0.5]),
)
def test_fptas_is_within_one_minus_eps_of_the_optimum(items, capacity, eps):
    vals, weights = zip(*items)
    chosen, value = fptas_knapsack(vals, weights, capacity, eps)
    assert sum(weights[i] for i in chosen) <= capacity
    assert value == pytest.approx(sum(vals[i] for i in chosen))
    optimum = brute_force(singletons(vals, weights, capacity)).value
    assert value >= (1 - eps) * optimum - 1e-9


def test_fptas_drops_items_heavier_than_the_capacity():
    assert fptas_knapsack([100.0, 1.0], [50, 5], 10, eps=0.1) == ([1], 1.0)
    assert fptas_knapsack([1.0], [50], 10) == ([], 0.0)
    with pytest.raises(ValueError):
        fptas_knapsack([1.0], [1], 10, eps=0)
