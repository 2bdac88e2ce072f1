"""Context selection (Self-Correcting RAG phase I, spec/self_correcting_rag.md §3–4): which retrieved
passages a generator reads.

Public API, in pipeline order:

    front_end = HybridFrontEnd(retriever, mode="official")      # dense (+ its TF-IDF / BM25 side)
    pools = front_end.pools(questions, costs)                  # one CandidatePool of ≤ 50 per question
    counter = TokenCounter("tokenizer", llm=llm, passages=PassageFormat())  # the generator's tokens, as prompted
    selector = MMKPSelector(solver="pareto_dp", token_counter=counter)
    selection = selector.select(question, pool)                # -> Selection
    selection.passages     # chosen passages in fused order (what the generator reads, Recall@5 is over)
    selection.tokens, selection.utilisation, selection.value, selection.summary()  # per-question stats

- `CandidatePool`: passages in fused-rank order with `fusion` scores, `dense` scores and L2-normalised
  `vectors`. `HybridFrontEnd.pools` retrieves and fuses from the corpus (`official`: 0-based RRF over the
  dense top 200 plus 0.3 × cosine to the dense top-5 centroid, TF-IDF as the sparse side; `textbook`:
  1-based RRF over the union with TF-IDF or BM25); `pools_over` fuses passages a caller already holds.
- `Selector.select(question, pool) -> Selection`: `MMKPSelector` (groups by leader clustering at τ,
  values α·rel + β·diversity, costs (tokens, λ_red·s̄), budgets (1500, 120); solver `pareto_dp` (default,
  exact, backtracked), `dense_dp` (reference), `official_greedy` (the released code), `brute_force`
  (tests)), `TopKSelector` (first k fused) and `MMRSelector` (λ = 0.6, filling the token budget).
- `Selection`: pool `indices` (ascending = fused order), `passages`, `tokens`, `token_budget`,
  `utilisation`, `value`, `redundancy`, `stats`; `summary()` is what methods put in `MethodOutput.stats`.
- Lower level: `MMKPInstance` + `pareto_dp` / `dense_dp` / `brute_force` / `official_greedy` → `Solution`;
  `build_instance`, `item_values`, `leader_clusters`, `minmax`; `fptas_knapsack` (single-budget FPTAS); `TokenCounter`.
- `chunk_passages`: passages cut into (overlapping) word windows, for pools with near-duplicate chunks.

A method chains a selector before any generator: `pools` → `select` → prompt with `selection.passages`
(see `hoprag.methods.sc_rag_select`).
"""

from hoprag.selectors.chunks import chunk_passages
from hoprag.selectors.frontend import HybridFrontEnd, official_fusion
from hoprag.selectors.items import build_instance, item_values, leader_clusters, mean_group_similarity, minmax
from hoprag.selectors.pool import CandidatePool, Selection
from hoprag.selectors.selector import MMKPSelector, MMRSelector, Selector, TopKSelector
from hoprag.selectors.solvers import (
    SOLVERS,
    MMKPInstance,
    Solution,
    brute_force,
    dense_dp,
    fptas_knapsack,
    official_greedy,
    pareto_dp,
    pareto_front,
)
from hoprag.selectors.tfidf import TfidfRetriever
from hoprag.selectors.tokens import TokenCounter, words_x13

__all__ = [
    "SOLVERS",
    "CandidatePool",
    "HybridFrontEnd",
    "MMKPInstance",
    "MMKPSelector",
    "MMRSelector",
    "Selection",
    "Selector",
    "Solution",
    "TfidfRetriever",
    "TokenCounter",
    "TopKSelector",
    "brute_force",
    "build_instance",
    "chunk_passages",
    "dense_dp",
    "fptas_knapsack",
    "item_values",
    "leader_clusters",
    "mean_group_similarity",
    "minmax",
    "official_fusion",
    "official_greedy",
    "pareto_dp",
    "pareto_front",
    "words_x13",
]
