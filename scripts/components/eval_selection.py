"""Context selection alone (no LLM): every selector under the same token budget, on several datasets.

    python scripts/components/eval_selection.py [--datasets hotpotqa 2wiki musique] [--budgets 300 500 1000 1500]
        [--chunks 60 30] [--out selection.json] [hydra overrides ...]
    e.g.  limit=50   method.token_counter.mode=words   method.front_end.mode=textbook

The paper's Table 3 setting as far as the bundled data allows: each question of each dataset (the bundled
HotpotQA, 2Wiki and MuSiQue dev samples by default; `hotpotqa_train`, `2wiki_train`, `musique_train` to
choose settings without looking at dev) is fused by `sc_rag_select`'s front-end (official mode, MiniLM
dense + TF-IDF) over each kind of pool:

- `context`: the question's own paragraphs (gold + distractors), ranked among themselves;
- `corpus`: the fused top 50 of the pooled corpus of all questions' paragraphs (what `eval.py` does);
- with `--chunks WORDS STRIDE`, `context/chunks` and `corpus/chunks`: the same after cutting every paragraph
  into WORDS-word windows every STRIDE words, so one article gives several near-duplicate passages (the
  redundancy of wiki-18-style corpora), scored by title.

Every selector then chooses from the same pool under the same token budget (SmolLM2 tokens of each passage
as `sc_rag_select`'s prompt writes it, by default): top-k filling the budget in fused order, top-5 within
it, MMR (the official raw-score variant and the textbook one: min-max relevance over the whole pool), MMKP
(exact Pareto DP, the official greedy, Table 5's ladder, and the values that do not reward quantity).
Columns: Recall@5 = per-question share of gold (supporting) titles among the first five chosen passages
in fused order, averaged over questions (the paper's number); `recall` = the same over everything chosen
(what the generator reads); passages and tokens chosen, and budget utilisation.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from hydra.utils import instantiate

from hoprag.metrics.retrieval import aggregate_passage_recall
from hoprag.scripts import compose_config, offline_defaults
from hoprag.selectors import MMKPSelector, MMRSelector, TopKSelector, chunk_passages

PAPER = {"top-5": 74.8, "MMR official (raw)": 85.1, "MMKP paper (pareto_dp)": 93.6}  # Table 3, HotpotQA
TEXTBOOK_DEPTH = 50  # MMR re-ranks the whole pool (pools hold ≤ 50)


def selectors(budget: int, counter, weights: dict) -> dict:
    """Every selector at token budget `budget`; the MMKP rows vary `weights` (the configured selector's)."""
    mmkp = {**weights, "token_budget": budget}
    no_red = 10**6  # C_red off

    def kp(**changes) -> MMKPSelector:
        return MMKPSelector(**{**mmkp, **changes}, token_counter=counter)

    return {
        "top-k": TopKSelector(k=None, token_budget=budget, token_counter=counter),
        "top-5": TopKSelector(k=5, token_budget=budget, token_counter=counter),
        "MMR official (raw)": MMRSelector(token_budget=budget, token_counter=counter),
        "MMR textbook (min-max)": MMRSelector(
            token_budget=budget, relevance="minmax", rerank_depth=TEXTBOOK_DEPTH, token_counter=counter
        ),
        "MMKP paper (pareto_dp)": kp(),
        "MMKP official greedy": kp(solver="official_greedy"),
        "MMKP group only": kp(beta=0.0, redundancy_budget=no_red),
        "MMKP + diversity": kp(redundancy_budget=no_red),
        "MMKP + redundancy cost": kp(beta=0.0),
        "MMKP <=2 per group": kp(max_per_group=2),
        "MMKP above_median": kp(value="above_median"),
        "MMKP per_token": kp(value="per_token"),
        "MMKP offset 0.5": kp(value="offset", value_offset=0.5),
        "MMKP offset 0.7": kp(value="offset", value_offset=0.7),
    }


def dataset_pools(cfg, chunks: tuple[int, int] | None) -> tuple[object, dict]:
    """The dataset and its pools by kind (dense indexes are cached on disk by corpus)."""
    dataset = instantiate(cfg.data)
    examples = dataset.examples
    questions = [ex.question for ex in examples]

    def build(corpus, contexts) -> tuple[object, list, list]:
        front_end = instantiate(cfg.method.front_end)(retriever=instantiate(cfg.retriever)(corpus=corpus))
        return front_end, front_end.pools_over(questions, contexts), front_end.pools(questions)

    front_end, context, corpus = build(dataset.corpus(), [ex.context for ex in examples])
    pools = {"context": context, "corpus": corpus}
    if chunks:
        words, stride = chunks
        chunked = [chunk_passages(ex.context, words, stride) for ex in examples]
        _, pools["context/chunks"], pools["corpus/chunks"] = build(chunk_passages(dataset.corpus(), words, stride),
                                                                  chunked)  # fmt: skip
    return dataset, {"front_end": front_end, "pools": pools}


def score(name: str, chosen: list, gold: list, budget: int) -> dict:
    titles = [[p.title for p in s.passages] for s in chosen]
    return {
        "selector": name,
        "recall@5": round(100 * aggregate_passage_recall(titles, gold, 5).macro, 1),
        "recall": round(100 * aggregate_passage_recall(titles, gold).macro, 1),
        "chosen": round(float(np.mean([len(s.indices) for s in chosen])), 2),
        "tokens": round(float(np.mean([s.tokens for s in chosen])), 1),
        "utilisation": round(float(np.mean([s.tokens / budget for s in chosen])), 3),
    }


def markdown(rows: list[dict], budgets: list[int]) -> str:
    """One table per dataset and pool: selectors × budgets, each cell Recall@5 / recall (passages, tokens)."""
    out = []
    for dataset, pool in dict.fromkeys((r["dataset"], r["pool"]) for r in rows):
        out += [f"\n{dataset}, {pool} pools: Recall@5 / recall (passages, tokens)\n",
                "| selector | " + " | ".join(str(b) for b in budgets) + " |", "|---" + "|---:" * len(budgets) + "|"]  # fmt: skip
        cells: dict[str, dict[int, str]] = {}
        for r in rows:
            if (r["dataset"], r["pool"]) == (dataset, pool):
                cell = f"{r['recall@5']} / {r['recall']} ({r['chosen']:.1f}, {r['tokens']:.0f})"
                cells.setdefault(r["selector"], {})[r["budget"]] = cell
        out += [f"| {name} | " + " | ".join(c.get(b, "") for b in budgets) + " |" for name, c in cells.items()]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["hotpotqa", "2wiki", "musique"])
    ap.add_argument("--budgets", type=int, nargs="+", default=[300, 500, 1000, 1500])
    ap.add_argument("--chunks", type=int, nargs=2, metavar=("WORDS", "STRIDE"), default=None)
    ap.add_argument("--out", type=Path, default=None)
    args, overrides = ap.parse_known_args()
    offline_defaults()
    results = []
    header = ("pool", "budget", "selector", "R@5", "recall", "chosen", "tokens", "util")
    for name in args.datasets:
        cfg = compose_config("eval", ["+method=sc_rag_select", "paths.output_dir=/tmp/eval_selection", f"data={name}",
                                      *overrides])  # fmt: skip
        dataset, built = dataset_pools(cfg, args.chunks)
        counter = instantiate(cfg.method.token_counter)(llm=instantiate(cfg.llm))
        base = instantiate(cfg.method.selector)(token_counter=counter)
        weights = {k: v for k, v in base.weights.items() if k != "token_budget"}
        weights.update(solver=base.solver, sim_threshold=base.sim_threshold)
        gold = [ex.supporting_titles for ex in dataset.examples]
        print(f"\n{dataset.name}: {len(gold)} questions, tokens by {base.token_counter.describe()}, "
              f"fusion {built['front_end'].mode}")  # fmt: skip
        print("{:<14} {:>6}  {:<27} {:>5} {:>6} {:>6} {:>6} {:>5}".format(*header))
        for pool_kind, question_pools in built["pools"].items():
            for budget in args.budgets:
                for label, selector in selectors(budget, base.token_counter, weights).items():
                    chosen = [selector.select(p.question, p) for p in question_pools]
                    row = {"dataset": dataset.name, "pool": pool_kind, "budget": budget,
                           **score(label, chosen, gold, budget)}  # fmt: skip
                    if budget == 1500 and dataset.name == "hotpotqa":
                        row["paper_hotpotqa"] = PAPER.get(label)
                    results.append(row)
                    print(f"{pool_kind:<14} {budget:>6}  {label:<27} {row['recall@5']:>5} {row['recall']:>6} "
                          f"{row['chosen']:>6} {row['tokens']:>6} {row['utilisation']:>5}", flush=True)  # fmt: skip
    print(markdown(results, args.budgets))
    if args.out:
        args.out.write_text(json.dumps({"datasets": args.datasets, "rows": results}, indent=2))


if __name__ == "__main__":
    main()
