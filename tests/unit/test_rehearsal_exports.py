"""scale=rehearsal's trained exports: what a row `requires` is looked for, trained and read under the rehearsal's
root (never under the checkout's logs/ or its cache's routers/, where a paper run reads), the training commands
run are only the table's own (after the index builds, with the CPU swaps), and a second rehearsal trains nothing;
the stand-in data holds what the trainings read (2Wiki's train.json, CRAG's router-training portion)."""

from __future__ import annotations

import bz2
import contextlib
import json
import shlex
import tarfile
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hoprag.config import register_resolvers
from hoprag.paths import PROJECT_ROOT, cache_root, data_root
from hoprag.reproduce import Table, plan, rehearsal, runner
from hoprag.reproduce.rehearsal import located, provide, relocated
from tests.standins import data

TRAIN = "python train.py +model=treehop hydra.run.dir=logs/t"
EXPORT = "logs/t/export"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """The checkout's cache (HOPRAG_CACHE) in `tmp_path`, so the rehearsal's root is `<it>/rehearsal`."""
    monkeypatch.setenv("HOPRAG_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def exported_table(tmp_path: Path, requires: str = EXPORT, command: str = TRAIN) -> Table:
    """A one-row table whose paper scale reads a trained export (`+data.exclude_trained=<it>`) that `requires`
    names, with `command` making it."""
    scale = {"label": "test", "overrides": ["aids=none", "llm=scripted", "retriever=bm25"]}
    return Table.parse({
        "name": "t", "title": "T", "digest": "spec/none.md", "baseline": "row",
        "scales": {"smoke": {**scale, "overrides": ["aids=small_model", "llm=scripted"]}, "paper": scale},
        "groups": {"hotpotqa": {"label": "HotpotQA", "overrides": ["data=hotpotqa"]}},
        "metrics": {"f1": {"label": "F1", "key": "f1"}},
        "rows": [{"id": "row", "name": "Row",
                  "overrides": ["+method=standard_rag", f"+data.exclude_trained={requires}"],
                  "requires": {"paper": [{"path": requires, "command": command}]}}],
    })  # fmt: skip


def test_a_checkout_path_and_a_cache_path_lie_under_the_rehearsals_root(cache):
    home = cache / "rehearsal"
    assert located("logs/treehop_2wiki_bge_m3/export") == home / "logs" / "treehop_2wiki_bge_m3" / "export"
    assert located(PROJECT_ROOT / "logs" / "x") == home / "logs" / "x"
    assert located(cache / "routers" / "llama8b-crag-lora") == home / "cache" / "routers" / "llama8b-crag-lora"
    assert located(home / "logs" / "x") == home / "logs" / "x"  # already the rehearsal's
    with pytest.raises(ValueError, match="no place"):
        located("/elsewhere/export")


def test_with_the_default_cache_nothing_lands_in_the_checkouts_logs_or_routers(monkeypatch):
    monkeypatch.delenv("HOPRAG_CACHE", raising=False)
    for path in ("logs/treehop_2wiki_bge_m3/export", cache_root() / "routers" / "llama8b-crag-lora"):
        moved = located(path)
        assert moved.is_relative_to(PROJECT_ROOT / ".cache" / "rehearsal"), moved
        assert not moved.is_relative_to(PROJECT_ROOT / "logs") and not moved.is_relative_to(cache_root() / "routers")


def test_the_rehearsal_scale_checks_trains_and_reads_its_own_export_and_the_paper_scale_is_untouched(cache, tmp_path):
    table = relocated(exported_table(tmp_path))
    export = cache / "rehearsal" / "logs" / "t" / "export"
    (requirement,) = table.rows[0].requires["rehearsal"]
    assert requirement.path == str(export)
    assert shlex.split(requirement.command) == [*shlex.split(TRAIN)[:3], f"hydra.run.dir={export.parent}",
                                                f"paths.log_dir={cache / 'rehearsal' / 'logs'}"]  # fmt: skip
    (job,) = plan(table, "rehearsal", tmp_path / "out")
    assert f"+data.exclude_trained={export}" in job.overrides and "+method=standard_rag" in job.overrides
    (paper,) = plan(table, "paper", tmp_path / "out")
    assert f"+data.exclude_trained={EXPORT}" in paper.overrides
    assert table.rows[0].requires["paper"][0].command == TRAIN


@pytest.mark.parametrize("name", ["treehop_t2", "pruningrag_t3", "pruningrag_t8"])
def test_the_paper_tables_exports_are_the_rehearsals_own(tmp_path, name):
    register_resolvers()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="reproduce", overrides=[f"table={name}"])  # as reproduce.py resolves it
    table = relocated(Table.parse(OmegaConf.to_container(cfg.table, resolve=True)))
    home = rehearsal.root()
    required = [r for row in table.rows for r in row.requires["rehearsal"]]
    assert required and all(Path(r.path).is_relative_to(home) for r in required)
    assert all(shlex.split(r.command)[1] == "train.py" for r in required)
    named = [o for j in plan(table, "rehearsal", tmp_path) for o in j.overrides if "export" in o or "routers" in o]
    assert all(Path(o.split("=", 1)[1]).is_relative_to(home) for o in named), named


