"""wandb runs that compare: one per multirun job, named from its overrides, grouped by its sweep, tagged with its
method / data / llm / model, with the predictions as a Table (conf/logger/wandb.yaml, hoprag/utils/loggers.py)."""

from __future__ import annotations

import csv
import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf
from wandb.proto import wandb_internal_pb2

from hoprag.compare import main as compare_main
from hoprag.config import register_resolvers
from hoprag.evaluation.predictions import run_records
from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT
from hoprag.utils.loggers import override_label, predictions_table, run_tags

BLOCK = 32768  # an offline run's `run-<id>.wandb` is a LevelDB-style log of protobuf Records in 32 KiB blocks


def wandb_records(path: Path) -> Iterator[wandb_internal_pb2.Record]:
    """The records of an offline run's transaction log (the file `wandb sync` uploads)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a wandb transaction log"
    pos, chunks = 7, b""  # after the file header
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # a block's tail too short for a chunk header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunks += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last chunk of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(chunks)
            chunks = b""
            yield record


def test_a_2x2_multirun_is_four_named_grouped_tagged_wandb_runs_with_predictions(tmp_path):
    sweep = tmp_path / "sweep"
    env = {
        **os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true",
        "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")), "WANDB_DIR": str(tmp_path / "wandb"),
        "WANDB_DATA_DIR": str(tmp_path / "wandb"), "WANDB_CACHE_DIR": str(tmp_path / "wandb"),
        "WANDB_CONFIG_DIR": str(tmp_path / "wandb"),
    }  # fmt: skip
    command = [
        sys.executable, "eval.py", "-m", "+method=no_retrieval,standard_rag", "+llm.default.seed=1,2", "limit=6", "llm=scripted", "retriever=bm25", "show=0", "logger=wandb", f"hydra.sweep.dir={sweep}",
    ]  # fmt: skip
    proc = subprocess.run(command, check=False, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "anonymous setting" not in proc.stdout + proc.stderr  # Lightning's retired wandb.init argument

    logs = sorted(sweep.glob("*/wandb/offline-run-*/run-*.wandb"))
    assert len(logs) == 4, "one wandb run per job"
    runs = {}
    for log in logs:
        records = list(wandb_records(log))
        (run,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
        artifacts = [r.artifact for r in records if r.WhichOneof("record_type") == "artifact"]
        summary = {u.key or "/".join(u.nested_key) for r in records if r.HasField("summary") for u in r.summary.update}
        runs[run.display_name] = (run, artifacts, summary, log.parents[2])

    assert set(runs) == {  # the swept overrides only: limit, llm, paths... are the same in every job
        "method=no_retrieval,llm.default.seed=1", "method=no_retrieval,llm.default.seed=2",
        "method=standard_rag,llm.default.seed=1", "method=standard_rag,llm.default.seed=2",
    }  # fmt: skip
    for name, (run, artifacts, summary, job_dir) in runs.items():
        method = name.split(",")[0].removeprefix("method=")
        assert run.run_group == str(sweep) and run.job_type == "eval"
        assert {"eval", f"method:{method}", "data:hotpotqa", "llm:scripted"} <= set(run.tags)
        assert {"f1", "em", "n"} <= summary
        (artifact,) = [a for a in artifacts if a.type == "predictions"]
        assert json.loads(artifact.metadata)["n"] == 6
        (entry,) = artifact.manifest.contents
        table = json.loads(Path(entry.local_path).read_text())  # staged for `wandb sync`
        records = run_records(job_dir)
        assert table["columns"][:4] == ["id", "question", "prediction", "golds"] and "f1" in table["columns"]
        assert [row[0] for row in table["data"]] == [r["id"] for r in records]

    # the same sweep, compared: seeds collapse to one row per method, tested against the first method
    assert compare_main([str(sweep), "--out", str(tmp_path / "report"), "--resamples", "200"]) == 0
    with open(tmp_path / "report" / "table.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["run"], r["runs"]) for r in rows] == [("+method=no_retrieval", "2"), ("+method=standard_rag", "2")]
    with open(tmp_path / "report" / "significance.csv", newline="") as f:
        tested = list(csv.DictReader(f))
    assert {r["run"] for r in tested} == {"+method=standard_rag"} and {r["shared"] for r in tested} == {"6"}
    assert "data:image/png;base64," in (tmp_path / "report" / "report.html").read_text()


def test_run_names_keep_what_varies_and_drop_paths_and_run_controls():
    sweep = ["+method=no_retrieval,standard_rag", "+llm.default.seed=1,2", "limit=6", "paths.log_dir=/tmp/x"]
    job = ["+method=standard_rag", "seed=2", "limit=6", "paths.log_dir=/tmp/x"]
    assert override_label(job, sweep) == "method=standard_rag,seed=2"
    single = ["+method=prunerag", "data=2wiki", "~method.reranker", "batch_size=4", "show=0", "llm.threads=1",
              "paths.output_dir=/tmp/run"]  # fmt: skip
    assert override_label(single) == "method=prunerag,data=2wiki,~method.reranker"
    assert override_label(["limit=6"], ["limit=6"]) == "limit=6"  # a sweep varying nothing: every override
    assert override_label(["paths.output_dir=/tmp/run"]) == ""  # → the task name


def test_composed_without_a_run_the_wandb_config_still_resolves(compose_cfg, monkeypatch):
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)  # no Hydra job, as in any compose() outside an app
    cfg = compose_cfg("eval", ["+method=standard_rag", "llm=scripted"])
    wandb = OmegaConf.to_container(cfg.logger.wandb, resolve=True)
    assert (wandb["name"], wandb["group"], wandb["job_type"]) == ("eval", None, "eval")
    assert wandb["tags"] == ["eval", "data:hotpotqa"]  # data by its name; the llm and method are choices only


@pytest.mark.parametrize(
    ("config", "overrides", "name", "tags"),
    [
        ("eval", ["+method=standard_rag", "llm=smollm2"], "method=standard_rag,llm=smollm2",
         ["eval", "method:standard_rag", "data:hotpotqa", "llm:smollm2-135m-instruct"]),
        ("train", ["+model=treehop", "seed=3"], "model=treehop,seed=3", ["train", "model:treehop"]),
    ],
)  # fmt: skip
def test_a_single_run_is_named_from_its_overrides_in_no_group(monkeypatch, tmp_path, config, overrides, name, tags):
    monkeypatch.setattr(HydraConfig.instance(), "cfg", None)  # restored afterwards: later tests see no job
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config, [*overrides, f"paths.output_dir={tmp_path}"], return_hydra_config=True)
    GlobalHydra.instance().clear()
    HydraConfig.instance().set_config(cfg)  # what a Hydra app does for its job
    wandb = OmegaConf.to_container(cfg.logger.wandb, resolve=True)
    assert (wandb["name"], wandb["group"], wandb["job_type"], wandb["tags"]) == (name, None, config, tags)


def test_predictions_table_has_a_column_per_score():
    records = [
        {"id": "a", "question": "q1", "prediction": "x", "golds": ["x", "y"], "scores": {"em": 1.0, "f1": 1.0}},
        {"id": "b", "question": "q2", "prediction": "z", "golds": ["w"], "scores": {"em": 0.0, "f1": 0.5}},
    ]
    columns, rows = predictions_table(records)
    assert columns == ["id", "question", "prediction", "golds", "em", "f1"]
    assert rows == [["a", "q1", "x", "x | y", 1.0, 1.0], ["b", "q2", "z", "w", 0.0, 0.5]]


def test_tags_take_data_and_llm_by_name_and_the_rest_by_choice():
    cfg = OmegaConf.create({"data": {"name": "2wiki"}, "llm": {"model": "m"}})
    choices = {"method": "prunerag", "data": "flashrag", "llm": "vllm", "experiment": "prunerag_paper", "paths": "x"}
    assert run_tags(cfg, choices, ["eval", "paper"]) == [
        "eval", "paper", "method:prunerag", "data:2wiki", "llm:vllm", "experiment:prunerag_paper",
    ]  # fmt: skip


def test_the_logger_passes_anonymous_to_wandb_only_when_it_was_set(tmp_path):
    from hoprag.utils.wandb_logger import WandbLogger

    assert "anonymous" not in WandbLogger(offline=True, save_dir=str(tmp_path))._wandb_init
    assert WandbLogger(offline=True, save_dir=str(tmp_path), anonymous=True)._wandb_init["anonymous"] == "allow"
