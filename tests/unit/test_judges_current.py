"""Judges that exist: no config names a model its provider has shut down, the paper presets and the router recipe
judge CRAG with one named current model (the paper's GPT-3.5-Turbo kept as provenance), and a run's metrics.json
names the judge that scored it. The hosted API is never called: the judge's HTTP post is replaced."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from hoprag.evaluation.judges import LLMJudge, NormalizedMatchJudge, judge_info
from hoprag.llm import OpenAICompatLLM
from hoprag.paths import PROJECT_ROOT

# OpenAI's shutdown dates (its deprecations page, developers.openai.com/api/docs/deprecations, as quoted on
# 2026-10-15 and 2026-10-28 by dev.to/importstatic and dev.to/max_bob): a model past its date answers nothing.
RETIREMENTS = {
    **dict.fromkeys(("gpt-3.5-turbo-0301", "text-davinci-003"), "2024-01-04"),
    **dict.fromkeys(("gpt-3.5-turbo-0613", "gpt-3.5-turbo-16k-0613"), "2024-09-13"),
    # "2026-10-23: gpt-3.5-turbo, gpt-3.5-turbo-0125 → gpt-5.6-terra; gpt-4, gpt-4-turbo, o1, o3-mini → gpt-5.6-sol"
    **dict.fromkeys(("gpt-3.5-turbo", "gpt-3.5-turbo-0125", "gpt-3.5-turbo-1106", "gpt-4", "gpt-4-0613",
                     "gpt-4-1106-preview", "gpt-4-turbo", "gpt-4-turbo-2024-04-09", "gpt-4o-2024-05-13", "o1",
                     "o1-pro", "o3-mini", "o4-mini", "gpt-4.1-nano"), "2026-10-23"),  # fmt: skip
    # "2026-06-11: GPT-5 and o3 model deprecations", shut down on Dec 11, 2026
    **dict.fromkeys(("gpt-5", "gpt-5-mini", "gpt-5-nano", "gpt-5-pro", "o3", "o3-pro"), "2026-12-11"),
    # "2026-10-14: GPT-4 series deprecations", shut down on Jan 14, 2027 (replacement: gpt-6-luna)
    **dict.fromkeys(("gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-4.1-mini"), "2027-01-14"),
}
JUDGE = "gpt-6-luna"  # OpenAI's recommended replacement for its small models (the 2026-10-14 notice)
MODEL_KEYS = ("model", "name", "judge")  # where a config names a model; prose (labels, notes, settings) aside
OVERRIDE = re.compile(r"^[+~]*[\w.]*\b(model|name)=(.+)$")  # a table's or preset's `llm.model=<id>` override


def retired(model: str, today: date) -> bool:
    shutdown = RETIREMENTS.get(model.strip().strip("'\"").lower())
    return shutdown is not None and date.fromisoformat(shutdown) <= today


def named_models(node, where: str = ""):
    """(where, model id) for every value a config gives a model under `model` / `name` / `judge`, and every
    `...model=<id>` / `...name=<id>` override string."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in MODEL_KEYS and isinstance(value, str):
                yield f"{where}.{key}", value
            yield from named_models(value, f"{where}.{key}")
    elif isinstance(node, list):
        for item in node:
            yield from named_models(item, where)
    elif isinstance(node, str) and (match := OVERRIDE.match(node)):
        yield where, match.group(2)


def test_no_config_names_a_retired_model():
    today = date.today()
    found = [(str(p.relative_to(PROJECT_ROOT)), where, model)
             for p in sorted((PROJECT_ROOT / "conf").rglob("*.yaml"))
             for where, model in named_models(yaml.safe_load(p.read_text(encoding="utf-8")))
             if retired(model, today)]  # fmt: skip
    assert not found, f"configs name models their provider has shut down: {found}"


def test_the_retirement_list_reads_dates():
    assert retired("gpt-3.5-turbo", date(2026, 11, 27)) and not retired("gpt-4o-mini", date(2026, 11, 27))
    assert retired("gpt-4o-mini", date(2027, 1, 14)) and not retired(JUDGE, date(2030, 1, 1))


