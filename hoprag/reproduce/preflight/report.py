"""The preflight as one table a person reads: a line per need (grouped by kind, missing first within a kind),
its state and why, the command that provides it, and the rows (or row/group jobs) that need it."""

from __future__ import annotations

from collections.abc import Sequence

from hoprag.reproduce.preflight import Preflight
from hoprag.reproduce.preflight.need import KINDS, MISSING, OK, UNKNOWN
from hoprag.utils.secrets import redact_text

_ORDER = {MISSING: 0, UNKNOWN: 1, OK: 2}


def render(found: Preflight) -> str:
    counts = {s: sum(n.state == s for n in found.needs.values()) for s in (MISSING, UNKNOWN)}
    lines = [
        f"Preflight of {found.table} at scale={found.scale}: {len(found.needs)} needs of {len(found.jobs)} jobs, "
        f"{counts[MISSING]} missing, {counts[UNKNOWN]} unknown",
        "",
        "| kind | need | state | command | needed by |",
        "|---|---|---|---|---|",
    ]
    needs = sorted(found.needs.values(), key=lambda n: (KINDS.index(n.kind), _ORDER[n.state], n.what))
    for n in needs:
        state = f"{n.state}: {n.note}" if n.note else n.state
        cells = [n.kind, n.what, state, f"`{n.command}`", needed_by(list(found.users[n.key]), found.jobs)]
        lines.append("| " + " | ".join(redact_text(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def needed_by(jobs: Sequence[str], every: Sequence[str]) -> str:
    """`every job`; `every row's <group>` where the jobs are whole column groups; else each row all of whose jobs
    need it by its id, and the other jobs as row/group."""
    if set(jobs) == set(every):
        return "every job"
    groups = _by(every, 1)
    whole = [g for g, names in groups.items() if set(names) <= set(jobs)]
    if len(_by(every, 0)) > 1 and set(jobs) == {n for g in whole for n in groups[g]}:
        return f"every row's {', '.join(whole)}"
    named = []
    for row, names in _by(every, 0).items():
        mine = [n for n in names if n in jobs]
        named += [row] if mine == names else mine
    return ", ".join(named)


def _by(names: Sequence[str], part: int) -> dict[str, list[str]]:
    """Job names (`row/group`) by their row (`part` 0) or group (1)."""
    found: dict[str, list[str]] = {}
    for name in names:
        found.setdefault(name.split("/")[part], []).append(name)
    return found
