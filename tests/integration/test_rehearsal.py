"""scale=rehearsal end to end (issue 42 item 7): a paper-scale table's jobs run here exactly as at paper scale
(vLLM with Qwen3-8B by hub id, wiki-18 by its FlashRAG file name, a 500-question draw with the paper's seed), with
the stand-ins of tests/standins/ in their place; the preflight finds every need met once the rehearsal has built
the index a user would build with `build_index.py` and trained the exports its rows require (`train.py`, under
the rehearsal's root), and the table's footer says what was stood in for.

The quick test runs one row on one dataset; every row of the seven tables (`python reproduce.py table=<t>
scale=rehearsal`) is the slow test."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from hoprag.paths import PROJECT_ROOT
from hoprag.reproduce import Table, rehearsal, reproduce
from hoprag.reproduce.plan import RUNS

pytestmark = pytest.mark.real
TABLES = sorted(p.stem for p in (PROJECT_ROOT / "conf" / "table").glob("*.yaml"))


def paper_table() -> Table:
    """A one-row table whose paper scale is PruneRAG Table 1's: Qwen3-8B on vLLM over wiki-18, 500 drawn."""
    return Table.parse({
        "name": "rehearsed", "title": "A paper-scale row, rehearsed", "digest": "spec/prunerag.md §6.1",
        "baseline": "rag",
        "scales": {
            "smoke": {"label": "unused", "overrides": ["aids=small_model", "llm=scripted"]},
            "paper": {"label": "Qwen3-8B, BM25 over wiki-18",
                      "overrides": ["aids=none", "llm=vllm", "llm.model=Qwen/Qwen3-8B", "llm.name=qwen3-8b",
                                    "llm.max_model_len=40960", "retriever=bm25",
                                    "data.corpus=retrieval-corpus/wiki18_100w.jsonl", "data.sample=500",
                                    "data.seed=3407"]},
        },
        "groups": {"hotpotqa": {"label": "HotpotQA", "overrides": {
            "all": ["data=hotpotqa"], "paper": ["data.questions=hotpotqa/hotpot_dev_distractor_v1.json"]}}},
        "metrics": {"f1": {"label": "F1", "key": "f1"}},
        "rows": [{"id": "rag", "name": "Standard RAG", "overrides": ["+method=standard_rag", "method.k=5"],
                  "paper": {"hotpotqa/f1": 55.6}}],
    })  # fmt: skip


def test_a_paper_row_runs_here_with_stand_ins_and_says_so(tmp_path):
    out = tmp_path / "out"
    _, unfinished = reproduce(paper_table(), "rehearsal", out, ["show=0", "logger=csv"], resamples=200)
    assert unfinished == []
    run = out / RUNS / "rag" / "hotpotqa"
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["run"]["n"] == rehearsal.QUESTIONS and metrics["run"]["aids"] == "none"
    assert metrics["run"]["sample"]["seed"] == 3407  # the paper's draw, of fewer questions
    assert metrics["metrics"]["cost/mean/reasoning_tokens"] > 0  # Qwen3's stand-in thinks first: counted
    md = (out / "table.md").read_text()
    assert "**Rehearsal: code paths, not figures.**" in md and "Stood in for: model weights" in md
    assert "llm=vllm" in md and "data.sample=2" in md


@pytest.mark.slow
@pytest.mark.parametrize("name", TABLES)
def test_every_row_of_every_table_runs_at_rehearsal_scale(tmp_path, name):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="reproduce", overrides=[f"table={name}"])
    table = Table.parse(OmegaConf.to_container(cfg.table, resolve=True))
    _, unfinished = reproduce(table, "rehearsal", tmp_path / name, ["show=0", "logger=csv"], resamples=200)
    assert unfinished == []
    with open(tmp_path / name / "table.csv", encoding="utf-8") as f:
        skips = {r["reason"] for r in csv.DictReader(f) if r["status"] == "skipped"}
    # skipped only where the paper names what hoprag does not implement (a method, or a dataset's loader)
    assert all("not implemented" in reason or "no loader" in reason for reason in skips), skips
    exports = [r.path for row in rehearsal.relocated(table).rows for r in row.requires["rehearsal"]]
    assert all(Path(e).is_dir() and Path(e).is_relative_to(rehearsal.root()) for e in exports), exports
