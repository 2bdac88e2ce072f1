"""`make reproduce`: offline at smoke scale, online at paper scale (models and missing data come from the hub and the
datasets' servers), every table tried when one fails, and a closing summary, one line a table, with a failing
exit status when any failed. A stand-in `python` records each call, so no table really runs."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from hoprag.paths import PROJECT_ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

STAND_IN = """#!/bin/sh
echo "$* offline=${HF_HUB_OFFLINE:-unset}" >> "$CALLS"
case "$*" in *table=broken*) exit 3;; esac
"""


def stand_in(tmp_path):
    """A virtualenv whose `python` records its arguments and HF_HUB_OFFLINE, failing for the table `broken`."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    python = venv / "bin" / "python"
    python.write_text(STAND_IN, encoding="utf-8")
    python.chmod(0o755)
    stamp = venv / ".hoprag-installed"  # newer than pyproject.toml: nothing is installed
    stamp.touch()
    os.utime(stamp, (4_000_000_000, 4_000_000_000))
    return venv


def make_reproduce(tmp_path, tables: str, *scale: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    calls = tmp_path / "calls"
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "MAKEFLAGS", "MFLAGS")}
    proc = subprocess.run(
        ["make", "-s", "reproduce", f"VENV={stand_in(tmp_path)}", f"TABLES={tables}", *(f"SCALE={s}" for s in scale)],
        cwd=PROJECT_ROOT, env={**env, "CALLS": str(calls)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return proc, calls.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("scale, offline", [("smoke", "1"), ("paper", "unset")])
def test_every_table_runs_and_a_summary_ends_it(tmp_path, scale, offline):
    proc, calls = make_reproduce(tmp_path, "sc_rag_t3 broken pruningrag_t3", scale)
    assert calls == [f"reproduce.py table={t} scale={scale} offline={offline}"
                     for t in ("sc_rag_t3", "broken", "pruningrag_t3")]  # fmt: skip
    assert proc.returncode != 0
    summary = proc.stdout.splitlines()[-4:]
    assert summary[0] == f"== make reproduce SCALE={scale}: broken failed =="
    assert summary[1].split() == ["sc_rag_t3", "finished:", f"logs/reproduce/sc_rag_t3/{scale}/table.md"]
    assert summary[2].split() == ["broken", "FAILED", "(exit", "3)"]
    assert summary[3].split()[:2] == ["pruningrag_t3", "finished:"]


def test_smoke_is_the_default_and_all_finished_exits_zero(tmp_path):
    proc, calls = make_reproduce(tmp_path, "sc_rag_t3")
    assert calls == ["reproduce.py table=sc_rag_t3 scale=smoke offline=1"] and proc.returncode == 0
    assert proc.stdout.splitlines()[-2] == "== make reproduce SCALE=smoke: every table finished =="
