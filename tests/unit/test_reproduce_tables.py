"""Every paper table of conf/table/ composes: each job of each scale is a valid `eval.py` config. At paper scale
each table's settings are the paper's, checked against the implementer digests (shared/spec/*.md, the section
cited on each line), as tests/test_paper_presets.py checks the presets; and every figure typed into a table is
one row of the digest's table (all of a row's figures on one line of the digest)."""

from __future__ import annotations

import copy
import re

import pytest
from omegaconf import OmegaConf

from hoprag.config import apply_aids
from hoprag.paths import data_root
from hoprag.reproduce import SCALES, Table, TableError, plan, rehearsal
from tests.tables import TABLES, composed, load

SPEC = data_root().parent / "spec"  # ../shared/spec beside ../shared/data
WIKI18 = "retrieval-corpus/wiki18_100w.jsonl"


def test_the_seven_tables_of_the_issue_exist():
    assert TABLES == sorted(["treehop_t2", "sc_rag_t3", "sc_rag_t5", "prunerag_t1", "treerare_t1", "pruningrag_t3",
                             "pruningrag_t8"])  # fmt: skip


@pytest.mark.parametrize("scale", ["smoke", "paper"])
@pytest.mark.parametrize("name", TABLES)
def test_every_job_of_every_table_composes_with_a_method(compose_cfg, tmp_path, name, scale):
    """At paper scale: what `python reproduce.py table=<name> scale=paper` would launch, composed (no GPU needed)."""
    jobs = composed(compose_cfg, tmp_path, name, scale)
    assert jobs, f"{name} runs nothing at {scale} scale"
    for row, group, cfg in jobs:
        assert cfg.get("method") is not None, f"{name} {row}/{group}: no method"


def by_row(jobs) -> dict[str, list]:
    rows: dict[str, list] = {}
    for row, group, cfg in jobs:
        rows.setdefault(row, []).append((group, cfg))
    return rows


def test_treehop_t2_has_the_papers_settings(compose_cfg, tmp_path):
    rows = by_row(composed(compose_cfg, tmp_path, "treehop_t2", "paper"))
    for group, cfg in (c for jobs in rows.values() for c in jobs):
        assert (
            cfg.embedder.model == "BAAI/bge-m3" and cfg.embedder.passage_template == "Title: {title}\nContext: {text}"
        )  # §4
        corpus = "multihop_rag/corpus.json" if group == "multihop_rag" else None  # §8.1: MultiHop-RAG's 609 articles
        assert cfg.data.corpus == corpus and cfg.data.sample is None  # §8.1: the others pool every dev question's
        questions = {"2wiki": "2wikimultihopqa/dev.json", "musique": "musique/musique_ans_v1.0_dev.jsonl",
                     "multihop_rag": "multihop_rag/MultiHopRAG.json"}  # fmt: skip
        assert cfg.data.questions == questions[group]  # §8.1
        if group == "multihop_rag":
            assert list(cfg.data.types) == ["inference_query"]  # §8.1: the 816 inference queries
    for row, top_k in (("treehop5", 5), ("treehop10", 10)):
        for _, cfg in rows[row]:
            assert (cfg.method.top_k, cfg.method.n_hops) == (top_k, 2)  # §11.1: TreeHop@5 / @10 iter2
            assert cfg.method.search.redundancy_pruning and cfg.method.search.layerwise_topk  # §7
    for row, rounds in (("iter_retgen2", 2), ("iter_retgen3", 3)):
        for _, cfg in rows[row]:
            assert (cfg.method.rounds, cfg.method.k) == (rounds, 5)  # §8.5: top-5 per round
            assert cfg.llm.model == "meta-llama/Meta-Llama-3-8B-Instruct"  # §8.5: vanilla Llama-3-8B-Instruct


