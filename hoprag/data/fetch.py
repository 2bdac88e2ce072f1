"""Resolving data files, downloading the known official ones that are missing.

Every file a paper table reads has a `Source` here (tests/unit/test_fetch_sources.py composes the tables'
paper jobs and checks it). Three kinds:

- "url": one file on its official server (HotpotQA, ASQA, CRAG's Task 1/2 file and company table, TAT-QA),
  downloaded as it is;
- "hf": one file of a Hugging Face hub dataset (FlashRAG's splits, MultiHop-RAG, RM3QA, HippoRAG 2's NQ and
  PopQA subsets), fetched with huggingface_hub's `hf_hub_download`;
- "manual": an archive to download and unpack (2Wiki's zips, MuSiQue's, CRAG's Task 3 parts, wiki-18):
  the error names the official page and the shell command that puts the file in place (`hf download` is
  today's hub CLI; huggingface_hub no longer ships `huggingface-cli`).

With `HF_HUB_OFFLINE=1` or `HOPRAG_OFFLINE=1` nothing touches the network. Files land at
`<data root>/<relative name>`; the relative names below are the expected layout (`<dataset>/<official file
name>`, and FlashRAG's own `<dataset>/<split>.jsonl`).
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
    """Where a file comes from: `url` the file itself ("url") or its official page; `repo` and `path` the hub
    dataset and the file in it ("hf"); `command` a manual source's shell command, `{root}` the data root."""

    kind: str
    url: str
    command: str = ""
    repo: str = ""
    path: str = ""


def _hub(repo: str, path: str) -> Source:
    return Source("hf", f"https://huggingface.co/datasets/{repo}/blob/main/{path}", repo=repo, path=path)


def _archive(folder: str, url: str, archive: str, members: str, page: str) -> Source:
    """A zip to download into `<root>/<folder>` and unpack there flat (`unzip -j`: the files it holds under
    any folder land beside each other), keeping only `members` (unzip patterns)."""
    command = (
        f"mkdir -p {{root}}/{folder} && wget -O {{root}}/{folder}/{archive} '{url}' && "
        f"unzip -j -o {{root}}/{folder}/{archive} {members} -d {{root}}/{folder}"
    )
    return Source("manual", page, command)


