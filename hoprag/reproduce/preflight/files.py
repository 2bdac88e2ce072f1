"""Files: the data files a job's dataset reads (questions, a corpus file, extra corpora), under the data root the
job resolves, each with the command of its `hoprag.data.fetch` source; and the files a table row requires (a
trained export), with the command the table names."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hoprag.data.fetch import download_command
from hoprag.paths import PROJECT_ROOT
from hoprag.reproduce.preflight.host import Host, located
from hoprag.reproduce.preflight.need import MISSING, OK, Need
from hoprag.reproduce.spec import Requirement

DATA_FILES = ("questions", "corpus")


def file_need(what: str, path: Path, command: str) -> Need:
    return Need("file", what, command, OK if path.exists() else MISSING, "" if path.exists() else f"no {path}")


def data_needs(data: Mapping[str, Any], host: Host) -> Iterator[Need]:
    """The files a dataset config reads: its questions, its corpus file and those of its extra corpora."""
    root = host.data_root(data.get("root"))
    for key in DATA_FILES:
        name = data.get(key)
        if name is not None:
            yield file_need(str(name), located(name, root), download_command(str(name), root))
    extra = data.get("extra_corpus") or ()
    for source in extra.values() if isinstance(extra, Mapping) else extra:
        if isinstance(source, Mapping):
            yield from data_needs(source, host)
        elif source is not None:
            yield file_need(str(source), located(source, root), download_command(str(source), root))


def required(requirements: Sequence[Requirement]) -> Iterator[Need]:
    """A row's required files (trained exports), relative to the checkout, with the commands that make them."""
    for r in requirements:
        yield file_need(r.path, located(r.path, PROJECT_ROOT), r.command)
