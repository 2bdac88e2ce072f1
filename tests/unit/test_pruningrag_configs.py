"""PruningRAG's presets compose into the paper's settings (spec/pruningrag.md §9, §10, §13 P6/P11/P18, §14), and
each `source` / `pages` option switches exactly its own knobs. Composition only: no model is loaded."""

from __future__ import annotations

from typing import Any

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hoprag.llm import ScriptedLLM
from hoprag.methods import PruningRAG
from hoprag.paths import PROJECT_ROOT
from hoprag.routers.router import LLMRouter
from hoprag.sources import APISource, WebSource
from hoprag.sources.api.client import DEFAULT_BASE_URL

ADAPTER = "/exports/crag-router"
# Table 3's rows (§10.3): strategy, sources, grounded ("use only the references"), false-premise examples
# (the code's base prompt for fixed sources and "LLM → X"; its routed pipeline's same-domain example), router LLM
SOURCES: dict[str, dict[str, Any]] = {
    "llm": {"strategy": "fixed", "fixed": ["llm"], "grounded": True, "icl": 0},
    "web": {"strategy": "fixed", "fixed": ["web"], "grounded": True, "icl": 0},
    "api": {"strategy": "fixed", "fixed": ["api"], "grounded": True, "icl": 0},
    "web_api": {"strategy": "fixed", "fixed": ["web", "api"], "grounded": True, "icl": 0},
    "llm_web": {"strategy": "fixed", "fixed": ["llm", "web"], "grounded": False, "icl": 0},
    "llm_api": {"strategy": "fixed", "fixed": ["llm", "api"], "grounded": False, "icl": 0},
    "llm_web_api": {"strategy": "fixed", "fixed": ["llm", "web", "api"], "grounded": False, "icl": 0},
    "llm_then_web": {"strategy": "fallback", "fixed": ["web"], "grounded": True, "icl": 0},
    "llm_then_api": {"strategy": "fallback", "fixed": ["api"], "grounded": True, "icl": 0},
    "llm_then_web_api": {"strategy": "fallback", "fixed": ["web", "api"], "grounded": True, "icl": 0},
    "routed": {"strategy": "routed", "grounded": True, "icl": 1, "router_llm": "${tuned_router}"},
    "routed_untuned": {"strategy": "routed", "grounded": True, "icl": 1, "router_llm": None},
}
# §3.1, §6.1, P5, P11: the page count's data (validation split) and BM25 pre-retrieval
PAGES: dict[str, dict[str, Any]] = {
    "5web": {"data.questions": "crag/crag_task_1_and_2_dev_v4.jsonl.bz2", "data.name": "crag",
             "web_pages.bm25_above_pages": 5},
    "50web": {"data.questions": "crag/crag_task_3_dev_v4.tar.bz2", "data.name": "crag_50",
              "web_pages.bm25_above_pages": 0, "web_pages.bm25_top": 50},  # BM25 for every question (broad_retrieval)
    "50web_no_sparse": {"data.questions": "crag/crag_task_3_dev_v4.tar.bz2", "data.name": "crag_50",
                        "web_pages.bm25_above_pages": 50, "web_pages.bm25_top": 50},  # never: no question has > 50 pages
    # RM3QA (§3.2, P9): the same settings over the paper's release, whose pages are Markdown already
    "rm3qa_5web": {"data.questions": "rm3qa/RM3QA_5web.jsonl.bz2", "data.name": "rm3qa",
                   "web_pages.bm25_above_pages": 5, "web_pages.pages_format": "markdown"},
    "rm3qa_50web": {"data.questions": "rm3qa/RM3QA_50web.bz2", "data.name": "rm3qa_50",
                    "web_pages.bm25_above_pages": 0, "web_pages.bm25_top": 50, "web_pages.pages_format": "markdown"},
}  # fmt: skip
# the web source reads each page setting (conf/knowledge/crag.yaml), under the method or under +pruning=
READ_AS = {"web_pages.bm25_above_pages": "sources.web.bm25_above_pages", "web_pages.bm25_top": "sources.web.bm25_top",
           "web_pages.pages_format": "sources.web.pages_format"}  # fmt: skip
# each table preset of PruningRAG's own pipeline: the paper preset with its default row (and its own tag)
TABLES = {
    "pruningrag_table3": ("routed", "5web"),
    "pruningrag_table4": ("web", "50web"),
    "pruningrag_table8": ("routed_untuned", "5web"),
}


