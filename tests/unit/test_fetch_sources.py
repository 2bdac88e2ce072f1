"""Every data file a paper table reads at scale=paper has a source in hoprag/data/fetch.py (a URL it downloads, a
hub file, or the command that puts an archive's file in place), and every download command works with today's
tools: the hub's CLI is `hf download` (huggingface_hub no longer ships `huggingface-cli`). No network: the hub
call is monkeypatched."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from omegaconf import DictConfig, ListConfig

from hoprag.data import fetch
from hoprag.paths import data_root
from hoprag.sources.api.source import COMPANY_TABLE
from tests.tables import TABLES, composed, load

FILE_KEYS = ("questions", "corpus")  # a QADataset's files, wherever a config holds one (eval data, a labeller's)
API_TARGET = "hoprag.sources.APISource"  # reads the company table (COMPANY_TABLE) unless told another
# the bundled samples (the data root, README "Data"): `+model=treehop` validates over them (conf/open_corpus)
BUNDLED = data_root()


def data_files(node) -> set[str]:
    """The data-root files a composed config reads: every `questions` / `corpus` string, and the mock API's
    company table; nodes whose interpolations need a run (Hydra's runtime) are passed over."""
    found: set[str] = set()
    if isinstance(node, DictConfig):
        if node.get("_target_") == API_TARGET:
            found.add(node.get("company_names", COMPANY_TABLE))
        for key in node.keys():
            try:
                value = node[key]
            except Exception:  # an interpolation that resolves only inside a run
                continue
            if key in FILE_KEYS and isinstance(value, str):
                found.add(value)
            else:
                found |= data_files(value)
    elif isinstance(node, ListConfig):
        for item in node:
            found |= data_files(item)
    return {f for f in found if f and not Path(f).is_absolute()}


def train_overrides(command: str) -> list[str] | None:
    """The overrides of a requirement's `python train.py ...` command (its run directory aside), else None."""
    words = shlex.split(command)
    if words[:2] != ["python", "train.py"]:
        return None
    return [w for w in words[2:] if not w.startswith("hydra.")]


def paper_files(compose_cfg, tmp_path: Path, name: str) -> dict[str, str]:
    """file → the job that reads it: every paper job of the table, and the train.py runs its rows require."""
    files = {}
    for row, group, cfg in composed(compose_cfg, tmp_path, name, "paper"):
        files.update(dict.fromkeys(data_files(cfg), f"{name} {row}/{group}"))
    for row in load(compose_cfg, name, "paper").rows:
        for need in row.requires["paper"]:
            overrides = train_overrides(need.command)
            if overrides is not None:
                cfg = compose_cfg("train", overrides)
                files.update(dict.fromkeys(data_files(cfg), f"{name} {row.id}: {need.command}"))
    return files


@pytest.mark.parametrize("name", TABLES)
def test_every_file_a_paper_table_reads_has_a_source(compose_cfg, tmp_path, name):
    files = paper_files(compose_cfg, tmp_path, name)
    assert files, f"{name} reads no data file at paper scale"
    missing = {f: job for f, job in files.items() if f not in fetch.SOURCES and not (BUNDLED / f).is_file()}
    assert not missing, f"no source in hoprag/data/fetch.py for {missing}"
    for f in files.keys() & fetch.SOURCES.keys():
        source = fetch.SOURCES[f]
        assert source.url.startswith(("http://", "https://"))
        assert source.kind != "manual" or source.command or "huggingface.co" in source.url, f


def test_the_tables_read_the_files_the_issue_names(compose_cfg, tmp_path):
    """The walk finds what the tables are known to read (so the test above cannot pass by finding nothing)."""
    read = set()
    for name in TABLES:
        read |= set(paper_files(compose_cfg, tmp_path, name))
    assert {
        "hotpotqa/hotpot_dev_fullwiki_v1.json",  # treerare_t1
        "2wikimultihopqa/dev.json",
        "2wikimultihopqa/train.json",  # treehop_t2's required TreeHop training run
        "multihop_rag/MultiHopRAG.json",
        "multihop_rag/corpus.json",
        "crag/crag_task_1_and_2_dev_v4.jsonl.bz2",
        "crag/crag_task_3_dev_v4.tar.bz2",  # pruningrag_t8's 50-page rows
        "crag/company_name.dict",  # the mock API's company table
        "retrieval-corpus/wiki18_100w.jsonl",
        "asqa/ASQA.json",
        "ambigdocs/test.json",
    } <= read


@pytest.mark.parametrize("name", sorted(n for n, s in fetch.SOURCES.items() if s.command))
def test_commands_use_todays_tools(name):
    command = fetch.SOURCES[name].command
    assert "huggingface-cli" not in command  # huggingface_hub ships `hf` only (its deprecated_cli exits 1)
    assert "{root}" in command and name.split("/")[0] in command
    for part in command.split("&&"):
        words = shlex.split(part.format(root="/data"))
        if words[:2] == ["hf", "download"]:  # hf download REPO_ID [FILENAMES]... --repo-type dataset --local-dir DIR
            assert words[words.index("--repo-type") + 1] == "dataset" and "--local-dir" in words


def test_hub_files_go_through_hf_hub_download_into_their_folder(tmp_path, monkeypatch):
    import huggingface_hub

    calls = []

    def fake(**kwargs):
        calls.append(kwargs)
        target = Path(kwargs["local_dir"]) / kwargs["filename"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("[]", encoding="utf-8")
        return str(target)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HOPRAG_OFFLINE", raising=False)
    for name in ("multihop_rag/corpus.json", "bamboogle/test.jsonl", "rm3qa/RM3QA_5web.jsonl.bz2"):
        assert fetch.ensure_file(name, tmp_path) == tmp_path / name and (tmp_path / name).is_file()
    assert [(c["repo_id"], c["filename"], c["repo_type"]) for c in calls] == [
        ("yixuantt/MultiHopRAG", "corpus.json", "dataset"),
        ("RUC-NLPIR/FlashRAG_datasets", "bamboogle/test.jsonl", "dataset"),
        ("fishsure/RM3QA", "RM3QA_5web.jsonl.bz2", "dataset"),
    ]


def test_a_missing_archive_file_names_its_command(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(FileNotFoundError, match=r"hf download RUC-NLPIR/FlashRAG_datasets .*--repo-type dataset"):
        fetch.ensure_file("retrieval-corpus/wiki18_100w.jsonl", tmp_path)
    with pytest.raises(FileNotFoundError, match=r"crag_task_3_dev_v4\.tar\.bz2\.part\$i"):
        fetch.ensure_file("crag/crag_task_3_dev_v4.tar.bz2", tmp_path)

