"""One thing a table's jobs need before they start, with its state on this machine and the command that provides
it: the unit the preflight lists, deduplicates across jobs (by kind and name) and refuses rows for."""

from __future__ import annotations

from dataclasses import dataclass

OK, MISSING, UNKNOWN = "ok", "missing", "unknown"
# the table's order: what is fetched first (files, then indexes built over them), what runs last (the GPU)
KINDS = ("file", "index", "model", "server", "credential", "extra", "gpu")


@dataclass(frozen=True)
class Need:
    """`what` names the need (a path, a hub id, a URL, an environment variable's name: never a secret's value);
    `note` says why its state is what it is."""

    kind: str
    what: str
    command: str
    state: str
    note: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.kind, self.what

    @property
    def reason(self) -> str:
        """Why a job that lacks it is refused, as a row skipped for a missing export says it."""
        return f"needs {self.what}, made by `{self.command}`"