def flat(cfg) -> dict[str, Any]:
    def walk(node: Any, prefix: str) -> dict[str, Any]:
        if not isinstance(node, dict):
            return {prefix: node}
        return {k: v for key, value in node.items() for k, v in walk(value, f"{prefix}{key}.").items()} or {
            prefix: node
        }

    return {key.rstrip("."): value for key, value in walk(OmegaConf.to_container(cfg), "").items()}


def changed(before, after) -> dict[str, Any]:
    a, b = flat(before), flat(after)
    return {k: b.get(k) for k in a.keys() | b.keys() if a.get(k) != b.get(k)}


def group(name: str) -> list[str]:
    return sorted(p.stem for p in (PROJECT_ROOT / "conf" / name).glob("*.yaml"))


def test_every_source_option_is_a_row_of_table_3_and_every_pages_option_a_page_setting():
    assert group("source") == sorted(SOURCES) and group("pages") == sorted(PAGES)


def test_source_options_configure_the_method_only(compose_cfg):
    headers = {path.stem: path.read_text().splitlines()[0] for path in (PROJECT_ROOT / "conf" / "source").glob("*.yaml")}
    assert headers == dict.fromkeys(SOURCES, "# @package method")
    cfg = compose_cfg("eval", ["+experiment=pruningrag_offline", "source=routed"])  # the preset declares the rest
    assert cfg.method.strategy == "routed" and cfg.method.router_llm.adapter.endswith("routers/smollm2-crag-lora")


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_each_source_option_switches_exactly_the_strategy_knobs(compose_cfg, source):
    base = compose_cfg("eval", ["+experiment=pruningrag_table3", "source=web"])
    cfg = compose_cfg("eval", ["+experiment=pruningrag_table3", f"source={source}"])
    knobs = {f"method.{key}": value for key, value in SOURCES[source].items()}
    assert set(changed(base, cfg)) <= set(knobs)
    assert {key: flat(cfg)[key] for key in knobs} == knobs


@pytest.mark.parametrize("source", sorted(set(SOURCES) - {"routed"}))  # routed's router is a vLLM engine
def test_each_source_option_builds_its_strategy_on_the_papers_sources(compose_cfg, source):
    cfg = compose_cfg("eval", ["+experiment=pruningrag_paper", f"source={source}"])
    method = instantiate(cfg.method)(llm=ScriptedLLM())
    knobs = SOURCES[source]
    assert isinstance(method, PruningRAG) and method.strategy == knobs["strategy"]
    assert (method.grounded, method.icl) == (knobs["grounded"], knobs["icl"])
    assert not method.cot and not method.cross_domain
    if method.strategy == "routed":  # the un-tuned router: the generator itself
        assert isinstance(method.router, LLMRouter) and method.router.llm is method.llm
    else:
        assert list(method.fixed) == knobs["fixed"] and method.router is None
    assert isinstance(method.sources["web"], WebSource) and isinstance(method.sources["api"], APISource)


@pytest.mark.parametrize("pages", sorted(PAGES))
def test_each_pages_option_switches_exactly_the_data_file_and_bm25(compose_cfg, pages):
    base = compose_cfg("eval", ["+experiment=pruningrag_paper", "pages=5web"])
    cfg = compose_cfg("eval", ["+experiment=pruningrag_paper", f"pages={pages}"])
    assert set(changed(base, cfg)) <= set(PAGES[pages])
    assert all(OmegaConf.select(cfg, key) == value for key, value in PAGES[pages].items())
    assert cfg.data.where == {"split": 0}  # the validation portion the paper reports (P5)
    assert cfg.method.sources.web.bm25_top == 50 and cfg.method.sources.web.top_k == 3
    framework = compose_cfg("eval", ["+experiment=pruningrag_table1", f"pages={pages}"])
    for key, value in PAGES[pages].items():  # the same page setting reaches PruningRAG's and a framework's sources
        if key in READ_AS:
            assert OmegaConf.select(cfg.method, READ_AS[key]) == OmegaConf.select(framework.pruning, READ_AS[key]) == value


