"""Resolving data files, downloading the known official ones that are missing.

Only files with a stable direct source are fetched: HotpotQA's JSON from its official server and
FlashRAG's dataset JSONL from the Hugging Face hub. 2Wiki, MuSiQue, CRAG and wiki-18 ship as archives
(Dropbox / Google Drive / zip), so for those the error names the official page instead. With
`HF_HUB_OFFLINE=1` or `HOPRAG_OFFLINE=1` nothing touches the network.

Files land at `<data root>/<relative name>`; the relative names below are the expected layout
(`<dataset>/<official file name>`, and FlashRAG's own `<dataset>/<split>.jsonl`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

FLASHRAG_REPO = "RUC-NLPIR/FlashRAG_datasets"
OFFLINE_VARS = ("HF_HUB_OFFLINE", "HOPRAG_OFFLINE")


@dataclass(frozen=True)
class Source:
    kind: str  # "url": direct download · "hf": FlashRAG hub file · "manual": user unpacks an archive
    url: str
    command: str = ""  # a manual source's download command, `{root}` standing for the data root


def _sources() -> dict[str, Source]:
    hotpot = "http://curtis.ml.cmu.edu/datasets/hotpot/"
    sources = {
        f"hotpotqa/{name}": Source("url", hotpot + name)
        for name in ("hotpot_dev_distractor_v1.json", "hotpot_train_v1.1.json")
    }
    for split in ("train", "dev", "test"):
        sources[f"2wikimultihopqa/{split}.json"] = Source(
            "manual", "https://github.com/Alab-NII/2wikimultihop"
        )
        for variant in ("ans", "full"):
            sources[f"musique/musique_{variant}_v1.0_{split}.jsonl"] = Source(
                "manual", "https://github.com/StonyBrookNLP/musique"
            )
    sources["crag/crag_task_1_and_2_dev_v4.jsonl.bz2"] = Source(
        "manual", "https://github.com/facebookresearch/CRAG"
    )
    sources["asqa/ASQA.json"] = Source("url", "https://storage.googleapis.com/gresearch/ASQA/ASQA.json")
    sources["ambigdocs/test.json"] = Source("manual", "https://huggingface.co/datasets/yoonsanglee/AmbigDocs")
    sources["retrieval-corpus/wiki18_100w.jsonl"] = Source(
        "manual",
        f"https://huggingface.co/datasets/{FLASHRAG_REPO}/tree/main/retrieval-corpus",
        f"huggingface-cli download {FLASHRAG_REPO} retrieval-corpus/wiki18_100w.zip --repo-type dataset "
        "--local-dir {root} && unzip {root}/retrieval-corpus/wiki18_100w.zip -d {root}/retrieval-corpus",
    )
    flashrag_splits = {
        "hotpotqa": ("train", "dev"),
        "2wikimultihopqa": ("train", "dev"),
        "musique": ("train", "dev"),
        "bamboogle": ("test",),
        "nq": ("train", "dev", "test"),
        "triviaqa": ("train", "dev", "test"),
        "popqa": ("test",),
    }
    for dataset, splits in flashrag_splits.items():
        for split in splits:
            name = f"{dataset}/{split}.jsonl"
            sources[name] = Source(
                "hf", f"https://huggingface.co/datasets/{FLASHRAG_REPO}/blob/main/{name}"
            )
    return sources


SOURCES = _sources()


def offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in {"1", "true", "yes", "on"} for v in OFFLINE_VARS)


def download_url(url: str, dest: Path) -> None:
    """Download to a temporary file beside `dest`, then rename, so an interrupted run leaves no stub."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            shutil.copyfileobj(response, out)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def download_hf(filename: str, root: Path) -> None:
    """FlashRAG's file `<dataset>/<split>.jsonl`, placed at `root/<dataset>/<split>.jsonl`."""
    from huggingface_hub import hf_hub_download

    hf_hub_download(repo_id=FLASHRAG_REPO, repo_type="dataset", filename=filename, local_dir=root)


def ensure_file(name: str | os.PathLike, root: Path) -> Path:
    """The path of `name` (absolute, or relative to `root`), downloading it first when it is missing
    and a known direct source exists; otherwise `FileNotFoundError` saying where it was looked for."""
    path = Path(name) if Path(name).is_absolute() else root / name
    if path.exists():
        return path
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else None
    source = SOURCES.get(rel) if rel else None
    message = (
        f"data file {path} does not exist (data root in use: {root}; set the HOPRAG_DATA "
        f"environment variable or the dataset's `root` to the folder holding your datasets)."
    )
    if source is not None:
        message += f" Official source: {source.url}"
        if source.kind == "manual":
            message += f" (download and unpack the archive so that the file is at {path})"
        message += "."
        if source.command:
            message += f" Download: {source.command.format(root=root)}"
    if source is None or source.kind == "manual":
        raise FileNotFoundError(message)
    if offline():
        raise FileNotFoundError(message + " Not downloaded: HF_HUB_OFFLINE / HOPRAG_OFFLINE is set.")
    try:
        if source.kind == "hf":
            download_hf(rel, root)
        else:
            download_url(source.url, path)
    except Exception as e:  # network, hub or permission errors all mean: the file is still missing
        raise FileNotFoundError(f"{message} Download failed: {e}") from e
    if not path.exists():
        raise FileNotFoundError(f"{message} The download did not produce the file.")
    return path