@pytest.mark.parametrize("name", ["sc_rag_t3", "sc_rag_t5"])
def test_the_self_correcting_rag_tables_have_the_papers_settings(compose_cfg, tmp_path, name):
    rows = by_row(composed(compose_cfg, tmp_path, name, "paper"))
    assert {g for jobs in rows.values() for g, _ in jobs} == {"nq", "popqa", "hotpotqa", "2wiki", "musique",
                                                              "multihop_rag"}
    for _, cfg in (c for jobs in rows.values() for c in jobs):
        assert cfg.embedder.model == "BAAI/bge-small-en-v1.5" and cfg.llm.model == "Qwen/Qwen2.5-7B-Instruct"  # §7
        assert cfg.llm.dtype == "bfloat16" and cfg.data.sample == 1000  # §7 bf16; §8.1: 1,000 queries a dataset
        fe = cfg.method.front_end  # §3, §7: dense 200 → fused pool of 50, RRF k 60, TF-IDF
        assert (fe.pool_size, fe.dense_depth, fe.rrf_k, fe.sparse) == (50, 200, 60, "tfidf")
    baseline = "naive" if name == "sc_rag_t3" else "topk"
    assert all(cfg.method.selector.k == 5 for _, cfg in rows[baseline])  # §4.4(c): Naive = the first 5
    if name == "sc_rag_t3":
        for _, cfg in rows["mmr"]:
            assert (cfg.method.selector.lambda_, cfg.method.selector.token_budget) == (0.6, 1500)  # §4.4(c)
        ladder = {"mmkp": (0.3, 120)}
    else:  # §4.4(c) ablation rows: group constraint, + β, + C_red, all three
        ladder = {"group_only": (0.0, 1_000_000), "diversity": (0.3, 1_000_000), "redundancy": (0.0, 120),
                  "full": (0.3, 120)}  # fmt: skip
    for row, (beta, c_red) in ladder.items():
        for _, cfg in rows[row]:
            sel = cfg.method.selector  # §7 (Table 9)
            assert (sel.beta, sel.redundancy_budget, sel.alpha, sel.token_budget) == (beta, c_red, 0.7, 1500)
            assert (sel.sim_threshold, sel.max_per_group, sel.solver) == (0.82, 1, "pareto_dp")


def test_prunerag_t1_has_the_papers_settings(compose_cfg, tmp_path):
    rows = by_row(composed(compose_cfg, tmp_path, "prunerag_t1", "paper"))
    for row, jobs in rows.items():
        for _, cfg in jobs:
            assert cfg.data.sample == 500 and cfg.data.corpus == WIKI18  # §5: 500 questions; §4: DPR wiki-18
            assert cfg.embedder.model == "BAAI/bge-large-en-v1.5"  # §4
            assert (cfg.metrics.passage_match, cfg.metrics.overlap_threshold) == ("token_overlap", 0.75)  # §5
            own = "selfrag/selfrag_llama2_7b" if row == "self_rag" else "Qwen/Qwen3-8B"  # §4: Self-RAG's own model
            assert cfg.llm.model == own and cfg.llm._target_ == "hoprag.llm.VLLMLLM"  # §4: vLLM
    assert all(cfg.method.k == 5 for _, cfg in rows["standard"])  # §4: top-5
    for _, cfg in rows["prunerag"]:
        b = cfg.method.builder  # §4: k 5, D 3, τ_A 0.95, 4,096 new tokens
        assert (b.k, cfg.method.max_depth, b.threshold) == (5, 3, 0.95) and b.generation.max_new_tokens == 4096


def test_treerare_t1_has_the_papers_settings(compose_cfg, tmp_path):
    rows = by_row(composed(compose_cfg, tmp_path, "treerare_t1", "paper"))
    for _, cfg in (c for jobs in rows.values() for c in jobs):
        assert cfg.llm.model == "gpt-4o-mini" and cfg.data.sample == 500  # §4: GPT-4o-mini, 500 questions
        assert "BM25" in cfg.retriever._target_ and cfg.data.corpus == WIKI18  # §4-5: BM25 over wiki-18
    for row in ("treerare_dt", "treerare_ct"):
        for group, cfg in rows[row]:
            assert cfg.method.search.k == 15 and cfg.method.tree == row[-2:]  # §4: 15 passages per query
            assert cfg.method.task == ("ambiguous" if group in ("asqa", "ambigdocs") else "multihop")  # §2.5
    for row in ("cot_zs", "cot_fs", "sc_zs", "sc_fs", "tot"):
        assert all(cfg.method.k == 20 for _, cfg in rows[row])  # App. B: BM25 top-20 in the prompt
    assert all(cfg.method.samples == 10 for row in ("sc_zs", "sc_fs") for _, cfg in rows[row])  # App. B: 10 samples
    assert all(cfg.method.max_turns == 8 for _, cfg in rows["react_star"])  # App. B: ReAct, 8 steps
    assert all(cfg.metrics.qa_reader for g, cfg in rows["treerare_dt"] if g == "asqa")  # §5: Dis-F1's reader