def _sources() -> dict[str, Source]:
    hotpot = "http://curtis.ml.cmu.edu/datasets/hotpot/"  # hotpotqa/hotpot download.sh
    sources = {
        f"hotpotqa/{name}": Source("url", hotpot + name)
        for name in ("hotpot_dev_distractor_v1.json", "hotpot_dev_fullwiki_v1.json", "hotpot_train_v1.1.json")
    }
    twowiki = "https://github.com/Alab-NII/2wikimultihop"
    # the April 2021 release (answer_id, evidences_id, fixed sentence splits); id_aliases.json ships in the
    # December 2020 one (its README: "File id_aliases.json is used for evaluation")
    release = _archive("2wikimultihopqa", "https://www.dropbox.com/s/ms2m13252h6xubs/data_ids_april7.zip?dl=1",
                       "data_ids_april7.zip", "'*train.json' '*dev.json' '*test.json'", twowiki)  # fmt: skip
    for split in ("train", "dev", "test"):
        sources[f"2wikimultihopqa/{split}.json"] = release
    sources["2wikimultihopqa/id_aliases.json"] = _archive(
        "2wikimultihopqa", "https://www.dropbox.com/s/7ep3h8unu2njfxv/data_ids.zip?dl=1", "data_ids.zip",
        "'*id_aliases.json'", twowiki,
    )
    musique = Source(  # StonyBrookNLP/musique download_data.sh: one Google Drive zip holding data/
        "manual",
        "https://github.com/StonyBrookNLP/musique",
        "pip install gdown && gdown 'https://drive.google.com/uc?id=1tGdADlNjWFaHLeZZGShh2IRcpO6Lv24h' "
        "-O {root}/musique_v1.0.zip && unzip -j -o {root}/musique_v1.0.zip 'data/musique_*' -d {root}/musique",
    )
    for variant in ("ans", "full"):
        for split in ("train", "dev", "test"):
            sources[f"musique/musique_{variant}_v1.0_{split}.jsonl"] = musique
    crag = "https://github.com/facebookresearch/CRAG/raw/refs/heads/main/"  # docs/dataset.md (Git LFS files)
    sources["crag/crag_task_1_and_2_dev_v4.jsonl.bz2"] = Source("url", crag + "data/crag_task_1_and_2_dev_v4.jsonl.bz2")
    sources["crag/company_name.dict"] = Source("url", crag + "mock_api/cragkg/finance/company_name.dict")
    sources["crag/crag_task_3_dev_v4.tar.bz2"] = Source(
        "manual",
        "https://github.com/facebookresearch/CRAG/blob/main/docs/dataset.md",
        "mkdir -p {root}/crag && for i in 1 2 3 4; do wget -O {root}/crag/crag_task_3_dev_v4.tar.bz2.part$i "
        f"{crag}data/crag_task_3_dev_v4.tar.bz2.part$i; done && cat {{root}}/crag/crag_task_3_dev_v4.tar.bz2.part* "
        "> {root}/crag/crag_task_3_dev_v4.tar.bz2 && rm {root}/crag/crag_task_3_dev_v4.tar.bz2.part*",
    )
    for name in ("RM3QA_5web.jsonl.bz2", "RM3QA_50web.bz2"):  # PruningRAG's release of CRAG (§3.2)
        sources[f"rm3qa/{name}"] = _hub("fishsure/RM3QA", name)
    for name in ("MultiHopRAG.json", "corpus.json"):  # the README's hub copy of yixuantt/MultiHop-RAG dataset/
        sources[f"multihop_rag/{name}"] = _hub("yixuantt/MultiHopRAG", name)
    for name in ("nq.json", "nq_corpus.json", "popqa.json", "popqa_corpus.json"):  # HippoRAG 2's subsets
        sources[f"hipporag2/{name}"] = _hub("osunlp/HippoRAG_2", name)
    tatqa = "https://raw.githubusercontent.com/NExTplusplus/TAT-QA/master/dataset_raw/"
    for split in ("train", "dev"):
        sources[f"tatqa/tatqa_dataset_{split}.json"] = Source("url", f"{tatqa}tatqa_dataset_{split}.json")
    sources["asqa/ASQA.json"] = Source("url", "https://storage.googleapis.com/gresearch/ASQA/ASQA.json")
    sources["ambigdocs/test.json"] = Source("manual", "https://huggingface.co/datasets/yoonsanglee/AmbigDocs")
    sources["retrieval-corpus/wiki18_100w.jsonl"] = Source(
        "manual",
        f"https://huggingface.co/datasets/{FLASHRAG_REPO}/tree/main/retrieval-corpus",
        f"hf download {FLASHRAG_REPO} retrieval-corpus/wiki18_100w.zip --repo-type dataset --local-dir {{root}} "
        "&& unzip {root}/retrieval-corpus/wiki18_100w.zip -d {root}/retrieval-corpus",
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
            sources[name] = _hub(FLASHRAG_REPO, name)
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
    """The hub file of `SOURCES[filename]`, placed at `root/filename`: `hf_hub_download` writes the file's
    path in the repo under `local_dir`, so that is the folder the relative name keeps above it."""
    from huggingface_hub import hf_hub_download

    source = SOURCES[filename]
    local_dir = root / filename.removesuffix(source.path)
    hf_hub_download(repo_id=source.repo, repo_type="dataset", filename=source.path, local_dir=local_dir)


def download_command(name: str, root: Path) -> str:
    """The shell command that puts the data file `name` (relative to `root`) in place, as a person would run it
    (the preflight lists it beside a missing file)."""
    source, path = SOURCES.get(name), root / name
    if source is None:
        return f"put the file at {path} (no known source)"
    if source.command:
        return source.command.format(root=root)
    if source.kind == "hf":
        return (f"hf download {source.repo} {source.path} --repo-type dataset "
                f"--local-dir {root / name.removesuffix(source.path)}")  # fmt: skip
    if source.kind == "url":
        return f"mkdir -p {path.parent} && wget -O {path} '{source.url}'"
    return f"download from {source.url} so that the file is at {path}"


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