def judge_config(compose_cfg, config: str, overrides: list[str], key: str):
    return OmegaConf.to_container(OmegaConf.select(compose_cfg(config, overrides), key), resolve=True)


@pytest.fixture
def paper_judges(compose_cfg):
    """The judge of the paper presets (eval) and of the router recipe's outcome labels (train)."""
    return {
        "pruningrag_paper": judge_config(compose_cfg, "eval", ["+experiment=pruningrag_paper"], "metrics.crag_judge"),
        "pruningrag_router_paper": judge_config(compose_cfg, "train", ["+experiment=pruningrag_router_paper"],
                                                "model.datamodule.labeller.judge"),  # fmt: skip
    }


def test_the_presets_and_the_router_recipe_name_one_current_judge(paper_judges):
    eval_judge, router_judge = paper_judges.values()
    assert eval_judge == router_judge  # the outcome labels are judged as the table's answers are
    assert eval_judge["llm"]["model"] == JUDGE and eval_judge["llm"]["base_url"] == "https://api.openai.com/v1"
    assert "GPT-3.5-Turbo" in eval_judge["provenance"] and "retired" in eval_judge["provenance"]
    assert f"this run's judge: {JUDGE}" in eval_judge["provenance"]


def test_the_tables_say_whose_judge_runs(compose_cfg):
    for name in ("pruningrag_t3", "pruningrag_t8"):
        table = compose_cfg("reproduce", [f"table={name}", "scale=paper"]).table
        judge = table.scales.paper.settings.judge
        assert judge.startswith(f"the paper's judge: GPT-3.5-Turbo (retired); this run's judge: {JUDGE}")


def test_judge_info_names_the_model_and_its_provenance():
    llm = OpenAICompatLLM(JUDGE, base_url="https://api.openai.com/v1", api_key="sk-test", probe=False,
                          capabilities={"logprobs": False, "n": True, "prefill": False})  # fmt: skip
    judge = LLMJudge(llm, provenance="the paper's judge: GPT-3.5-Turbo (retired); this run's judge: gpt-6-luna")
    assert judge_info(judge) == {"crag_judge": {"name": JUDGE, "model": JUDGE, "provenance": judge.provenance}}
    assert judge_info(NormalizedMatchJudge())["crag_judge"]["name"] == "rule" and judge_info(None) == {}



def test_metrics_json_names_the_judge_that_scored(eval_main, compose_cfg, paper_judges, tmp_path, monkeypatch):
    """eval.py on the bundled CRAG questions (the scripted LLM answers `yes`) judged by the preset's judge, whose
    API answers every request "True": the rates are named after it and its requests are the preset's."""
    sent = []

    def post(self, url, body, timeout=None):
        sent.append(body)
        reply = {"role": "assistant", "content": '{"Accuracy": "True"}'}
        return {"choices": [{"index": 0, "message": reply, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 6}}  # fmt: skip

    monkeypatch.setattr(OpenAICompatLLM, "post", post)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    run_dir = tmp_path / "run"
    cfg = compose_cfg("eval", ["+method=no_retrieval", "data=crag", "llm=scripted", "~logger", "show=0"])
    cfg.metrics.crag_judge = {**paper_judges["pruningrag_paper"], "llm": {
        **paper_judges["pruningrag_paper"]["llm"], "generation_cache": None}}  # fmt: skip
    cfg.paths.output_dir = str(run_dir)
    eval_main(cfg)
    report = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    assert report["metrics"][f"crag/acc@{JUDGE}"] == 100.0 and sent  # every non-exact answer judged correct
    assert {(b["model"], b["reasoning_effort"]) for b in sent} == {(JUDGE, "none")}
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    assert {r["crag"]["judge"] for r in records} == {JUDGE}
    assert report["run"]["crag_judge"] == {"name": JUDGE, "model": JUDGE,
                                           "provenance": paper_judges["pruningrag_paper"]["provenance"]}
