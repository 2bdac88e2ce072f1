"""`eval.py +method=<framework> +pruning=routed data=crag llm=scripted limit=2` offline (issue 30's acceptance): each
of Table 1's frameworks runs unchanged on the sources the router chose for each question (the scripted router
answers "a": the question's web pages), the run is recorded as `<framework>+pruning` with an un-tuned router, and
the route decides what the framework reads: the same questions routed to the LLM's own knowledge read nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest




@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One cache for the module's runs: each converts the same pages, so only the first pays for it."""
    return tmp_path_factory.mktemp("cache")


def evaluate(eval_main, compose_cfg, cache, run_dir: Path, *overrides: str) -> tuple[dict, list[dict]]:
    cfg = compose_cfg("eval", ["data=crag", "llm=scripted", "limit=2", "~logger", "show=0", *overrides])
    cfg.paths.output_dir, cfg.paths.cache_dir = str(run_dir), str(cache)
    eval_main(cfg)
    report = json.loads((run_dir / "metrics.json").read_text())
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    return report, records


HASHING = "embedder@pruning.sources.web.embedder=hashing"  # plumbing: MiniLM over every page chunk takes minutes


@pytest.mark.parametrize(("framework", "embedder"), [
    *((framework, "hashing") for framework in ("hyde", "iter_retgen", "rrr", "self_ask")),
    pytest.param("hyde", "minilm", marks=pytest.mark.slow),  # the real ranking, by HyDE's averaged vector
])  # fmt: skip
def test_each_framework_runs_on_the_routed_sources(eval_main, compose_cfg, cache, tmp_path, framework, embedder):
    report, records = evaluate(eval_main, compose_cfg, cache, tmp_path / framework, f"+method={framework}",
                               "+pruning=routed", f"embedder@pruning.sources.web.embedder={embedder}")  # fmt: skip
    run, metrics = report["run"], report["metrics"]
    assert run["method"] == f"{framework}+pruning" and run["router"] == "untuned" and run["pruning"] == "routed"
    assert metrics["n"] == 2 and metrics["method/route/web"] == 1.0 and metrics["method/router_parse_failed"] == 0
    assert all(r["trace"]["pruning"] == {"sources": ["web"], "answered_by": "framework", "router_reply": "a"}
               for r in records)  # fmt: skip
    assert "crag/acc@exact" in metrics and "retriever" not in json.dumps(run)
    if framework != "self_ask":  # the scripted LLM writes no follow-up question: Self-Ask answers at once
        assert all(r["retrieved"] and {p["origin"] for p in r["retrieved"]} == {"web"} for r in records)


def test_the_route_decides_what_the_framework_reads(eval_main, compose_cfg, cache, tmp_path):
    web, web_records = evaluate(eval_main, compose_cfg, cache, tmp_path / "web", "+method=standard_rag",
                                "+pruning=fixed", HASHING)  # fmt: skip
    llm, llm_records = evaluate(eval_main, compose_cfg, cache, tmp_path / "llm", "+method=standard_rag",
                                "+pruning=fixed", "pruning.fixed=[llm]", HASHING)  # fmt: skip
    assert web["metrics"]["cost/mean/passages_read"] == 5 and llm["metrics"]["cost/mean/passages_read"] == 0
    assert [r["trace"]["pruning"]["answered_by"] for r in llm_records] == ["closed_book"] * 2
    assert web["run"]["router"] == llm["run"]["router"] == "none"
    for record in web_records:  # the framework's prompt holds the question's own page chunks
        assert {p["id"].split(":")[0] for p in record["retrieved"]} <= {str(i) for i in range(5)}
