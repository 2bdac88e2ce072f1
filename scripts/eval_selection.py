"""Context selection alone (no LLM): gold-passage Recall@5 of top-5, MMR and MMKP at the same token budget.

    .venv/bin/python scripts/eval_selection.py [--budgets 1500 500] [--out selection.json] [hydra overrides ...]
    e.g.  data=2wiki   method.selector.token_counter.mode=words   method.front_end.mode=textbook

The paper's Table 3 setting as far as the bundled data allows: each question of the dataset (default the
bundled HotpotQA dev sample, distractor setting) is fused by `sc_rag_select`'s front-end (official mode,
MiniLM dense + TF-IDF) over two kinds of pool:

- `context`: the question's own 10 paragraphs (2 gold + 8 distractors), ranked among themselves;
- `corpus`: the fused top 50 of the pooled corpus of all questions' paragraphs (what `eval.py` does).

Every selector then chooses from the same pool under the same token budget (SmolLM2 tokens of each passage
as `sc_rag_select`'s prompt writes it, by default):
top-5 (the first five that fit); MMR (λ = 0.6 on the raw fusion score as the official code, Recall@5 over
the chosen set in fused order, then in MMR's own order, then on min-max normalised relevance); MMKP with
the exact Pareto DP (then the official greedy, and Table 5's ablations). Recall@5 is the per-question
share of gold (supporting) titles among the first five chosen passages, averaged over questions, as in
the paper; `recall` is over everything chosen.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.utils import instantiate  # noqa: E402

from hoprag.config import register_resolvers  # noqa: E402
from hoprag.metrics.retrieval import aggregate_passage_recall  # noqa: E402
from hoprag.paths import PROJECT_ROOT  # noqa: E402
from hoprag.selectors import MMKPSelector, MMRSelector, TopKSelector  # noqa: E402

PAPER = {"top-5": 74.8, "MMR": 85.1, "MMKP (pareto_dp)": 93.6}  # Table 3, HotpotQA


def selectors(budget: int, counter, weights: dict) -> dict:
    mmkp = {**weights, "token_budget": budget}
    return {
        "top-5": TopKSelector(k=5, token_budget=budget, token_counter=counter),
        "MMR": MMRSelector(token_budget=budget, token_counter=counter),
        "MMR (MMR order)": MMRSelector(token_budget=budget, order="selection", token_counter=counter),
        "MMR (min-max rel)": MMRSelector(token_budget=budget, relevance="minmax", token_counter=counter),
        "MMKP (pareto_dp)": MMKPSelector(token_counter=counter, **mmkp),
        "MMKP (official_greedy)": MMKPSelector(**{**mmkp, "solver": "official_greedy"}, token_counter=counter),
        "MMKP only hard constraint": MMKPSelector(**{**mmkp, "beta": 0.0, "redundancy_budget": 10**6},
                                                  token_counter=counter),  # fmt: skip
        "MMKP <=2 per group": MMKPSelector(**{**mmkp, "max_per_group": 2}, token_counter=counter),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budgets", type=int, nargs="+", default=[1500, 500])
    ap.add_argument("--out", type=Path, default=None)
    args, overrides = ap.parse_known_args()
    register_resolvers()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose("eval", ["+method=sc_rag_select", "paths.output_dir=/tmp/eval_selection", *overrides])
    dataset = instantiate(cfg.data)
    examples = dataset.examples
    front_end = instantiate(cfg.method.front_end)(retriever=instantiate(cfg.retriever)(corpus=dataset.corpus()))
    base = instantiate(cfg.method.selector)
    base.bind(instantiate(cfg.llm))
    weights = {k: v for k, v in base.weights.items() if k != "token_budget"}
    weights.update(solver=base.solver, sim_threshold=base.sim_threshold)
    questions = [ex.question for ex in examples]
    pools = {
        "context": front_end.pools_over(questions, [ex.context for ex in examples]),
        "corpus": front_end.pools(questions),
    }
    gold = [ex.supporting_titles for ex in examples]
    results = []
    print(f"{dataset.name}: {len(examples)} questions, tokens by {base.token_counter.describe()}, "
          f"fusion {front_end.mode}")  # fmt: skip
    header = ("pool", "budget", "selector", "R@5", "recall", "chosen", "tokens", "util")
    print("{:<8} {:>6}  {:<27} {:>5} {:>6} {:>6} {:>6} {:>5}".format(*header))
    for pool_kind, question_pools in pools.items():
        for budget in args.budgets:
            for name, selector in selectors(budget, base.token_counter, weights).items():
                chosen = [selector.select(p.question, p) for p in question_pools]
                titles = [[p.title for p in s.passages] for s in chosen]
                row = {
                    "pool": pool_kind,
                    "budget": budget,
                    "selector": name,
                    "recall@5": round(100 * aggregate_passage_recall(titles, gold, 5).macro, 1),
                    "recall": round(100 * aggregate_passage_recall(titles, gold).macro, 1),
                    "chosen": round(float(np.mean([len(s.indices) for s in chosen])), 2),
                    "tokens": round(float(np.mean([s.tokens for s in chosen])), 1),
                    "utilisation": round(float(np.mean([s.tokens / budget for s in chosen])), 3),
                    "paper_hotpotqa": PAPER.get(name) if budget == 1500 else None,
                }
                results.append(row)
                print(f"{pool_kind:<8} {budget:>6}  {name:<27} {row['recall@5']:>5} {row['recall']:>6} "
                      f"{row['chosen']:>6} {row['tokens']:>6} {row['utilisation']:>5}")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps({"dataset": dataset.name, "n": len(examples), "rows": results}, indent=2))


if __name__ == "__main__":
    main()
