"""Optional extras and downloads a job's objects import on first use, checked by import spec (a stand-in module
on PYTHONPATH counts): vLLM for an in-process engine, Stanza and its English constituency model for TreeRare's
CT parser, a spaCy model package for the DT parser, FAISS's GPU build where an index asks for the GPU."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hoprag.reproduce.preflight.host import Host
from hoprag.reproduce.preflight.need import MISSING, OK, Need
from hoprag.search.treerare.parsers import STANZA_DOWNLOAD

VLLM = "hoprag.llm.VLLMLLM"
CT = "hoprag.search.treerare.parsers.ConstituencyParser"
DT = "hoprag.search.treerare.parsers.DependencyParser"
DENSE = "hoprag.retrieval.DenseRetriever"


def extra_needs(objects: list[dict[str, Any]], host: Host) -> Iterator[Need]:
    for obj in objects:
        target = obj["_target_"]
        if target == VLLM:
            yield _package("vllm", "pip install -e '.[vllm]'", host)
        elif target == CT:
            yield _package("stanza", "pip install -e '.[treerare-ct]'", host)
            yield _stanza_model(str(obj.get("lang", "en")), host)
        elif target == DT and isinstance(obj.get("model"), str) and not Path(obj["model"]).exists():
            yield _package(obj["model"], "make install", host)
        elif target == DENSE and (obj.get("index") or {}).get("use_gpu") is True:
            yield _faiss_gpu(host)


def _package(module: str, command: str, host: Host) -> Need:
    found = host.importable(module)
    return Need("extra", f"{module} (Python package)", command, OK if found else MISSING,
                "" if found else f"`import {module}` finds nothing")  # fmt: skip


def _stanza_model(lang: str, host: Host) -> Need:
    """Stanza's constituency model for `lang` in its resources folder (STANZA_RESOURCES_DIR, else
    ~/stanza_resources: where `stanza.download` puts it and the parser, which never downloads, reads it)."""
    root = Path(host.env.get("STANZA_RESOURCES_DIR") or Path.home() / "stanza_resources").expanduser()
    folder = root / lang / "constituency"
    found = (root / "resources.json").is_file() and folder.is_dir() and any(folder.iterdir())
    return Need("extra", f"Stanza's {lang!r} constituency model", STANZA_DOWNLOAD.format(lang=lang),
                OK if found else MISSING, "" if found else f"nothing in {folder}")  # fmt: skip


def _faiss_gpu(host: Host) -> Need:
    def gpu_build() -> bool:
        import faiss

        return hasattr(faiss, "StandardGpuResources")

    found = host.memo(("faiss-gpu",), gpu_build)
    return Need("extra", "FAISS with GPU support (index.use_gpu=true)", "pip uninstall faiss-cpu; pip install -c constraints-gpu.txt -e '.[faiss-gpu]'",
                OK if found else MISSING, "" if found else "faiss has no StandardGpuResources")  # fmt: skip
