"""The "Entry points" table of the documentation (docs/configuration.md, where it moved from the README) lists every
entry point, the root applications and every script under `scripts/`, and lists nothing that does not exist: a
script moved, added or removed without the table fails here."""

from __future__ import annotations

import re

from hoprag.paths import PROJECT_ROOT

ROW = re.compile(r"^\| `python (\S+\.py)\b", re.M)


def table_commands() -> list[str]:
    """The file each row of the table runs, in the table's order."""
    section = (PROJECT_ROOT / "docs" / "configuration.md").read_text(encoding="utf-8").split("\n## Entry points\n", 1)[1]
    table = section[section.index("\n|") :].split("\n\n", 1)[0]
    return ROW.findall(table)


def entry_points() -> set[str]:
    """The root files that run as programs, and every script under scripts/ (each is a command)."""
    root = {p.name for p in PROJECT_ROOT.glob("*.py") if 'if __name__ == "__main__":' in p.read_text(encoding="utf-8")}
    return root | {p.relative_to(PROJECT_ROOT).as_posix() for p in (PROJECT_ROOT / "scripts").rglob("*.py")}


def test_the_readme_table_lists_every_entry_point_once():
    listed = table_commands()
    assert len(listed) == len(set(listed)), "a command is listed twice"
    assert set(listed) == entry_points()


def test_the_scripts_are_grouped_by_purpose():
    loose = sorted(p.name for p in (PROJECT_ROOT / "scripts").glob("*.py"))
    assert loose == [], f"scripts/ holds only folders by purpose (runs, components, bench, servers): {loose}"