def test_the_paper_preset_carries_the_papers_settings(compose_cfg):
    cfg = compose_cfg("eval", ["+experiment=pruningrag_paper", f"tuned_router.adapter={ADAPTER}"])
    m, llm = cfg.method, cfg.llm
    assert llm._target_ == "hoprag.llm.VLLMLLM" and llm.model == "meta-llama/Llama-3.1-8B-Instruct"  # §9
    assert m.generation == {"max_new_tokens": 500, "temperature": 0.0}  # §9: greedy, 500 new tokens
    web = m.sources.web
    assert web.embedder.model == "BAAI/bge-m3" and web.embedder._target_ == "hoprag.retrieval.FlagEmbedder"  # §6.1
    assert (web.top_k, web.chunk_size, web.tokenizer) == (3, 200, "cl100k_base")  # §6.1, P10
    assert m.sources.api._target_ == "hoprag.sources.APISource" and m.sources.api.base_url == DEFAULT_BASE_URL
    assert m.sources.llm._target_ == "hoprag.sources.ParametricSource"
    assert (m.strategy, m.cot, m.icl, m.cross_domain) == ("routed", False, 1, False)  # P6 code_4stage
    assert (m.router.options, m.router.none_policy) == ("crag_single", "api")  # §5.2, P1, P4
    assert m.router_llm.adapter == ADAPTER and m.router_llm._target_ == llm._target_
    engine = ("model", "dtype", "tensor_parallel_size", "gpu_memory_utilization", "max_model_len", "seed",
              "trust_remote_code", "engine_kwargs")  # fmt: skip
    assert all(m.router_llm[key] == llm[key] for key in engine)  # one vLLM engine serves both
    assert llm.engine_kwargs.enable_lora and cfg.optimized_metric == "crag/score@*"  # the run's judged Score
    assert llm.max_input_tokens <= llm.max_model_len - m.generation.max_new_tokens  # a long context is shortened
    assert cfg.data.questions == "crag/crag_task_1_and_2_dev_v4.jsonl.bz2" and cfg.data.where == {"split": 0}


@pytest.mark.parametrize("preset", ["pruningrag_paper", *sorted(TABLES)])
def test_the_paper_presets_judge_with_the_papers_judge_and_need_its_key(compose_cfg, monkeypatch, preset):
    """§8, §9: CRAG's prompt at temperature 0 on OpenAI's API, on gpt-6-luna (the paper's GPT-3.5-Turbo is retired,
    kept as provenance); a missing key is refused when the metrics are built (before the first question), and
    nothing is sent here."""
    cfg = compose_cfg("eval", [f"+experiment={preset}"])
    judge = cfg.metrics.crag_judge
    assert judge._target_ == "hoprag.evaluation.judges.LLMJudge" and judge.llm._target_ == "hoprag.llm.OpenAICompatLLM"
    assert (judge.llm.model, judge.llm.base_url) == ("gpt-6-luna", "https://api.openai.com/v1")
    assert judge.provenance.startswith("the paper's judge: GPT-3.5-Turbo")
    assert judge.llm.api_key is None  # read from OPENAI_API_KEY
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    suite = instantiate(cfg.metrics)
    assert suite.crag_judge_name == "gpt-6-luna" and suite.crag_judge.generation["temperature"] == 0.0
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(Exception, match="OPENAI_API_KEY"):
        instantiate(cfg.metrics)


def test_the_tuned_router_is_the_papers_router_recipes_export_and_only_routed_runs_build_it(compose_cfg):
    """The paper preset's router is what +experiment=pruningrag_router_paper publishes, the offline preset's what
    +model=source_router_crag publishes; it is given unbuilt, so a fixed-source row needs no router at all."""
    cfg = compose_cfg("eval", ["+experiment=pruningrag_paper"])
    recipe = compose_cfg("train", ["+experiment=pruningrag_router_paper"])
    assert cfg.tuned_router.adapter == recipe.model.publish_dir and cfg.tuned_router._partial_
    assert compose_cfg("eval", ["+experiment=pruningrag_paper", "source=web_api"]).method.router_llm is None
    offline = compose_cfg("eval", ["+experiment=pruningrag_offline", "source=routed"])
    cpu_recipe = compose_cfg("train", ["+model=source_router_crag"])
    assert offline.method.router_llm.adapter == cpu_recipe.model.publish_dir
    assert offline.method.router_llm.model == offline.llm.model
    web_api = instantiate(compose_cfg("eval", ["+experiment=pruningrag_offline", "source=web"]).method)
    assert web_api(llm=ScriptedLLM()).router is None  # the adapter (absent here) is never loaded


