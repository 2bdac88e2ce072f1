"""scripts/components/eval_selection.py's table (issue 19): every selector at the same token budget, and the
markdown pivot the README quotes."""

from __future__ import annotations

import numpy as np

from hoprag.data.types import Passage
from hoprag.selectors import CandidatePool, TokenCounter
from tests.scripts import load_script

eval_selection = load_script("components/eval_selection.py")


def test_every_selector_runs_at_the_same_budget_and_stays_within_it():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(12, 8))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    passages = [Passage(f"p{i}", f"T{i % 6}", "w " * (5 + 3 * i)) for i in range(12)]
    pool = CandidatePool("q", passages, np.linspace(1, 0, 12), np.zeros(12), vectors)
    counter = TokenCounter("words")
    weights = {"solver": "pareto_dp", "redundancy_budget": 120, "alpha": 0.7, "beta": 0.3}
    chosen = {name: s.select("q", pool) for name, s in eval_selection.selectors(60, counter, weights).items()}
    assert {"top-k", "MMR textbook (min-max)", "MMKP group only", "MMKP above_median"} <= set(chosen)
    assert all(s.token_budget == 60 and s.tokens <= 60 for s in chosen.values())
    assert chosen["top-k"].indices == [0, 1, 2, 3]  # 6 + 10 + 14 + 18 tokens; the fifth (22) would make 70
    row = eval_selection.score("top-k", [chosen["top-k"]], [["T0", "T5"]], 60)
    assert (row["recall@5"], row["recall"], row["chosen"], row["tokens"]) == (50.0, 50.0, 4.0, 48.0)


def test_markdown_pivots_selectors_by_budget_per_dataset_and_pool():
    rows = [
        {"dataset": "d", "pool": "corpus", "budget": b, "selector": "top-k", "recall@5": 50.0, "recall": 60.0,
         "chosen": 4.0, "tokens": 400.0}
        for b in (300, 500)
    ]  # fmt: skip
    table = eval_selection.markdown(rows, [300, 500])
    assert "d, corpus pools" in table
    assert "| top-k | 50.0 / 60.0 (4.0, 400) | 50.0 / 60.0 (4.0, 400) |" in table
