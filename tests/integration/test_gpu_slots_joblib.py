"""`gpus_per_job` through the real entry point: `eval.py -m` with Hydra's joblib launcher, two workers, one
stand-in GPU each (`CUDA_VISIBLE_DEVICES`; nothing starts CUDA); each run records the GPUs it was given."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hoprag.paths import PROJECT_ROOT
from hoprag.reproduce import reproduce
from hoprag.utils import gpu_slots
from tests.integration.test_reproduce_entry import small_table


def test_two_jobs_of_a_joblib_multirun_run_on_different_gpus(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="0,1", HOPRAG_GPU_LOCKS=str(tmp_path / "locks"), HF_HUB_OFFLINE="1")
    env.pop(gpu_slots.SLOT, None)
    sweep = tmp_path / "sweep"
    done = subprocess.run(
        [sys.executable, "eval.py", "-m", "+method=no_retrieval", "llm=scripted", "data=hotpotqa", "limit=1",
         "show=0,1", "logger=csv", "gpus_per_job=1", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
         f"hydra.sweep.dir={sweep}", f"paths.cache_dir={tmp_path / 'cache'}"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    gpus = sorted(json.loads((sweep / str(i) / "metrics.json").read_text())["run"]["gpus"] for i in range(2))
    assert gpus == ["0", "1"]


def test_a_tables_rows_spread_over_the_gpus_with_joblib(tmp_path, monkeypatch):
    """reproduce.py gives `gpus_per_job` to each row's job (its rows sweeper), and joblib's two workers take one
    stand-in GPU each."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    monkeypatch.setenv("HOPRAG_GPU_LOCKS", str(tmp_path / "locks"))
    monkeypatch.delenv(gpu_slots.SLOT, raising=False)
    out = tmp_path / "out"
    launcher = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    _, unfinished = reproduce(small_table(tmp_path), "smoke", out, ["show=0", "logger=csv", "gpus_per_job=1"],
                              launcher, resamples=200)  # fmt: skip
    assert unfinished == []
    runs = [out / "runs" / row / "hotpotqa" / "metrics.json" for row in ("rag", "closed")]
    assert sorted(json.loads(r.read_text())["run"]["gpus"] for r in runs) == ["0", "1"]
