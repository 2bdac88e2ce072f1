"""Indexes: at a scale whose jobs may not build their own (`paper`: wiki-18 takes hours on a GPU, never inside an
eval job), every dense or BM25 index the job's `retriever` searches is a need, found where the retriever will
look for it (`hoprag.retrieval.index_dirs`: corpus fingerprint + the settings that decide the index) and made
by the exact `python build_index.py ...` that builds it there. A corpus file's fingerprint is read from its
corpus store (built by that same command); a closed corpus is pooled from the questions, as the job pools it.
FlashRAG's prebuilt file (`retriever=flashrag_dense`) is a file need, and its conversion (an index other than
Flat) an index need. Each dense index also says where it will search and the memory that takes
(`hoprag.retrieval.search_plan`); placed on GPUs it is a GPU need, sized against each GPU less what the job's vLLM
engines take of it (they share GPU 0 onwards)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from hydra.utils import instantiate

from hoprag.data.corpus_store import as_corpus
from hoprag.data.store_build import stored_corpus
from hoprag.reproduce.preflight.files import data_needs
from hoprag.reproduce.preflight.gpu import GIB, VLLM
from hoprag.reproduce.preflight.host import Host, located
from hoprag.reproduce.preflight.models import model_weights
from hoprag.reproduce.preflight.need import MISSING, OK, UNKNOWN, Need
from hoprag.reproduce.preflight.view import JobView, objects
from hoprag.reproduce.spec import as_lines
from hoprag.retrieval.dense import read_index
from hoprag.retrieval.faiss_placement import placement
from hoprag.retrieval.flashrag_index import conversion_dir
from hoprag.retrieval.index_dirs import DEFAULT_INDEX, bm25_index_dir, build_settings, dense_index_dir
from hoprag.retrieval.manifest import MANIFEST
from hoprag.retrieval.search_plan import SearchPlan, search_plan

DENSE = "hoprag.retrieval.DenseRetriever"
BM25 = "hoprag.retrieval.BM25Retriever"
PREBUILT = "hoprag.retrieval.flashrag_index.PrebuiltDenseRetriever"
SMALLER = ("index=wiki18 or wiki18_1024 (compressed: 2-3 GiB for wiki-18), index.use_gpu=auto:shard (split over "
           "every GPU) or index.use_gpu=cpu")
BM25_KEYS = ("k1", "b", "method", "stemmer")
# the job's own value overrides that build_index.py shares (the dataset's, the index's, where caches live)
SHARED = ("data.", "embedder.", "index.", "retriever.", "paths.")
NOT_CORPUS = ("data.limit", "data.sample", "data.seed")  # which questions a job asks: not the corpus
POOLED_FILE = "a corpus file pooled with extra corpora is read whole by the job: not fingerprinted before it"


def index_parts(view: JobView) -> list[dict[str, Any]]:
    """The dense and BM25 retrievers inside the job's `retriever` (itself, or a fusion's parts), as build_index.py
    finds them; none when the method does not search the dataset's corpus."""
    return [o for o in objects(view.sections.get("retriever")) if o["_target_"] in (DENSE, BM25, PREBUILT)]


class Seen(NamedTuple):
    """A job's corpus as the preflight sees it: its fingerprint and number of passages."""

    fingerprint: str
    size: int


def index_needs(view: JobView, host: Host) -> Iterator[Need]:
    data = view.sections["data"]
    parts = index_parts(view) if view.searches else []
    if not parts:
        return
    command = build_command(view, any(p["_target_"] != BM25 for p in parts))
    pooled_file = data.get("corpus") is not None and not _corpus_file(data)
    seen, why = (None, POOLED_FILE) if pooled_file else corpus_seen(data, host)
    for part in parts:
        if part["_target_"] == PREBUILT:
            yield from prebuilt_needs(view, part, seen, why, command, host)
            continue
        what = f"{_describe(part)} index of {_corpus_name(data)}"
        if seen is None:
            yield Need("index", what, command, UNKNOWN if pooled_file else MISSING, why)
            continue
        directory = index_dir(part, seen.fingerprint)
        built = directory is not None and (directory / MANIFEST).is_file()
        line = ""
        if part["_target_"] == DENSE:
            dim, line = embedding_dim(part["embedder"], host)
            if dim is not None:
                line, gpus = planned(view, what, settings_of(part), dim, seen.size, host)
                yield from gpus
        yield Need("index", what, command, OK if built else MISSING, _notes(built, directory, line))


def prebuilt_needs(view: JobView, part: Mapping[str, Any], seen: Seen | None, why: str, command: str,
                   host: Host) -> Iterator[Need]:  # fmt: skip
    """FlashRAG's FAISS file, where the retriever looks for it, and, for an index other than Flat, its conversion
    (made by `build_index.py`, never inside an eval job: it copies every row)."""
    path = located(part["index_path"], host.data_root(part.get("root")))
    settings = settings_of(part)
    fix = f"put FlashRAG's FAISS file at {path} (or retriever=dense: build an index of your own)"
    if not path.is_file():
        yield Need("file", str(part["index_path"]), fix, MISSING, f"no {path}")
        return
    prebuilt = read_index(path, mmap=True)
    what = f"{settings['factory']} conversion of {part['index_path']}"
    line, gpus = planned(view, what, settings, prebuilt.d, prebuilt.ntotal, host)
    yield from gpus
    if settings["factory"] == "Flat":
        yield Need("file", str(part["index_path"]), fix, OK, f"searched as it is: {line}")
        return
    yield Need("file", str(part["index_path"]), fix, OK)
    if seen is None:
        yield Need("index", what, command, MISSING, why)
        return
    directory = conversion_dir(path, part["built_with"], settings, part["cache_dir"], seen.fingerprint)
    built = directory is not None and (directory / MANIFEST).is_file()
    yield Need("index", what, command, OK if built else MISSING, _notes(built, directory, line))


