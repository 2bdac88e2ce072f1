"""`train.py +model=nli_verifier` end to end on a handful of real pairs (selection on held-aside training pairs,
the reported sets scored only in the test stage), then the export through the verifier and
`scripts/components/eval_nli.py`, run as users run them."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hoprag.paths import PROJECT_ROOT, data_root
from hoprag.verifiers import CrossEncoderVerifier

SHRUNK = [
    "model.datamodule.train=[{file: nli/multi_nli_train_20k.jsonl, start: 0, stop: 48}]",
    "model.datamodule.val.heldout.stop=19024",
    "model.datamodule.test.matched.stop=24",
    "model.datamodule.test.snli.stop=16",
    "model.datamodule.batch_size=16",
    "trainer.max_epochs=1",
    "trainer.log_every_n_steps=1",
    "model.module.train_minutes=null",
    "logger=csv",
]


def run(args: list[str]) -> str:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.slow
def test_train_export_reload_and_evaluate(tmp_path):
    published = tmp_path / "cache" / "verifiers" / "minilm-nli"
    cache = f"paths.cache_dir={tmp_path}/cache"
    out = run(["train.py", "+model=nli_verifier", *SHRUNK, f"hydra.run.dir={tmp_path}/run", cache])
    assert "best/val/acc_heldout" in out and "test/acc_matched" in out and "exported best weights" in out
    assert sorted(p.name for p in published.iterdir()) == sorted(p.name for p in (tmp_path / "run" / "export").iterdir())
    rows = list(csv.DictReader(next((tmp_path / "run" / "csv").rglob("metrics.csv")).open()))
    logged = {k for row in rows for k, v in row.items() if v}
    assert {"train/loss", "val/acc_heldout", "test/acc_matched", "test/acc_snli", "test/acc_matched_contradiction"} <= logged
    assert not any(key.startswith(("val/acc_matched", "val/acc_snli")) for key in logged)  # never seen by selection

    export = tmp_path / "run" / "export"
    config = json.loads((export / "config.json").read_text())
    assert config["id2label"] == {"0": "entailment", "1": "neutral", "2": "contradiction"}
    verifier = CrossEncoderVerifier(str(export), device="cpu")
    scores = np.array(verifier([("A dog runs in the park.", "An animal is outside."), ("It rains.", "It is dry.")]))
    np.testing.assert_allclose(scores.sum(axis=1), 1.0, atol=1e-6)
    assert verifier.columns == [0, 1, 2]

    data = data_root() / "nli" / "snli_validation.jsonl"
    report_line = run(["scripts/components/eval_nli.py", str(export), str(data), "--limit", "20"]).strip().splitlines()[-1]
    report = json.loads(report_line)
    assert report["pairs"] == 20 and 0.0 <= report["accuracy"] <= 100.0
    assert set(report["per_label"]) == {"entailment", "neutral", "contradiction"}
    assert sum(sum(row.values()) for row in report["confusion"].values()) == 20
    assert report["per_source"].keys() == {"snli_validation"}


def test_eval_nli_rejects_a_bad_label_with_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"premise": "a", "hypothesis": "b", "label": 0}\n{"premise": "a", "hypothesis": "b", "label": -1}\n')
    proc = subprocess.run(
        [sys.executable, "scripts/components/eval_nli.py", str(Path("nowhere")), str(bad)],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    assert f"{bad}, line 2: label must be 0, 1 or 2" in proc.stderr and "Traceback" not in proc.stderr