@pytest.mark.parametrize("name", ["pruningrag_t3", "pruningrag_t8"])
def test_the_pruningrag_tables_have_the_papers_settings(compose_cfg, tmp_path, name):
    jobs = composed(compose_cfg, tmp_path, name, "paper")
    for row, group, cfg in jobs:
        assert cfg.llm.model == "meta-llama/Llama-3.1-8B-Instruct"  # §9: the generator
        assert cfg.metrics.crag_judge.llm.model == "gpt-6-luna"  # §8's prompt; the paper's GPT-3.5-Turbo is retired
        assert cfg.data.where.split == 0  # P5: the validation portion
        assert cfg.method.generation.max_new_tokens == 500 and cfg.method.generation.temperature == 0.0  # §9
        pages = "crag_task_3_dev_v4.tar.bz2" if row.endswith("50") else "crag_task_1_and_2_dev_v4.jsonl.bz2"
        assert cfg.data.questions == f"crag/{pages}"  # §3.1: 5 pages (Task 1/2) or 50 (Task 3)
        web = cfg.method.sources.web if group != "hyde" else cfg.pruning.sources.web
        assert (web.chunk_size, web.embedder.model) == (200, "BAAI/bge-m3")  # §9: 200-token chunks, BGE-M3
        if group != "hyde":
            assert web.top_k == 3  # §9: 3 chunks


NUMBER = re.compile(r"[−-]?\d[\d,]*(?:\.\d+)?")


def numbers(line: str) -> list[float]:
    return [float(n.replace(",", "").replace("−", "-")) for n in NUMBER.findall(line)]


@pytest.mark.skipif(not SPEC.is_dir(), reason="the digests (shared/spec) are not beside the data root")
@pytest.mark.parametrize("name", TABLES)
def test_every_rows_paper_figures_are_one_row_of_the_digests_table(compose_cfg, name):
    table = load(compose_cfg, name, "paper")
    digest = (SPEC / table.digest.split()[0].removeprefix("spec/")).read_text(encoding="utf-8")
    lines = [numbers(line) for line in digest.splitlines() if line.startswith("|")]
    for row in table.rows:
        figures = [f.value for f in row.paper.values() if f.value is not None]
        if not figures:
            continue
        found = [line for line in lines if all(any(abs(v - x) < 1e-9 for x in line) for v in figures)]
        assert found, f"{name} {row.id}: no line of {table.digest} holds all of {figures}"


# The budget every LLM call of a table's paper jobs may use (new tokens), from its digest, and the calls that
# keep another by design, each with the reason the table or the digest gives.
PAPER_BUDGETS = {
    "prunerag_t1": (4096, {"self_rag": "Self-RAG"}),  # prunerag.md §4: 4096 for every method; the note names Self-RAG
    "treerare_t1": (1024, {}),  # treerare.md §7 item 7 ([R]: 1024 per call)
    "treehop_t2": (1024, {}),  # treehop.md §8.4: max_new_tokens 1024
    "sc_rag_t3": (256, {}),  # self_correcting_rag.md §10 item 7: the generator's 256 (selection only here)
    "sc_rag_t5": (256, {}),
    "pruningrag_t3": (500, {}),  # pruningrag.md §9: 500
    "pruningrag_t8": (500, {}),
}
# Calls with a budget of their own in the paper: the source router's option letter (pruningrag.md §5.2: ≈ 4
# tokens) and HyDE's hypothetical passages (its official code: 512).
OWN_BUDGETS = {"router.generation": 4, "writer_generation": 512}


def budgets(node, prefix: str = "") -> dict[str, int]:
    """Every `max_new_tokens` under `node` (a method config), by dotted path."""
    found: dict[str, int] = {}
    for key, value in node.items():
        if isinstance(value, dict):
            found |= budgets(value, f"{prefix}{key}.")
        elif key == "max_new_tokens":
            found[prefix.rstrip(".")] = value
    return found


