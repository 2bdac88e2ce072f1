"""Indexes: at a scale whose jobs may not build their own (`paper`: wiki-18 takes hours on a GPU, never inside an
eval job), every dense or BM25 index the job's `retriever` searches is a need, found where the retriever will
look for it (`hoprag.retrieval.index_dirs`: corpus fingerprint + the settings that decide the index) and made
by the exact `python build_index.py ...` that builds it there. A corpus file's fingerprint is read from its
corpus store (built by that same command); a closed corpus is pooled from the questions, as the job pools it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hydra.utils import instantiate

from hoprag.data.corpus_store import as_corpus
from hoprag.data.store_build import stored_corpus
from hoprag.reproduce.preflight.files import data_needs
from hoprag.reproduce.preflight.host import Host, located
from hoprag.reproduce.preflight.need import MISSING, OK, UNKNOWN, Need
from hoprag.reproduce.preflight.view import JobView, objects
from hoprag.reproduce.spec import as_lines
from hoprag.retrieval.index_dirs import DEFAULT_INDEX, bm25_index_dir, build_settings, dense_index_dir
from hoprag.retrieval.manifest import MANIFEST

DENSE = "hoprag.retrieval.DenseRetriever"
BM25 = "hoprag.retrieval.BM25Retriever"
BM25_KEYS = ("k1", "b", "method", "stemmer")
# the job's own value overrides that build_index.py shares (the dataset's, the index's, where caches live)
SHARED = ("data.", "embedder.", "index.", "retriever.", "paths.")
NOT_CORPUS = ("data.limit", "data.sample", "data.seed")  # which questions a job asks: not the corpus
POOLED_FILE = "a corpus file pooled with extra corpora is read whole by the job: not fingerprinted before it"


def index_parts(view: JobView) -> list[dict[str, Any]]:
    """The dense and BM25 retrievers inside the job's `retriever` (itself, or a fusion's parts), as build_index.py
    finds them; none when the method does not search the dataset's corpus."""
    return [o for o in objects(view.sections.get("retriever")) if o["_target_"] in (DENSE, BM25)]


def index_needs(view: JobView, host: Host) -> Iterator[Need]:
    data = view.sections["data"]
    parts = index_parts(view) if view.searches else []
    if not parts:
        return
    command = build_command(view, any(p["_target_"] == DENSE for p in parts))
    pooled_file = data.get("corpus") is not None and not _corpus_file(data)
    fingerprint, why = (None, POOLED_FILE) if pooled_file else corpus_fingerprint(data, host)
    for part in parts:
        what = f"{_describe(part)} index of {_corpus_name(data)}"
        if fingerprint is None:
            yield Need("index", what, command, UNKNOWN if pooled_file else MISSING, why)
            continue
        directory = index_dir(part, fingerprint)
        built = directory is not None and (directory / MANIFEST).is_file()
        yield Need("index", what, command, OK if built else MISSING, "" if built else f"no index in {directory}")


def index_dir(part: Mapping[str, Any], fingerprint: str) -> Path | None:
    """Where the retriever `part` loads its index of the corpus `fingerprint` from."""
    if part["_target_"] == DENSE:
        settings = build_settings({**DEFAULT_INDEX, **(part.get("index") or {})})
        return dense_index_dir(part["cache_dir"], instantiate(part["embedder"]), fingerprint, settings)
    return bm25_index_dir(part["cache_dir"], fingerprint, {k: part[k] for k in BM25_KEYS})


def build_command(view: JobView, dense: bool) -> str:
    """`python build_index.py` with the job's corpus, retriever, embedder and index choices and the value overrides
    it shares with build_index.yaml, so that it builds the index in the directory the job reads."""
    data = view.sections["data"]
    corpus = [f"corpus={data['corpus']}"] if _corpus_file(data) else [f"data={view.choices['data']}"]
    groups = [f"retriever={view.choices['retriever']}"]
    if dense:
        groups += [f"embedder={view.choices['embedder']}", f"index={view.choices['index']}"]
    values = [o for o in view.overrides if _key(o).startswith(SHARED) and _key(o) not in NOT_CORPUS
              and not (_corpus_file(data) and _key(o).startswith("data."))]  # fmt: skip
    return as_lines(["python", "build_index.py", *corpus, *groups, *values])


def corpus_fingerprint(data: Mapping[str, Any], host: Host) -> tuple[str | None, str]:
    """The fingerprint of the job's corpus, or None and why not (a file missing, a store not built yet)."""
    if _corpus_file(data):
        path = located(data["corpus"], host.data_root(data.get("root")))
        return host.memo(("store", str(path), data["index_dir"]), lambda: _stored(path, data["index_dir"]))
    key = json.dumps({k: v for k, v in data.items() if f"data.{k}" not in NOT_CORPUS}, sort_keys=True, default=str)
    return host.memo(("pooled", key), lambda: _pooled(data, host))


def _stored(path: Path, index_dir: str) -> tuple[str | None, str]:
    if not path.exists():
        return None, f"needs {path} first"
    store = stored_corpus(path, index_dir)
    return (store.fingerprint, "") if store is not None else (None, "its corpus store is not built yet")


def _pooled(data: Mapping[str, Any], host: Host) -> tuple[str | None, str]:
    """A closed corpus, pooled from the questions (and extra corpora) as the job pools it."""
    lacking = [n for n in data_needs(data, host) if n.state != OK]
    if lacking:
        return None, f"needs {lacking[0].what} first"
    return as_corpus(instantiate(data, root=str(host.data_root(data.get("root")))).corpus()).fingerprint, ""


def _corpus_file(data: Mapping[str, Any]) -> bool:
    """A corpus file read through its store (what `QADataset.corpus` does with an index directory)."""
    return data.get("corpus") is not None and data.get("index_dir") is not None and not data.get("extra_corpus")


def _corpus_name(data: Mapping[str, Any]) -> str:
    if data.get("corpus") is not None:
        return str(data["corpus"])
    return f"{data.get('name')}'s questions ({data.get('questions')})"


def _describe(part: Mapping[str, Any]) -> str:
    if part["_target_"] == BM25:
        return "BM25"
    embedder, index = part["embedder"], part.get("index") or {}
    return f"dense {embedder.get('name') or embedder.get('model')} {index.get('factory', 'Flat')}"


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")
