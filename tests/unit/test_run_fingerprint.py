"""Run fingerprints: a rerun of a run directory must share its first start's settings (eval.py and train.py).

A rerun with another k, retriever, LLM, corpus or question file is refused, naming the differing keys, and the
directory stays byte for byte as it was; the same settings resume, a larger limit extends, `overwrite=true`
starts afresh. The eval entry point runs in-process on a small FlashRAG pair with the scripted LLM.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from hoprag.config import register_resolvers
from hoprag.data import QADataset, pool_corpus, write_corpus, write_flashrag
from hoprag.evaluation.fingerprint import ResumeRefused, diff, eval_fingerprint
from hoprag.paths import PROJECT_ROOT, data_root

HOTPOT = "hotpotqa/hotpot_dev_distractor_185.json"
BASE = ["+method=standard_rag", "retriever=bm25", "llm=scripted", "~logger", "show=0"]


def entry(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_entry", PROJECT_ROOT / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def digests(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.rglob("*")
            if p.is_file()}  # fmt: skip


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_seconds(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if "seconds" not in k}


def evaluate(root: Path, *overrides: str, flashrag: bool = True) -> float:
    """eval.py's main in-process, on the FlashRAG pair under `root/data`, writing to `root/run`."""
    data = ["data=flashrag", f"data.questions={root}/data/dev.jsonl", f"data.corpus={root}/data/corpus.jsonl"]
    paths = [f"paths.output_dir={root / 'run'}", f"paths.cache_dir={root / 'cache'}"]
    register_resolvers()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
            cfg = compose("eval", [*BASE, *(data if flashrag else []), *overrides, *paths])
    finally:
        GlobalHydra.instance().clear()
    return EVAL.main.__wrapped__(cfg)


EVAL = entry("eval")


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A finished run of 6 of the pair's 8 questions."""
    root = tmp_path_factory.mktemp("finished")
    source = QADataset("hotpotqa", HOTPOT, format="hotpotqa", limit=8)
    write_flashrag(source.examples, root / "data" / "dev.jsonl")
    write_corpus(pool_corpus(source.examples), root / "data" / "corpus.jsonl")
    evaluate(root, "limit=6")
    return root


@pytest.fixture
def rerun(finished, tmp_path) -> Path:
    """A copy of the finished run and its data files (same contents, other paths) to rerun in."""
    for part in ("data", "run"):
        shutil.copytree(finished / part, tmp_path / part)
    return tmp_path


def change_first_line(path: Path, field: str, value) -> None:
    records = lines(path)
    records[0][field] = value
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_diff_names_every_differing_dotted_key():
    saved = {"method": {"k": 5, "prompt": {"system": "a"}}, "llm": {"name": "x"}, "ks": [5], "seed": 1}
    requested = {"method": {"k": 3, "prompt": {"system": "a"}}, "llm": {"name": "x", "seed": 0}, "ks": [5, 10],
                 "seed": {"value": 1}}  # fmt: skip
    assert diff(saved, requested) == ["method.k", "llm.seed", "ks", "seed"]
    assert diff(requested, saved) == ["method.k", "llm.seed", "ks", "seed"]
    assert diff(saved, json.loads(json.dumps(saved))) == []


def test_the_eval_fingerprint_leaves_out_run_control_and_the_data_root(compose_cfg, tmp_path):
    base = ["+method=standard_rag", "llm=scripted", "retriever=bm25"]
    reference = eval_fingerprint(compose_cfg("eval", base))
    run_control = ["limit=3", "batch_size=2", "show=0", "force=true", "overwrite=true", "~logger", "llm.delay=0.5",
                   "optimized_metric=em", "paths.index_dir=/elsewhere", "retriever.cache_dir=/elsewhere"]  # fmt: skip
    assert eval_fingerprint(compose_cfg("eval", [*base, *run_control])) == reference

    other_root = tmp_path / "elsewhere"
    (other_root / "hotpotqa").mkdir(parents=True)
    shutil.copy(data_root() / HOTPOT, other_root / HOTPOT)
    moved = compose_cfg("eval", [*base, f"data.root={other_root}"])
    assert eval_fingerprint(moved) == reference  # the same file under another data root
    (other_root / HOTPOT).write_bytes((other_root / HOTPOT).read_bytes().replace(b'"answer"', b'"answer" ', 1))
    assert diff(reference, eval_fingerprint(moved)) == ["data.questions.sha256"]

    assert diff(reference, eval_fingerprint(compose_cfg("eval", [*base, "method.k=3"]))) == ["method.k"]
    assert "retriever" not in eval_fingerprint(compose_cfg("eval", ["+method=no_retrieval", "llm=scripted"]))
    dense = eval_fingerprint(compose_cfg("eval", ["+method=standard_rag", "llm=smollm2"]))["retriever"]
    assert dense["embedder"]["name"] == "all-MiniLM-L6-v2" and dense["index"] == {"factory": "Flat"}
    assert not {"device", "batch_size"} & dense["embedder"].keys() and not {"cache_dir", "force"} & dense.keys()


REFUSED = {
    "k": (["method.k=3"], None, "method.k: saved 5, requested 3"),
    "retriever": (["retriever=dense"], None, 'retriever._target_: saved "hoprag.retrieval.BM25Retriever"'),
    "llm": (["llm=smollm2"], None, 'llm._target_: saved "hoprag.llm.ScriptedLLM", requested "hoprag.llm.HFLLM"'),
    "corpus": ([], ("corpus.jsonl", "contents", "Changed\nsince the run"), "data.corpus.sha256"),
    "questions": ([], ("dev.jsonl", "golden_answers", ["another gold"]), "data.questions.sha256"),
}