@pytest.mark.parametrize("name", TABLES)
def test_paper_scale_runs_no_small_model_aid_and_the_digests_budgets(compose_cfg, tmp_path, name):
    """Issue 42 item 1: no aid of the small-model overlay at scale=paper, and every LLM call's budget the digest's
    (or a deviation the table's notes name)."""
    budget, deviations = PAPER_BUDGETS[name]
    table = load(compose_cfg, name, "paper")
    notes = " ".join(table.notes)
    assert table.scales["paper"].settings.get("thinking")  # each table states its models' thinking (item 2)
    for row, group, composed_cfg in composed(compose_cfg, tmp_path, name, "paper"):
        cfg = copy.deepcopy(composed_cfg)
        assert apply_aids(cfg) == "none", f"{name} {row}/{group}: small-model aids at paper scale"
        method = OmegaConf.to_container(cfg.method, resolve=True)
        if row in deviations:
            assert deviations[row] in notes, f"{name}: row {row} keeps its own budget, and no note says why"
            continue
        for path, tokens in budgets(method).items():
            assert tokens == OWN_BUDGETS.get(path, budget), f"{name} {row}/{group}: method.{path}.max_new_tokens"
        if method["_target_"].endswith("PruneRAG"):  # prunerag.md §2.3-2.4: the faithful procedure
            b = method["builder"]
            assert (b["decision_prefix"], b["free_text_fallback"], b["lenient_json"], b["min_children"]) == (
                None, False, False, None)  # fmt: skip
            assert method["aggregator"]["answer_prefix"] is None
        if method["_target_"].endswith("TreeRare"):
            assert method["search"]["qg_prefix"] is None  # treerare.md: no prefill


@pytest.mark.parametrize("name", TABLES)
def test_smoke_scale_applies_the_small_model_overlay(compose_cfg, tmp_path, name):
    for row, group, composed_cfg in composed(compose_cfg, tmp_path, name, "smoke"):
        assert apply_aids(copy.deepcopy(composed_cfg)) == "small_model", f"{name} {row}/{group}"


def test_a_table_that_runs_aids_at_paper_scale_is_refused(compose_cfg):
    cfg = compose_cfg("reproduce", ["table=sc_rag_t3"])
    spec = OmegaConf.to_container(cfg.table, resolve=True)
    spec["scales"]["paper"]["overrides"] = ["aids=small_model", *spec["scales"]["paper"]["overrides"][1:]]
    with pytest.raises(TableError, match="small-model overlay"):
        Table.parse(spec)


@pytest.mark.parametrize("name", TABLES)
def test_the_rehearsal_runs_the_paper_jobs_with_only_the_question_count_swapped(compose_cfg, tmp_path, name):
    """Issue 42 item 7: the same rows, groups, skips, methods and settings as scale=paper; only the questions, and
    the search widths a row narrows for the rehearsal (its `rehearsal:` overrides, listed in the report)."""
    table = load(compose_cfg, name, "paper")
    assert set(SCALES) == {"smoke", "paper", "rehearsal"}
    paper, rehearsed = plan(table, "paper", tmp_path), plan(table, "rehearsal", tmp_path)
    assert [(j.name, j.skip) for j in paper] == [(j.name, j.skip) for j in rehearsed]
    for p, r in zip(paper, rehearsed):
        differ = set(r.overrides) ^ set(p.overrides)
        swapped = {o for o in {*p.overrides, *r.overrides} if o.startswith(("data.sample=", "limit="))}
        assert differ <= swapped | set(table.row(r.row).narrowed)
        assert f"data.sample={rehearsal.QUESTIONS}" in r.overrides or f"limit={rehearsal.QUESTIONS}" in r.overrides
    assert table.scales["rehearsal"].stand_ins and "aids=none" in table.scales["rehearsal"].overrides
    judge = table.scales["paper"].variables.get("judge")
    if judge:  # a judge served here is named local-<model>, so its verdicts never pass for the API's
        assert table.scales["rehearsal"].variables["judge"] == f"local-{judge}"