def test_provide_builds_indexes_then_trains_the_tables_exports_with_the_cpu_swaps(monkeypatch):
    ran = []
    monkeypatch.setattr(rehearsal.subprocess, "run", lambda args, **kw: ran.append(args[1:]))
    build = "python build_index.py data=2wiki retriever=dense"
    provide([TRAIN, build], exports={TRAIN})
    assert ran == [shlex.split(build)[1:], [*shlex.split(TRAIN)[1:], *rehearsal.TRAINING]]
    assert "trainer=cpu" in rehearsal.TRAINING


@pytest.mark.parametrize("command", ["python train.py +model=other", "rm -rf logs", "python eval.py +method=x"])
def test_provide_refuses_any_other_command_before_running_anything(monkeypatch, command):
    ran = []
    monkeypatch.setattr(rehearsal.subprocess, "run", lambda args, **kw: ran.append(args))
    with pytest.raises(ValueError, match="only builds indexes and trains the exports its table requires"):
        provide(["python build_index.py data=2wiki", command], exports={TRAIN})
    assert ran == []


def test_a_rehearsal_trains_a_missing_export_once_and_its_jobs_read_it(cache, tmp_path, monkeypatch):
    provided, launched = [], []

    def train(commands, exports):
        provided.append(list(commands))
        (cache / "rehearsal" / "logs" / "t" / "export").mkdir(parents=True)

    monkeypatch.setattr(rehearsal, "applied", lambda scale: contextlib.nullcontext({}))  # no stand-ins needed
    monkeypatch.setattr(rehearsal, "provide", train)
    monkeypatch.setattr(runner, "launch", lambda jobs, out, hydra: launched.append(jobs) or 0)
    table = exported_table(tmp_path)
    for _ in range(2):
        runner.reproduce(table, "rehearsal", tmp_path / "out", index_in_run=["rehearsal"], resamples=10)
    command = relocated(table).rows[0].requires["rehearsal"][0].command
    assert provided == [[command]]  # the second rehearsal found the export
    assert [[j.skip for j in jobs] for jobs in launched] == [[""], [""]]
    assert f"+data.exclude_trained={cache / 'rehearsal' / 'logs' / 't' / 'export'}" in launched[0][0].overrides


def test_the_stand_in_data_holds_2wikis_train_file_and_crags_router_training_portion(tmp_path):
    bundled, shared, root = data_root(), tmp_path / "shared", tmp_path / "data"
    for name in set(data.COPIES.values()):  # the bundled files, CRAG's 10 questions without their pages (quicker)
        (shared / name).parent.mkdir(parents=True, exist_ok=True)
        (shared / name).symlink_to(bundled / name)
    with bz2.open(bundled / "crag" / "crag_task1_dev_10.jsonl.bz2", "rt", encoding="utf-8") as f:
        questions = [{**json.loads(line), "search_results": []} for line in f]
    (shared / "crag" / "crag_task1_dev_10.jsonl.bz2").write_bytes(
        bz2.compress("".join(json.dumps(q) + "\n" for q in questions).encode()))
    crag = root / data.CRAG
    crag.parent.mkdir(parents=True)
    crag.write_bytes(bz2.compress(b'{"split": 0}\n'))  # an older layout's file is replaced
    (root / data.WIKI18).parent.mkdir(parents=True)
    (root / data.WIKI18).touch()  # kept as it is (building it takes a while)
    data.lay_out(root, shared)
    train = bundled / "2wikimultihopqa" / "train_500.json"
    assert (root / "2wikimultihopqa" / "train.json").read_bytes() == train.read_bytes()
    rehearsed = [json.loads(line) for line in bz2.open(crag, "rt", encoding="utf-8")]
    assert [q["split"] for q in questions] == [1] * 10  # the sample's: all of the router-training portion
    assert [q["split"] for q in rehearsed] == [0] * data.VALIDATION + [1] * (10 - data.VALIDATION)
    assert [q["query"] for q in rehearsed] == [q["query"] for q in questions]
    with tarfile.open(root / data.CRAG_TASK3) as tar:
        parts = [tar.extractfile(m).read().decode() for m in tar.getmembers()]
    assert [json.loads(line) for part in parts for line in part.splitlines()] == rehearsed