@pytest.mark.parametrize("change", REFUSED, ids=list(REFUSED))
def test_a_rerun_with_other_settings_is_refused_and_the_directory_kept(rerun, change):
    overrides, file_change, message = REFUSED[change]
    if file_change:
        name, field, value = file_change
        change_first_line(rerun / "data" / name, field, value)
    before = digests(rerun / "run")
    with pytest.raises(ResumeRefused) as refused:
        evaluate(rerun, "limit=6", *overrides)
    assert message in str(refused.value) and "overwrite=true" in str(refused.value)
    assert digests(rerun / "run") == before


def test_a_rerun_on_another_dataset_is_refused_and_the_metrics_kept(rerun):
    before = digests(rerun / "run")
    with pytest.raises(ResumeRefused, match='data.name: saved "flashrag", requested "hotpotqa"'):
        evaluate(rerun, "limit=6", "data=hotpotqa", flashrag=False)
    assert digests(rerun / "run") == before


def test_the_same_settings_resume_and_a_larger_limit_extends(finished, rerun):
    predictions = rerun / "run" / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(r) + "\n" for r in lines(predictions)[:3]))  # killed after 3
    fingerprint = (rerun / "run" / "run_fingerprint.json").read_bytes()
    evaluate(rerun, "limit=6", "batch_size=2")  # another batch size is run control: resumed
    report = json.loads((rerun / "run" / "metrics.json").read_text())
    reference = json.loads((finished / "run" / "metrics.json").read_text())
    assert report["run"]["resumed_with"] == 3 and [r["id"] for r in lines(predictions)] == [
        r["id"] for r in lines(finished / "run" / "predictions.jsonl")
    ]
    assert without_seconds(report["metrics"]) == without_seconds(reference["metrics"])

    evaluate(rerun)  # no limit: the pair's 8 questions
    report = json.loads((rerun / "run" / "metrics.json").read_text())
    assert report["run"]["n"] == 8 and report["run"]["resumed_with"] == 6 and len(lines(predictions)) == 8
    assert (rerun / "run" / "run_fingerprint.json").read_bytes() == fingerprint


def test_a_smaller_limit_is_refused(rerun):
    before = digests(rerun / "run")
    with pytest.raises(ResumeRefused, match="2 questions that this run does not ask"):
        evaluate(rerun, "limit=4")
    assert digests(rerun / "run") == before


def test_overwrite_starts_afresh_with_the_new_settings(rerun):
    evaluate(rerun, "limit=6", "method.k=3", "overwrite=true")
    report = json.loads((rerun / "run" / "metrics.json").read_text())
    assert report["run"]["resumed_with"] == 0 and len(lines(rerun / "run" / "predictions.jsonl")) == 6
    assert all(len(r["retrieved"]) == 3 for r in lines(rerun / "run" / "predictions.jsonl"))
    assert json.loads((rerun / "run" / "run_fingerprint.json").read_text())["method"]["k"] == 3


@pytest.fixture(scope="module")
def train_py():
    return entry("train")


def test_a_training_resume_with_other_settings_is_refused(compose_cfg, tmp_path, train_py, capsys):
    assert train_py.resume_path(compose_cfg("train", ["+model=treehop"])) is None  # a fresh start records them
    saved = json.loads((tmp_path / "run_fingerprint.json").read_text())
    assert saved["model"]["module"]["lr"] == 6e-5 and saved["trainer"]["accelerator"] == "cpu"
    assert "max_epochs" not in saved["trainer"] and "cache_dir" not in saved["model"]["datamodule"]
    last = tmp_path / "checkpoints" / "last.ckpt"
    last.parent.mkdir()
    torch.save({"epoch": 4, "callbacks": {}}, last)  # the first run's, after its fifth epoch

    before = digests(tmp_path)
    for override, message in [
        ("model.module.lr=1e-3", "model.module.lr: saved 6e-05, requested 0.001"),
        ("model.datamodule.train.limit=90", "model.datamodule.train.limit: saved null, requested 90"),
        ("model.datamodule.batch_size=16", "model.datamodule.batch_size: saved 64, requested 16"),
        ("seed=1", "seed: saved 42, requested 1"),
    ]:
        with pytest.raises(ResumeRefused) as refused:
            train_py.resume_path(compose_cfg("train", ["+model=treehop", override]))
        assert message in str(refused.value) and "ckpt_path=null" in str(refused.value)
    assert digests(tmp_path) == before

    longer = compose_cfg("train", ["+model=treehop", "trainer.max_epochs=50", "threads=1", "~logger"])
    assert train_py.resume_path(longer) == str(last)  # training longer, on fewer threads, without loggers
    assert f"resuming from {last} after epoch 4 (5 of 50 epochs done)\n" in capsys.readouterr().out
    afresh = compose_cfg("train", ["+model=treehop", "model.module.lr=1e-3", "ckpt_path=null"])
    assert train_py.resume_path(afresh) is None
    assert json.loads((tmp_path / "run_fingerprint.json").read_text())["model"]["module"]["lr"] == 1e-3


def test_a_checkpoint_without_a_fingerprint_is_refused(compose_cfg, tmp_path, train_py):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"weights of an older run")
    with pytest.raises(ResumeRefused, match="holds checkpoints but no run_fingerprint.json"):
        train_py.resume_path(compose_cfg("train", ["+model=treehop"]))
