"""Every paper table of conf/table/ composes: each job of each scale is a valid `eval.py` config. At paper scale
each table's settings are the paper's, checked against the implementer digests (shared/spec/*.md, the section
cited on each line), as tests/test_paper_presets.py checks the presets; and every figure typed into a table is
one row of the digest's table (all of a row's figures on one line of the digest)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from hoprag.paths import PROJECT_ROOT
from hoprag.reproduce import SCALES, Table, plan

TABLES = sorted(p.stem for p in (PROJECT_ROOT / "conf" / "table").glob("*.yaml"))
SPEC = PROJECT_ROOT.parent / "shared" / "spec"
WIKI18 = "retrieval-corpus/wiki18_100w.jsonl"


def load(compose_cfg, name: str, scale: str) -> Table:
    cfg = compose_cfg("reproduce", [f"table={name}", f"scale={scale}"])
    return Table.parse(OmegaConf.to_container(cfg.table, resolve=True))


_COMPOSED: dict[tuple[str, str], list] = {}


def composed(compose_cfg, tmp_path: Path, name: str, scale: str) -> list[tuple[str, str, object]]:
    """(row, group, composed eval config) of every job that runs at `scale` (a missing trained export aside),
    composed once per table and scale (the configs depend on nothing a test changes)."""
    if (name, scale) not in _COMPOSED:
        table = load(compose_cfg, name, scale)
        jobs = [j for j in plan(table, scale, tmp_path, ["show=0"], check_files=False) if not j.skip]
        _COMPOSED[(name, scale)] = [(j.row, j.group, compose_cfg("eval", list(j.overrides))) for j in jobs]
    return _COMPOSED[(name, scale)]


def test_the_seven_tables_of_the_issue_exist():
    assert TABLES == sorted(["treehop_t2", "sc_rag_t3", "sc_rag_t5", "prunerag_t1", "treerare_t1", "pruningrag_t3",
                             "pruningrag_t8"])  # fmt: skip


@pytest.mark.parametrize("scale", SCALES)
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
    assert {g for jobs in rows.values() for g, _ in jobs} == {"hotpotqa", "2wiki", "musique", "multihop_rag"}
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
        assert cfg.metrics.crag_judge.llm.model == "gpt-3.5-turbo"  # §8: the judge
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


@pytest.mark.skipif(not SPEC.is_dir(), reason="the digests (shared/spec) are not beside this checkout")
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
