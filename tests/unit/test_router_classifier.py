"""The classifier router end to end on TAT-QA dev's real split: `python train.py +model=router_classifier`
(a bag-of-words hash embedder stands in for MiniLM, so it runs in seconds), its export loaded and routing,
and `scripts/components/eval_router.py` on the LLM-free path (classifier, majority, always-both), refusing questions
the export was trained on."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch

from hoprag.data import QADataset, load_questions
from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT, data_root
from hoprag.routers.classifier import ClassifierRouter, RouterClassifierModule, RouterDataModule
from hoprag.routers.options import TATQA
from hoprag.routers.router import RouteDecision, router_contract
from hoprag.training.exports import question_record
from hoprag.training.splits import LeakError, split_by_context
from tests.fakes import HashEmbedder
from tests.scripts import load_script

eval_router = load_script("components/eval_router.py")

DEV = data_root() / "tatqa" / "tatqa_dataset_dev.json"
HASH = {"_target_": "tests.fakes.HashEmbedder", "name": "hash-bow", "dim": 256}
HASH_OVERRIDES = ["embedder._target_=tests.fakes.HashEmbedder", "embedder.name=hash-bow", "++embedder.dim=256",
                  "~embedder.model", "~embedder.device", "~embedder.max_length"]  # fmt: skip


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, str]:
    """One run of train.py as users run it; returns (run directory, its output)."""
    run = tmp_path_factory.mktemp("router_run")
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(run / "cache")),
           "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "train.py", "+model=router_classifier", *HASH_OVERRIDES, "threads=1", "~logger.wandb",
         "trainer.max_epochs=15", f"hydra.run.dir={run}"],  # fmt: skip
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return run, proc.stdout


@pytest.fixture(scope="module")
def split():
    return split_by_context(load_questions(DEV), 0.5, 0)


def test_train_py_trains_selects_on_the_training_split_and_exports(trained):
    run, out = trained
    assert "{'fit': 666, 'val': 168, 'test': 834}" in out  # selection slice from the training split only
    metrics = dict(re.findall(r"^  (\S+/\S+) +([\d.]+)$", out, re.MULTILINE))  # the test table: one value a row
    header = next(re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.split()[:1] == ["metric"])
    exported = next(i for i, title in enumerate(header) if title.startswith("exported"))  # "exported (epoch n)"
    selected = next(line.split() for line in out.splitlines() if line.split()[:1] == ["val/macro_f1"])
    assert float(metrics["test/acc"]) > 0.5 and float(selected[exported]) > 0.4
    settings = json.loads((run / "export" / "router.json").read_text())
    assert settings["options"] == "tatqa" and settings["letters"] == ["a", "b", "c"]
    assert settings["embedder"]["_target_"] == "tests.fakes.HashEmbedder"
    assert len(settings["trained_on"]) == 834  # fit + selection questions
    published = run / "cache" / "routers" / "minilm-tatqa" / "router.json"
    assert published.read_text() == (run / "export" / "router.json").read_text()
    assert list((run / "cache" / "routers").glob("hash-bow-*.npy"))  # the question vectors, cached


def test_the_export_routes_and_refuses_its_training_questions(trained, split):
    train, evaluation = split
    router = ClassifierRouter.load(trained[0] / "export")
    decisions = router.route([ex.question for ex in evaluation[:20]])
    assert len(decisions) == 20 and all(isinstance(d, RouteDecision) and d.parsed for d in decisions)
    assert {d.sources for d in decisions} <= {("table",), ("text",), ("table", "text")}
    assert all(d.reply in "abc" for d in decisions)
    router.check_unseen(evaluation)
    with pytest.raises(LeakError, match="question ids"):
        router.check_unseen(train[:3])


def test_eval_router_scores_classifier_majority_and_always_both(trained, tmp_path, capsys):
    out = tmp_path / "report.json"
    result = eval_router.main(["--data", str(DEV), "--classifier", str(trained[0] / "export"), "--base-llm", "none",
                               "--limit", "40", "--out", str(out)])  # fmt: skip
    assert result["train_questions"] == 834 and result["eval_questions"] == 40
    names = [r["router"] for r in result["routers"]]
    assert names == ["classifier", "majority (a)", "always-both (c)"]
    gold = result["gold_distribution"]
    majority, both = result["routers"][1], result["routers"][2]
    assert majority["accuracy"] == pytest.approx(gold["a"] / 40) and both["accuracy"] == pytest.approx(gold["c"] / 40)
    assert all(r["parse_failures"] == 0 for r in result["routers"])
    assert json.loads(out.read_text()) == result
    printed = capsys.readouterr().out
    assert "macro-F1 %" in printed and json.loads(printed.strip().splitlines()[-1]) == result


def test_eval_router_refuses_a_split_the_classifier_was_trained_on(trained):
    with pytest.raises(LeakError):  # seed 1 draws another split: part of it trained the export
        eval_router.main(["--data", str(DEV), "--classifier", str(trained[0] / "export"), "--base-llm", "none",
                          "--seed", "1", "--limit", "10"])  # fmt: skip


def test_eval_router_on_a_whole_foreign_file_drops_what_trained(tmp_path, split):
    records = json.loads(DEV.read_text())
    train_contexts = {ex.metadata["context_uid"] for ex in split[0]}
    kept = [r for r in records if r["table"]["uid"] not in train_contexts][:3]
    seen = next(r for r in records if r["table"]["uid"] in train_contexts)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps([*kept, seen]), encoding="utf-8")
    result = eval_router.main(["--data", str(foreign), "--split", "all", "--base-llm", "none"])
    assert result["dropped_as_seen"] == len(seen["questions"])
    assert result["eval_questions"] == sum(len(r["questions"]) for r in kept)


def test_balanced_class_weights_and_export_round_trip(tmp_path, split, capsys):
    data = QADataset("tatqa", str(DEV), format="tatqa")
    datamodule = RouterDataModule(data, HashEmbedder(dim=256), options="tatqa", cache_dir=str(tmp_path / "cache"))
    module = RouterClassifierModule(HASH, options="tatqa", class_weights="balanced")
    line = "classifier: 771 parameters, 771 trainable; a linear head to 3 classes over hash-bow"  # 256 × 3 + 3
    assert line in capsys.readouterr().out
    trainer = L.Trainer(max_epochs=3, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu")  # fmt: skip
    trainer.fit(module, datamodule=datamodule)
    fit_labels = datamodule.sets["fit"].tensors[1]
    counts = torch.bincount(fit_labels, minlength=3).float()
    assert torch.allclose(module.weights, counts.sum() / (3 * counts))  # rarer classes weigh more
    assert {"val/acc", "val/macro_f1"} <= set(trainer.callback_metrics)

    module.export(tmp_path / "export")
    router = ClassifierRouter.load(tmp_path / "export")
    x, _ = datamodule.sets["test"].tensors
    module.eval()
    expected = [router.options.letters[i] for i in module(x[:30]).argmax(-1).tolist()]
    assert [d.reply for d in router.route([ex.question for ex in split[1][:30]])] == expected


def test_eval_router_scores_an_llm_router_and_counts_its_parse_failures(tmp_path):
    llm = tmp_path / "scripted_router.yaml"
    llm.write_text(
        "_target_: hoprag.llm.ScriptedLLM\n_convert_: all\n"
        "rules: [['Query\\n[^\\n]*(?:[Ww]hat is the|[Ww]hat was the)', 'a) The table only']]\n"
        "default_reply: 'The table'\n",
        encoding="utf-8",
    )
    result = eval_router.main(["--data", str(DEV), "--base-llm", str(llm), "--limit", "30"])
    untuned = result["routers"][0]
    assert untuned["router"] == "llm (un-tuned)"
    failures = sum(untuned["confusion"][gold]["other"] for gold in "abc")
    assert 0 < untuned["parse_failures"] == failures < 30  # a reply naming no option is wrong, never a class
    assert all(untuned["confusion"][g][p] == 0 for g in "abc" for p in "bc")  # it only ever said "a"


def test_eval_router_checks_a_tuned_routers_export_before_loading_it(tmp_path, split):
    llm = tmp_path / "scripted.yaml"
    llm.write_text("_target_: hoprag.llm.ScriptedLLM\n", encoding="utf-8")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    args = ["--data", str(DEV), "--base-llm", str(llm), "--router", str(adapter), "--limit", "3"]
    with pytest.raises(SystemExit, match="router.json is missing"):
        eval_router.main(args)
    settings = {"base_model": "m", **router_contract(TATQA), "none_policy": "api", "trained_on": []}
    (adapter / "router.json").write_text(json.dumps(settings), encoding="utf-8")
    with pytest.raises(SystemExit, match="takes no adapter= argument"):  # ScriptedLLM cannot load an adapter
        eval_router.main(args)
    leaked = question_record(split[1][-1])  # a router-evaluation question, past --limit
    (adapter / "router.json").write_text(json.dumps({**settings, "trained_on": [leaked]}), encoding="utf-8")
    with pytest.raises(LeakError, match="1 question ids"):
        eval_router.main(args)
