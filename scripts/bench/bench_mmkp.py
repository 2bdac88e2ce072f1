"""MMKP solver benchmark on real 50-candidate pools: exact Pareto DP vs dense-table DP vs the official greedy.

    python scripts/bench/bench_mmkp.py [--repeats 3] [--out bench_mmkp.json] [hydra overrides ...]
    e.g.  data=2wiki   limit=100   method.token_counter.mode=words   method.selector.token_budget=500

What is measured, in one run: the questions of the dataset (default the bundled HotpotQA dev sample) are
retrieved and fused into pools of 50 by `sc_rag_select`'s front-end (official mode: MiniLM dense over the
pooled corpus + TF-IDF), and each pool becomes an MMKP instance exactly as the method builds it (leader
groups at τ = 0.82, values 0.7·rel + 0.3·diversity, token costs from SmolLM2's tokenizer, redundancy
100·s̄, budgets 1500 / 120). Each solver then solves every instance `--repeats` times; a query's time is
the median of its repeats, and the benchmark reports the median (and p90, max) over queries, in ms.
Building the pools and the instances is not timed. Also reported: the greedy's value as a share of the
exact optimum (mean, min, share of queries where it is optimal), the Pareto frontier's size, the groups,
and a check that the two exact solvers agree on every query.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from hydra.utils import instantiate

from hoprag.scripts import compose_config, offline_defaults
from hoprag.selectors import build_instance, dense_dp, official_greedy, pareto_dp

SOLVERS = {"pareto_dp": pareto_dp, "dense_dp": dense_dp, "official_greedy": official_greedy}


def instances(overrides: list[str]) -> tuple[list, dict]:
    """The MMKP instance of every question's fused pool, built as `+method=sc_rag_select` builds it."""
    cfg = compose_config("eval", ["+method=sc_rag_select", "paths.output_dir=/tmp/bench_mmkp", *overrides])
    dataset = instantiate(cfg.data)
    retriever = instantiate(cfg.retriever)(corpus=dataset.corpus())
    front_end = instantiate(cfg.method.front_end)(retriever=retriever)
    counter = instantiate(cfg.method.token_counter)(llm=instantiate(cfg.llm))
    selector = instantiate(cfg.method.selector)(token_counter=counter)
    pools = front_end.pools([ex.question for ex in dataset.examples])
    built = []
    for pool in pools:
        tokens = selector.token_counter(pool.passages)
        built.append(build_instance(pool.fusion, pool.vectors, tokens, threshold=selector.sim_threshold,
                                    **selector.weights))  # fmt: skip
    setup = {
        "dataset": dataset.name,
        "questions": len(dataset),
        "corpus": len(dataset.corpus()),
        "pool_size_median": float(np.median([len(p) for p in pools])),
        "token_counter": selector.token_counter.describe(),
        **{k: v for k, v in selector.weights.items()},
        "sim_threshold": selector.sim_threshold,
    }
    return built, setup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args, overrides = ap.parse_known_args()
    offline_defaults()
    built, setup = instances(overrides)
    times = {name: [] for name in SOLVERS}
    solutions = {name: [] for name in SOLVERS}
    for instance in built:
        for name, solve in SOLVERS.items():
            runs = []
            for _ in range(args.repeats):
                started = time.perf_counter()
                solution = solve(instance)
                runs.append(time.perf_counter() - started)
            times[name].append(1000 * float(np.median(runs)))
            solutions[name].append(solution)
    exact = np.array([s.value for s in solutions["pareto_dp"]])
    agree = all(abs(a.value - b.value) < 1e-9 for a, b in zip(solutions["pareto_dp"], solutions["dense_dp"]))
    ratio = np.array([s.value for s in solutions["official_greedy"]]) / np.maximum(exact, 1e-12)
    report = {
        "setup": setup,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "repeats": args.repeats},
        "ms_per_query": {
            name: {"median": round(float(np.median(t)), 3), "p90": round(float(np.percentile(t, 90)), 3),
                   "max": round(float(np.max(t)), 3)}
            for name, t in times.items()
        },  # fmt: skip
        "exact_solvers_agree": agree,
        "greedy_over_exact": {
            "mean": round(float(ratio.mean()), 4),
            "min": round(float(ratio.min()), 4),
            "optimal_share": round(float(np.mean(ratio > 1 - 1e-9)), 4),
        },
        "pareto_frontier": {"median": float(np.median([s.states for s in solutions["pareto_dp"]])),
                            "max": int(max(s.states for s in solutions["pareto_dp"]))},  # fmt: skip
        "groups": {"median": float(np.median([len(i.groups) for i in built])),
                   "multi_member_share": round(float(np.mean([any(len(g) > 1 for g in i.groups) for i in built])), 4)},
        "tokens_used_median": {name: float(np.median([s.tokens for s in solutions[name]])) for name in SOLVERS},
    }  # fmt: skip
    for key, value in report.items():
        print(f"{key}: {json.dumps(value)}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
