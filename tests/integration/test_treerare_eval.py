"""TreeRare end to end through eval.py on the bundled HotpotQA sample: real spaCy trees, real BM25 over the
pooled corpus, the scripted LLM config; then show_treerare.py on the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT


def test_eval_py_runs_treerare_offline_and_records_trees_costs_and_failures(tmp_path):
    run_dir = tmp_path / "run"
    env = {**os.environ, "HOPRAG_CACHE": str(share_conversions(tmp_path / "cache")),
           "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    command = [
        sys.executable, "eval.py", "+experiment=treerare", "data=hotpotqa", "limit=4", "llm=scripted", "~logger",
        "aids=small_model", f"hydra.run.dir={run_dir}",  # the scripted replies continue the QG prefill f"paths.index_dir={tmp_path / 'indexes'}",
    ]  # fmt: skip
    proc = subprocess.run(command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = json.loads((run_dir / "metrics.json").read_text())["metrics"]
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
    # the scripted config answers "Answer: yes" to QG (after the "response: " prefill: one query, "Answer:
    # yes"), the first passage's title to SAG, and "Answer: yes" without a FINAL marker to FAG
    assert metrics["parse_failures"] == 4 and [r["prediction"] for r in records] == ["yes"] * 4
    for r in records:
        nodes = r["trace"]["tree"]["nodes"]
        assert r["cost"]["llm_calls"] == 2 * len(nodes) + 1 == 2 * r["stats"]["processed_nodes"] + 1
        assert r["cost"]["retrieval_calls"] == sum(len(n["queries"]) for n in nodes)
        assert r["trace"]["tree"]["kind"] == "dt" and nodes[-1]["height"] == r["stats"]["tree_height"]
        assert all(n["evidence"][0].startswith("Answer: ") for n in nodes)  # SAG read the BM25 passages
    assert metrics["method/qg_fallbacks"] == 0 and metrics["method/traversal_fallback"] == 0
    assert metrics["cost/mean/passages_read"] > 0 and "cover_em" in metrics
    show = subprocess.run(
        [sys.executable, "scripts/runs/show_treerare.py", str(run_dir), "-n", "1"],
        cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert show.returncode == 0, show.stderr[-2000:]
    assert records[0]["question"] in show.stdout and records[0]["trace"]["tree"]["nodes"][0]["phrase"] in show.stdout
