"""Every config group composes, resolves and instantiates (catches config rot early)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hoprag.data import QADataset
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import Embedder

CONF = PROJECT_ROOT / "conf"


# generic configs leave their files to the command line: a bundled FlashRAG pair fills them
MANDATORY = {
    "flashrag": ["data.questions=bamboogle/test.jsonl", "data.corpus=bamboogle/wiki18_passages.jsonl"],
    # not among the bundled samples: the hand-written official-format fixture, all three query types
    "multihop_rag": [f"paths.data_dir={PROJECT_ROOT / 'tests' / 'fixtures'}", "data.types=null"],
    # ASQA and AmbigDocs: hand-written official-format fixtures, without their open corpus
    "asqa": [f"paths.data_dir={PROJECT_ROOT / 'tests' / 'fixtures'}", "data.corpus=null"],
    # (the AmbigDocs fixture holds two of the few-shot exemplars' questions, which the config leaves out)
    "ambigdocs": [f"paths.data_dir={PROJECT_ROOT / 'tests' / 'fixtures'}", "data.corpus=null",
                  "data.exclude_questions=[]"],
    # HippoRAG 2's NQ and PopQA subsets: hand-written fixtures in their layout
    "nq": [f"paths.data_dir={PROJECT_ROOT / 'tests' / 'fixtures'}"],
    "popqa": [f"paths.data_dir={PROJECT_ROOT / 'tests' / 'fixtures'}"],
}


def group(name: str) -> list[str]:
    return sorted(p.stem for p in (CONF / name).glob("*.yaml"))


@pytest.mark.parametrize("data", group("data"))
def test_every_dataset_config_builds_a_dataset(compose_cfg, data):
    cfg = compose_cfg("eval_retrieval", [f"data={data}", "limit=3", *MANDATORY.get(data, [])])
    dataset = instantiate(cfg.data)
    assert isinstance(dataset, QADataset)
    assert dataset.name == data
    assert len(dataset) == 3  # loads the bundled sample from the data root


@pytest.mark.parametrize("embedder", group("embedder"))
def test_every_embedder_config_instantiates_without_loading_weights(compose_cfg, embedder):
    cfg = compose_cfg("build_index", [f"embedder={embedder}"])
    emb = instantiate(cfg.embedder)
    assert isinstance(emb, Embedder)
    assert emb.name == cfg.embedder.name


@pytest.mark.parametrize("retriever", group("retriever"))
@pytest.mark.parametrize("index", group("index"))
def test_retriever_and_index_configs_resolve(compose_cfg, retriever, index):
    cfg = compose_cfg("build_index", [f"retriever={retriever}", f"index={index}"])
    resolved = OmegaConf.to_container(cfg.retriever, resolve=True)
    assert resolved["_partial_"] is True
    assert callable(instantiate(cfg.retriever))


def test_eval_retrieval_evaluates_three_retrievers_by_default(compose_cfg):
    cfg = compose_cfg("eval_retrieval")
    assert set(cfg.retrievers) == {"dense", "bm25", "rrf"}
    assert cfg.retrievers.rrf.dense._target_ == cfg.retrievers.dense._target_
    assert list(cfg.ks) == [2, 5, 10]


def test_paths_do_not_depend_on_working_directory(compose_cfg, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    cfg = compose_cfg("build_index")
    assert Path(cfg.paths.root_dir) == PROJECT_ROOT
    assert cfg.paths.index_dir.endswith("/indexes")


def test_logger_configs_instantiate(compose_cfg):
    cfg = compose_cfg("eval_retrieval", ["logger=csv"])
    loggers = [instantiate(c) for c in cfg.logger.values()]
    assert type(loggers[0]).__name__ == "CSVLogger"
