"""Grouping, values and costs, the fused front-end, token costs, the three selectors and the methods
built on them (spec §13), on hand-made pools and a hashed bag-of-words dense index."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
from hydra.utils import instantiate
from hypothesis import given, settings
from hypothesis import strategies as st

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.llm.prompts import PassageFormat
from hoprag.llm.scripted import render
from hoprag.methods import MMRRAG, ChatPrompt, SCRAGSelect, TopKRAG
from hoprag.retrieval import BM25Retriever, DenseRetriever, FusionRetriever
from hoprag.selectors import (
    CandidatePool,
    HybridFrontEnd,
    MMKPSelector,
    MMRSelector,
    TokenCounter,
    TopKSelector,
    build_instance,
    item_values,
    leader_clusters,
    mean_group_similarity,
    minmax,
    official_fusion,
    pareto_dp,
    words_x13,
)
from hoprag.selectors.items import centroid_diversity
from tests.fakes import HashEmbedder


def unit(rows) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float64)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


# --- groups, values, costs -------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 12), st.integers(0, 4), st.floats(-1, 1), st.integers(0, 10**6))
def test_leader_clustering_is_deterministic_and_seeded(n, duplicates, tau, seed):
    rng = np.random.default_rng(seed)
    vectors = unit(rng.normal(size=(n, 8))) if n else np.zeros((0, 8))
    if n:
        vectors = np.vstack([vectors, vectors[rng.integers(0, n, duplicates)]])  # exact duplicates
    groups = leader_clusters(vectors, tau)
    assert groups == leader_clusters(vectors, tau)
    assert sorted(i for g in groups for i in g) == list(range(len(vectors)))
    assert [g[0] for g in groups] == sorted(g[0] for g in groups)  # group order = seed rank
    for group in groups:
        seed_vector = vectors[group[0]]
        assert all(vectors[m] @ seed_vector >= tau - 1e-6 for m in group[1:])
        assert group == sorted(group)
    group_of = {i: k for k, g in enumerate(groups) for i in g}
    for i, j in zip(*np.nonzero(np.isclose(vectors @ vectors.T, 1.0))):
        assert group_of[int(i)] == group_of[int(j)]  # exact duplicates always share a group (τ ≤ 1)


def test_threshold_extremes():
    vectors = unit(np.random.default_rng(0).normal(size=(6, 4)))
    assert leader_clusters(vectors, 1.01) == [[i] for i in range(6)]
    assert leader_clusters(vectors, -1.0) == [list(range(6))]
    assert leader_clusters(np.zeros((0, 4)), 0.82) == []


def test_singletons_have_no_redundancy_cost_and_full_diversity():
    vectors = unit([[1, 0, 0], [0, 1, 0], [0, 0, 1]])
    groups = leader_clusters(vectors, 0.82)
    assert mean_group_similarity(vectors, groups).tolist() == [0, 0, 0]
    assert centroid_diversity(vectors, groups).tolist() == [1, 1, 1]
    for diversity in ("mean_pairwise", "centroid"):
        inst = build_instance(np.array([3.0, 2.0, 1.0]), vectors, [10, 10, 10], diversity=diversity)
        assert inst.redundancy.tolist() == [0, 0, 0]
        assert inst.values.tolist() == pytest.approx([0.7 + 0.3, 0.35 + 0.3, 0.0 + 0.3])


def test_minmax_maps_into_the_unit_interval_and_a_constant_pool_to_a_half():
    assert minmax(np.array([2.0, 4.0, 3.0])).tolist() == [0.0, 1.0, 0.5]
    assert minmax(np.array([0.3, 0.3 + 1e-12])).tolist() == [0.5, 0.5]
    assert minmax(np.array([])).size == 0


def test_values_and_costs_of_a_near_duplicate_group_by_hand():
    a = np.array([1.0, 0.0, 0.0])
    b = unit([[1.0, 0.2, 0.0]])[0]  # cos(a, b) ≈ 0.981
    c = np.array([0.0, 1.0, 0.0])
    vectors = np.vstack([a, c, b])  # fused order: a, c, b
    inst = build_instance(np.array([1.0, 0.5, 0.0]), vectors, [5, 6, 7])
    assert inst.groups == ((0, 2), (1,))
    s = float(a @ b)
    assert inst.redundancy.tolist() == [round(100 * s), 0, round(100 * s)]
    assert inst.values.tolist() == pytest.approx([0.7 + 0.3 * (1 - s), 0.35 + 0.3, 0.0 + 0.3 * (1 - s)])
    assert inst.tokens.tolist() == [5, 6, 7]
    with pytest.raises(ValueError, match="diversity"):
        build_instance(np.ones(3), vectors, [1, 1, 1], diversity="nope")


# --- fusion ----------------------------------------------------------------------------------------


def test_official_fusion_scores_ranks_and_the_centroid_by_hand():
    vectors = unit(np.random.default_rng(1).normal(size=(8, 5)))
    dense_rank = np.arange(8.0)
    sparse_rank = np.array([0.0, 10_000, 1, 2, 10_000, 3, 4, 5])  # passage 1 missing from the sparse top
    fused = official_fusion(dense_rank, sparse_rank, vectors, np.arange(8))
    centroid = vectors[:5].mean(axis=0)
    centroid /= np.linalg.norm(centroid)
    assert fused[0] == pytest.approx(2 / 60 + 0.3 * vectors[0] @ centroid)  # first in both lists
    assert fused[1] == pytest.approx(1 / 61 + 1 / 10_060 + 0.3 * vectors[1] @ centroid)


WORDS = [f"w{i}" for i in range(300)]


def make_corpus(n: int = 80) -> list[Passage]:
    rng = np.random.default_rng(0)
    corpus = [Passage(f"p{i}", f"T{i}", " ".join(rng.choice(WORDS, size=15, replace=False))) for i in range(n)]
    corpus.append(Passage("dup", "T0", corpus[0].text))  # a near-duplicate of p0
    return corpus


@pytest.fixture(scope="module")
def dense() -> DenseRetriever:
    return DenseRetriever(make_corpus(), HashEmbedder(), index={"use_gpu": False})


QUESTIONS = [" ".join(WORDS[i : i + 6]) for i in (0, 40, 100)]


@pytest.mark.parametrize("mode", ["official", "textbook"])
@pytest.mark.parametrize("sparse", ["tfidf", "bm25"])
def test_pools_are_fused_sorted_and_cut(dense, mode, sparse):
    front = HybridFrontEnd(dense, mode=mode, sparse=sparse, pool_size=20, dense_depth=30, sparse_depth=30)
    costs = [Cost() for _ in QUESTIONS]
    pools = front.pools(QUESTIONS, costs)
    for pool, question in zip(pools, QUESTIONS):
        assert pool.question == question and len(pool) == 20
        assert np.all(np.diff(pool.fusion) <= 1e-12)  # descending fusion score
        vectors = HashEmbedder().encode_passages(pool.passages)
        assert np.allclose(pool.vectors, vectors, atol=1e-5)  # reconstructed from the index
        q = HashEmbedder().encode_queries([question])[0]
        assert np.allclose(pool.dense, vectors @ q, atol=1e-5)
    assert all(c.retrieval_calls == 2 and c.seconds["retrieval"] > 0 for c in costs)
    if mode == "official":  # only dense candidates: sparse-only passages never enter
        top = {h.passage.id for h in dense.search([QUESTIONS[0]], 30)[0]}
        assert {p.id for p in pools[0].passages} <= top


def test_the_pool_is_never_larger_than_the_dense_list(dense):
    front = HybridFrontEnd(dense, pool_size=50, dense_depth=7)
    assert [len(p) for p in front.pools(QUESTIONS)] == [7, 7, 7]


def test_pools_over_given_passages_rank_only_those(dense):
    front = HybridFrontEnd(dense, pool_size=50)
    given = dense.passages[:10] + [Passage("new", "New", "w0 w1 w2 w3")]  # one outside the corpus
    (pool,) = front.pools_over([QUESTIONS[0]], [given])
    assert sorted(p.id for p in pool.passages) == sorted(p.id for p in given)
    assert np.all(np.diff(pool.fusion) <= 1e-12)
    assert pool.passages[int(np.argmax(pool.dense))].id == "new"
    (pool,) = HybridFrontEnd(dense, mode="textbook").pools_over([QUESTIONS[0]], [given])
    assert pool.passages[0].id == "new"  # first in both rankings, so first by RRF


def test_a_fusion_retriever_lends_its_dense_and_bm25_sides(dense):
    rrf = FusionRetriever(dense.passages, dense, BM25Retriever(dense.passages))
    front = HybridFrontEnd(rrf, sparse="bm25")
    assert front.dense is dense and front.sparse is rrf.sparse


def test_a_non_dense_retriever_needs_an_embedder(dense):
    bm25 = BM25Retriever(dense.passages)
    with pytest.raises(ValueError, match="embedder"):
        HybridFrontEnd(bm25)
    pools = HybridFrontEnd(bm25, embedder=HashEmbedder(), pool_size=10).pools(QUESTIONS[:1])
    assert len(pools[0]) == 10


# --- token costs ---------------------------------------------------------------------------------


class CharTokenizer:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": list(range(len(text)))}


def test_token_counters():
    p = Passage("x", "Title", "one two three four five six seven eight nine ten")
    assert words_x13(p.text) == 13 and words_x13("") == 1
    assert TokenCounter("words")([p]).tolist() == [13]
    assert TokenCounter("tokenizer", tokenizer=CharTokenizer())([p]).tolist() == [len("[1] Title\n" + p.text + "\n\n")]
    with pytest.raises(ValueError):
        TokenCounter("bytes")


def test_token_costs_are_counted_by_the_llm_on_the_passage_as_prompted():
    """Costs are the generator's tokens of the passage exactly as the prompt writes it (template, rank,
    separator); no silent 1.3 x words fallback; the mode is described for the run record."""
    p = Passage("x", "Title", "one two three four five six seven eight nine ten")
    with pytest.raises(RuntimeError, match="needs a tokenizer or an llm"):
        TokenCounter("tokenizer")([p])
    snippets = PassageFormat("[doc_id={rank}] title={title}\n{text}", "\n---\n")
    counter = TokenCounter("tokenizer", llm=ScriptedLLM(), passages=snippets)
    # ScriptedLLM counts whitespace words: "[doc_id=1]", "title=Title", 10 words, "---"
    assert counter([p]).tolist() == [13]
    assert counter.describe().startswith("words (scripted) on '[doc_id={rank}]")
    assert TokenCounter("words").describe() == "words x 1.3 (official)"


def test_a_backend_that_cannot_count_tokens_fails_with_the_fix_named():
    from hoprag.llm import LLMError, OpenAICompatLLM

    counter = TokenCounter("tokenizer", llm=OpenAICompatLLM(model="m"))
    with pytest.raises(LLMError, match="llm.tokenizer"):
        counter([Passage("x", "T", "text")])


# --- selectors -----------------------------------------------------------------------------------


def make_pool() -> CandidatePool:
    """Six candidates: 0 and 1 are near-duplicates, 2..5 distinct; fusion descending."""
    rng = np.random.default_rng(5)
    base = unit(rng.normal(size=(5, 16)))
    vectors = np.vstack([base[0], unit([base[0] + 0.05 * base[1]])[0], base[1:]])
    passages = [Passage(f"c{i}", f"T{i}", " ".join(["w"] * 10 * (i + 1))) for i in range(6)]
    return CandidatePool("q", passages, np.linspace(1.0, 0.5, 6), np.linspace(0.9, 0.4, 6), vectors)


WORDS_COUNTER = TokenCounter("words")  # passage i costs 13·(i + 1) tokens


def test_topk_takes_the_first_k_and_optionally_stops_at_the_budget():
    pool = make_pool()
    assert TopKSelector(k=3, token_counter=WORDS_COUNTER).select("q", pool).indices == [0, 1, 2]
    assert TopKSelector(k=5, token_budget=80, token_counter=WORDS_COUNTER).select("q", pool).indices == [0, 1, 2]


def test_mmr_skips_the_near_duplicate_and_fills_the_budget():
    pool = make_pool()
    mmr = MMRSelector(token_budget=10_000, order="selection", token_counter=WORDS_COUNTER)
    ranking = mmr.ranking(pool)
    assert ranking[0] == 0 and ranking.index(1) == 5  # the duplicate of the seed comes last
    selection = MMRSelector(token_budget=100, token_counter=WORDS_COUNTER).select("q", pool)
    assert selection.tokens <= 100 and selection.indices == sorted(selection.indices)
    assert selection.utilisation == pytest.approx(selection.tokens / 100)


def test_mmkp_selects_one_of_the_duplicates_within_both_budgets_in_fused_order():
    pool = make_pool()
    selector = MMKPSelector(token_budget=200, token_counter=WORDS_COUNTER)
    selection = selector.select("q", pool)
    assert not {0, 1} <= set(selection.indices)
    assert selection.indices == sorted(selection.indices)
    assert selection.tokens <= 200 and selection.redundancy <= 120
    assert [p.id for p in selection.passages] == [f"c{i}" for i in selection.indices]
    summary = selection.summary()
    assert summary["groups"] == 5 and summary["pool"] == 6 and summary["selected"] == len(selection.indices)
    assert summary["budget_utilisation"] == pytest.approx(selection.tokens / 200)
    tokens = WORDS_COUNTER(pool.passages)
    inst = build_instance(pool.fusion, pool.vectors, tokens, token_budget=200)
    assert selection.value == pytest.approx(pareto_dp(inst).value)
    for solver in ("dense_dp", "brute_force"):
        other = MMKPSelector(solver=solver, token_budget=200, token_counter=WORDS_COUNTER).select("q", pool)
        assert other.value == pytest.approx(selection.value)


def test_adaptive_threshold_tightens_groups_until_the_budget_is_used():
    pool = make_pool()
    tokens = int(WORDS_COUNTER(pool.passages).sum())
    fixed = MMKPSelector(token_budget=tokens, sim_threshold=0.5, token_counter=WORDS_COUNTER).select("q", pool)
    adaptive = MMKPSelector(
        token_budget=tokens, sim_threshold=0.5, adaptive_threshold=True, adaptive_step=0.2, adaptive_max=1.0,
        token_counter=WORDS_COUNTER,
    ).select("q", pool)  # fmt: skip
    assert adaptive.stats["sim_threshold"] > 0.5 and adaptive.stats["rounds"] > 1
    assert adaptive.tokens >= fixed.tokens


def test_unknown_solver_is_refused():
    with pytest.raises(ValueError, match="pareto_dp"):
        MMKPSelector(solver="simplex")


def test_an_empty_pool_selects_nothing():
    pool = CandidatePool("q", [], [], [], np.zeros((0, 4)))
    for selector in (MMKPSelector(token_counter=WORDS_COUNTER), TopKSelector(token_counter=WORDS_COUNTER),
                     MMRSelector(token_counter=WORDS_COUNTER)):  # fmt: skip
        assert selector.select("q", pool).indices == []


# --- methods ---------------------------------------------------------------------------------------


PROMPT = ChatPrompt("Use the passages.", "{passages}\n\nQuestion: {question}\nAnswer:")
EXAMPLES = [QAExample(f"q{i}", q, ["x"]) for i, q in enumerate(QUESTIONS)]


@pytest.mark.parametrize("cls", [SCRAGSelect, TopKRAG, MMRRAG])
def test_generate_false_never_calls_the_llm(dense, cls):
    llm = ScriptedLLM(default_reply="Answer: x")
    selector = {SCRAGSelect: MMKPSelector, TopKRAG: TopKSelector, MMRRAG: MMRSelector}[cls]
    method = cls(llm, dense, partial(HybridFrontEnd, pool_size=20), selector, PROMPT, generate=False)
    costs = [Cost() for _ in EXAMPLES]
    outputs = method.answer(EXAMPLES, costs)
    assert llm.calls == [] and [o.prediction for o in outputs] == ["", "", ""]
    for out, cost in zip(outputs, costs):
        assert out.retrieved and out.stats["tokens_used"] > 0 and cost.seconds["select"] > 0
        assert out.trace["pool_positions"] == sorted(out.trace["pool_positions"])


def test_generate_true_prompts_once_with_the_selection_in_fused_order(dense):
    llm = ScriptedLLM(default_reply="Answer: x")
    selector = partial(MMKPSelector, token_budget=120)
    method = SCRAGSelect(llm, dense, partial(HybridFrontEnd, pool_size=20), selector, PROMPT)
    outputs = method.answer(EXAMPLES, [Cost() for _ in EXAMPLES])
    assert len(llm.calls) == 1 and [o.prediction for o in outputs] == ["x", "x", "x"]
    prompt = render(llm.calls[0].prompts[0])
    positions = [prompt.index(f"] {p.title}\n{p.text}") for p in outputs[0].retrieved]
    assert positions == sorted(positions) and outputs[0].stats["tokens_used"] <= 120


@pytest.mark.parametrize("name", ["sc_rag_select", "topk_rag", "mmr_rag"])
def test_method_configs_build(compose_cfg, dense, name):
    cfg = compose_cfg("eval", [f"+method={name}", "llm=scripted", "method.generate=false"])
    factory = instantiate(cfg.method)
    assert factory.func.name == name
    method = factory(llm=instantiate(cfg.llm), retriever=dense)
    assert method.front_end.mode == "official" and method.front_end.pool_size == 50
    counter = method.selector.token_counter  # given at construction: the method's llm and passage format
    assert counter.llm is method.llm and counter.passages is method.passages and counter.mode == "tokenizer"
    outputs = method.answer(EXAMPLES[:1], [Cost()])
    assert len(outputs[0].retrieved) > 0


def test_the_textbook_front_end_config_and_solver_overrides(compose_cfg, dense):
    cfg = compose_cfg("eval", ["+method=sc_rag_select", "llm=scripted", "selector/front_end@method.front_end=textbook",
                               "method.selector.solver=official_greedy", "method.front_end.sparse=bm25"])  # fmt: skip
    method = instantiate(cfg.method)(llm=instantiate(cfg.llm), retriever=dense)
    assert (method.front_end.mode, method.selector.solver) == ("textbook", "official_greedy")
    assert isinstance(method.front_end.sparse, BM25Retriever)


# --- values that do not reward quantity, top-k at a budget (issue 19) ------------------------------------


def test_item_values_by_hand():
    paper = np.array([0.9, 0.6, 0.5, 0.2])
    tokens = np.array([100, 50, 200, 100])
    assert item_values(paper, tokens).tolist() == paper.tolist()
    assert item_values(paper, tokens, "above_median").tolist() == pytest.approx([0.35, 0.05, -0.05, -0.35])
    assert item_values(paper, tokens, "per_token").tolist() == pytest.approx([0.9, 1.2, 0.25, 0.2])
    assert item_values(paper, tokens, "offset", 0.55).tolist() == pytest.approx([0.35, 0.05, -0.05, -0.35])
    with pytest.raises(ValueError, match="above_median"):
        item_values(paper, tokens, "rank")
    with pytest.raises(ValueError, match="unknown value"):
        MMKPSelector(value="rank")


def quantity_pool() -> tuple[CandidatePool, TokenCounter]:
    """One long relevant passage first, then four short weak ones; all distinct (singleton groups)."""
    vectors = unit(np.eye(5) + 0.01)
    lengths = [40, 10, 10, 10, 10]  # words; x1.3 tokens: 52, 13 each
    passages = [Passage(f"q{i}", f"T{i}", " ".join(["w"] * n)) for i, n in enumerate(lengths)]
    return CandidatePool("q", passages, [1.0, 0.2, 0.15, 0.1, 0.0], np.zeros(5), vectors), TokenCounter("words")


def test_the_paper_value_packs_weak_short_passages_where_a_pool_relative_value_keeps_the_best():
    """At a 52-token budget the paper's value (every item ≥ β) prefers the four short weak passages (sum
    ≈ 1.55) to the one strong long passage (1.0); above-median and offset values take the strong one."""
    pool, counter = quantity_pool()
    assert MMKPSelector(token_budget=52, token_counter=counter).select("q", pool).indices == [1, 2, 3, 4]
    for value in ("above_median", "offset"):
        chosen = MMKPSelector(token_budget=52, value=value, token_counter=counter).select("q", pool)
        assert chosen.indices == [0], value
    assert MMKPSelector(token_budget=52, value="offset", value_offset=0.0, token_counter=counter).select(
        "q", pool
    ).indices == [1, 2, 3, 4]


def test_build_instance_passes_the_value_option_through():
    pool, counter = quantity_pool()
    tokens = counter(pool.passages)
    paper = build_instance(pool.fusion, pool.vectors, tokens).values
    above = build_instance(pool.fusion, pool.vectors, tokens, value="above_median").values
    assert above.tolist() == pytest.approx((paper - np.median(paper)).tolist())


def test_topk_without_k_fills_the_budget_in_rank_order():
    pool = make_pool()  # passage i costs 13·(i + 1) tokens
    assert TopKSelector(k=None, token_budget=80, token_counter=WORDS_COUNTER).select("q", pool).indices == [0, 1, 2]
    filled = TopKSelector(k=None, token_budget=10_000, token_counter=WORDS_COUNTER).select("q", pool)
    assert filled.indices == list(range(6))


def test_textbook_mmr_reranks_the_whole_pool_on_min_max_relevance():
    """The official depth at a 120-token budget is max(5, ⌊120/120⌋·4) = 5 candidates; the textbook
    variant ranks all six."""
    pool = make_pool()
    assert len(MMRSelector(token_budget=120, token_counter=WORDS_COUNTER).ranking(pool)) == 5
    textbook = MMRSelector(token_budget=120, relevance="minmax", rerank_depth=50, token_counter=WORDS_COUNTER)
    assert sorted(textbook.ranking(pool)) == list(range(6))


@pytest.mark.parametrize("name", ["mmkp_offset", "mmr_textbook"])
def test_selector_presets_build(compose_cfg, name):
    cfg = compose_cfg("eval", ["+method=sc_rag_select", "llm=scripted", f"selector@method.selector={name}"])
    selector = instantiate(cfg.method.selector)(token_counter=WORDS_COUNTER)
    if name == "mmr_textbook":
        assert (selector.relevance, selector.rerank_depth) == ("minmax", 50)
    else:
        assert (selector.weights["value"], selector.weights["value_offset"]) == ("offset", 0.5)