@pytest.mark.parametrize("table", sorted(TABLES))
def test_each_table_preset_is_the_paper_preset_at_its_default_row(compose_cfg, table):
    source, pages = TABLES[table]
    paper = compose_cfg("eval", ["+experiment=pruningrag_paper", f"source={source}", f"pages={pages}"])
    cfg = compose_cfg("eval", [f"+experiment={table}"])
    assert changed(paper, cfg) == {"tags": ["eval", "pruningrag", "paper", table.removeprefix("pruningrag_")]}


def test_table_4_toggles_only_the_sparse_pre_retrieval(compose_cfg):
    dense = compose_cfg("eval", ["+experiment=pruningrag_table4", "pages=50web_no_sparse"])
    assert changed(compose_cfg("eval", ["+experiment=pruningrag_table4"]), dense) == {
        "web_pages.bm25_above_pages": 50
    }
    assert dense.method.sources.web.bm25_above_pages == 50


@pytest.mark.parametrize("framework", ["standard_rag", "hyde", "iter_retgen", "rrr", "self_ask", "self_rag"])
@pytest.mark.parametrize("pruning", ["fixed", "routed"])
def test_table_1_puts_each_framework_on_the_papers_sources_with_or_without_pruning(compose_cfg, framework, pruning):
    """§9, §10.1, P18: Table 1's frameworks (Table 7's settings) at the paper's 3 chunks, on the paper's
    sources (BGE-M3 web chunks, the mock API) and model, the tuned router for the "+ Pruning" rows."""
    cfg = compose_cfg("eval", ["+experiment=pruningrag_table1", f"method={framework}", f"pruning={pruning}",
                               "pruning.fixed=[web,api]"])  # fmt: skip
    p = cfg.pruning
    assert cfg.method.k == 3 and cfg.llm.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert p._target_ == "hoprag.methods.WithPruning" and p.strategy == pruning and p.domain == "llm"
    assert p.sources.web.embedder.model == "BAAI/bge-m3" and p.sources.api._target_ == "hoprag.sources.APISource"
    assert p.router_llm.adapter == cfg.tuned_router.adapter and p.closed_book._target_ == "hoprag.methods.NoRetrieval"
    assert cfg.metrics.crag_judge.llm.model == "gpt-6-luna" and "table1" in cfg.tags
    if framework in ("iter_retgen", "self_ask"):  # Table 7: at most 3 rounds, at most 5 follow-ups
        assert cfg.method.get("rounds", cfg.method.get("max_turns")) == {"iter_retgen": 3, "self_ask": 5}[framework]


def test_the_gold_domain_is_an_explicit_oracle_setting(compose_cfg):
    method = instantiate(compose_cfg("eval", ["+experiment=pruningrag_paper", "source=web_api"]).method)
    assert method(llm=ScriptedLLM()).run_info()["oracle_domain"] is False  # predicted by default
    gold = compose_cfg("eval", ["+experiment=pruningrag_paper", "source=web_api", "method.domain=gold"])
    assert instantiate(gold.method)(llm=ScriptedLLM()).run_info()["oracle_domain"] is True


def test_the_offline_preset_gives_every_source_available_here_without_pruning(compose_cfg):
    cfg = compose_cfg("eval", ["+experiment=pruningrag_offline"])
    assert cfg.data.questions == "crag/crag_task1_dev_10.jsonl.bz2" and cfg.llm.name == "smollm2-135m-instruct"
    assert cfg.metrics.crag_judge is None and cfg.optimized_metric == "crag/score@*"  # crag/score@exact offline
    assert cfg.method.sources.web.embedder.name == "all-MiniLM-L6-v2" and "paper" not in cfg.tags
    method = instantiate(cfg.method)(llm=ScriptedLLM())
    available = {name for name, source in method.sources.items() if source is not None}
    assert available == {"web", "llm"} and method.sources["api"] is None
    assert (method.strategy, set(method.fixed), method.grounded) == ("fixed", available, False)
    routed = instantiate(compose_cfg("eval", ["+experiment=pruningrag_offline", "source=routed_untuned"]).method)
    assert routed(llm=ScriptedLLM()).strategy == "routed"