def settings_of(part: Mapping[str, Any]) -> dict[str, Any]:
    return {**DEFAULT_INDEX, **(part.get("index") or {})}


def embedding_dim(embedder: Mapping[str, Any], host: Host) -> tuple[int | None, str]:
    """The width of the embedder's vectors without loading it: its `dim` setting, else its model's hidden size
    (config.json, where the model is on disk); None and why where neither is known yet."""
    if embedder.get("dim") is not None:
        return int(embedder["dim"]), ""
    model = str(embedder.get("model"))
    weights = model_weights(model, host)
    config = (weights.config if weights else None) or {}
    if "hidden_size" in config:
        return int(config["hidden_size"]), ""
    return None, f"its memory is stated once {model} is on disk (its width is read from its config.json)"


def planned(view: JobView, what: str, settings: Mapping[str, Any], dim: int, size: int,
            host: Host) -> tuple[str, list[Need]]:  # fmt: skip
    """The search plan's line, and where it puts the index on GPUs, a GPU need: each GPU's memory less what the
    job's vLLM engines take of it. A placement FAISS cannot honour here is a GPU need too, missing."""
    try:
        placement(settings["use_gpu"])
    except (RuntimeError, ValueError) as e:
        return f"will be refused: {e}", [Need("gpu", f"FAISS placement index.use_gpu={settings['use_gpu']}",
                                              "install faiss-gpu (make GPU=1 install) or set index.use_gpu=cpu",
                                              MISSING, str(e))]  # fmt: skip
    try:
        plan = search_plan(dict(settings), dim, size)
    except RuntimeError as e:  # FAISS refuses the factory for this width
        return f"index.factory={settings['factory']} cannot be made for {dim}-d vectors: {e}", []
    return f"searches {plan}" + _over_memory(plan), list(_gpu_need(view, what, plan, host))


def _gpu_need(view: JobView, what: str, plan: SearchPlan, host: Host) -> Iterator[Need]:
    if not plan.gpus:
        return
    memory = host.gpu_memory()
    need = f"{plan.each / GIB:.1f} GiB on each of GPU {', '.join(map(str, plan.gpus))} for the {what}"
    if len(memory) <= max(plan.gpus):
        yield Need("gpu", need, SMALLER, UNKNOWN, f"torch sees {len(memory)} GPU(s), FAISS more")
        return
    engines = [e for e in view.built if e["_target_"] == VLLM]
    free = []
    for g in plan.gpus:
        taken = sum(float(e.get("gpu_memory_utilization", 0.9)) for e in engines
                    if int(e.get("tensor_parallel_size") or 1) > g)  # fmt: skip
        free.append(memory[g] * max(0.0, 1 - taken))
    state = OK if plan.each <= min(free) else MISSING
    by_vllm = " (after the job's vLLM engines' share)" if engines else ""
    yield Need("gpu", need, SMALLER, state, f"{min(free) / GIB:.1f} GiB free on the fullest{by_vllm}")


def _over_memory(plan: SearchPlan) -> str:
    """A warning where the index is read whole into more memory than this machine has."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return ""
    if plan.gpus or not plan.resident or plan.each <= ram:
        return ""
    return f"; more than this machine's {ram / GIB:.0f} GiB of memory: {SMALLER}"


def _notes(built: bool, directory: Path | None, line: str) -> str:
    return "; ".join(n for n in ("" if built else f"no index in {directory}", line) if n)


def index_dir(part: Mapping[str, Any], fingerprint: str) -> Path | None:
    """Where the retriever `part` loads its index of the corpus `fingerprint` from."""
    if part["_target_"] == DENSE:
        settings = build_settings(settings_of(part))
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


def corpus_seen(data: Mapping[str, Any], host: Host) -> tuple[Seen | None, str]:
    """The job's corpus (fingerprint and size), or None and why not (a file missing, a store not built yet)."""
    if _corpus_file(data):
        path = located(data["corpus"], host.data_root(data.get("root")))
        return host.memo(("store", str(path), data["index_dir"]), lambda: _stored(path, data["index_dir"]))
    key = json.dumps({k: v for k, v in data.items() if f"data.{k}" not in NOT_CORPUS}, sort_keys=True, default=str)
    return host.memo(("pooled", key), lambda: _pooled(data, host))


def _stored(path: Path, index_dir: str) -> tuple[Seen | None, str]:
    if not path.exists():
        return None, f"needs {path} first"
    store = stored_corpus(path, index_dir)
    return (Seen(store.fingerprint, len(store)), "") if store is not None else (None, "its corpus store is not built yet")


def _pooled(data: Mapping[str, Any], host: Host) -> tuple[Seen | None, str]:
    """A closed corpus, pooled from the questions (and extra corpora) as the job pools it."""
    lacking = [n for n in data_needs(data, host) if n.state != OK]
    if lacking:
        return None, f"needs {lacking[0].what} first"
    corpus = as_corpus(instantiate(data, root=str(host.data_root(data.get("root")))).corpus())
    return Seen(corpus.fingerprint, len(corpus)), ""


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
