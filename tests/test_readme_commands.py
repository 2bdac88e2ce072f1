"""Every command the README and the documentation pages (docs/) show works as written after the set-up (issue 33,
"commands that paste").

Each page is read as a reader meets it, wherever its sections move: every fenced block, every indented code
block and every inline code span that starts with `python` or `make` is a command (backslash continuations
joined, shell variables and `for` loop variables set by earlier lines of the same block substituted, `<...>`
placeholders and `...` left out, an optional part `[...]` checked as if given, the first of its `a|b`
alternatives). Each is checked without running anything heavy:

- a Hydra entry point (`eval.py`, `train.py`, ...) composes its config with the command's overrides, as
  `--cfg job` would (a sweep by its first value; a placeholder in a config group's place, `+method=<name>`, by
  the group's first option; any other override whose value is a placeholder is left out);
- any other script parses the command's arguments with its own argparse parser and stops there (`Parsed`);
- `python -m <module>` of hoprag imports; `make <target>` names a target of the Makefile.

Commands of other tools (`pip`, `vllm`, `wandb`, llama.cpp's server in its own virtualenv) are not hoprag's and
are left out. A bare `python` is the virtualenv's once `source .venv/bin/activate` has run, so the README and the
site's home page must say so before their first such command.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import runpy
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from hoprag.config import register_resolvers
from hoprag.paths import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
DOCS = PROJECT_ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
HOME = DOCS / "index.md"  # the site's landing page: says how to activate, as the README does
ACTIVATE = "source .venv/bin/activate"
PLACEHOLDER = "PLACEHOLDER"
PYTHONS = {"python", "python3", ".venv/bin/python"}
SEPARATORS = {";", "&&", "&", "||", "|"}
SHELL_WORDS = {"do", "then", "else", "time"}  # words that start a command inside a shell construct
SKIPPED = {"done", "wait", "fi", "for", "pip", "vllm", "wandb", "source", "cd", "export", "git", "nohup"}
OTHER_VENVS = ("scripts/servers/llama_cpp_server.py",)  # run with .venv-servers' python (llama-cpp-python)
HYDRA_MAIN = re.compile(r'@hydra\.main\([^)]*config_name="([^"]+)"')


OPTIONAL = re.compile(r"(?<!\S)\[([^\[\]]*)\](?!\S)")  # ` [scale=smoke|paper]`, not `ks=[5,10]`


@dataclass(frozen=True)
class Command:
    line: int  # where it starts in its page
    words: tuple[str, ...]
    page: str = "README.md"  # relative to the repository root

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {' '.join(self.words)}"


def code_lines(text: str) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """The README's code as blocks of (line number, text): fenced blocks, indented blocks, and each inline code
    span that starts with `python ` or `make ` as a block of its own."""
    lines = text.splitlines()
    fenced, block, prose = False, [], []
    for n, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            if fenced:
                yield block[0][0] if block else n, block
                block = []
            fenced = not fenced
            continue
        if fenced:
            block.append((n, line))
        elif line.startswith("    ") and (block or not lines[n - 2].strip()):  # an indented block
            block.append((n, line[4:]))
        else:
            if block:
                yield block[0][0], block
                block = []
            prose.append((n, line))
    if block:
        yield block[0][0], block
    joined = "\n".join(line for _, line in prose)
    starts = [n for n, _ in prose]
    for match in re.finditer(r"`((?:python|make) [^`]+)`", joined):
        n = starts[joined.count("\n", 0, match.start())]
        yield n, [(n, " ".join(match.group(1).split()))]


def commands(text: str, page: str = "README.md") -> list[Command]:
    """Every command of every code block of one page, with the block's variables substituted."""
    found: list[Command] = []
    for _, block in code_lines(text):
        variables: dict[str, str] = {}
        logical: list[tuple[int, str]] = []
        for n, line in block:
            if logical and logical[-1][1].endswith("\\"):
                logical[-1] = (logical[-1][0], logical[-1][1][:-1] + " " + line.strip())
            else:
                logical.append((n, line))
        for n, line in logical:
            found += [Command(c.line, c.words, page) for c in _line_commands(n, line, variables)]
    return found


def every_command(pages: list = PAGES) -> list[Command]:
    """The commands of every page, each once, where it first appears (the README first)."""
    first: dict[tuple[str, ...], Command] = {}
    for path in pages:
        for command in commands(path.read_text(encoding="utf-8"), path.relative_to(PROJECT_ROOT).as_posix()):
            first.setdefault(_same(command), command)
    return list(first.values())


def _same(command: Command) -> tuple[str, ...]:
    """What a command runs: `python` and `.venv/bin/python` are one interpreter once the virtualenv is active."""
    return ("python", *command.words[1:]) if command.words[0] in PYTHONS else command.words


def _line_commands(n: int, line: str, variables: dict[str, str]) -> list[Command]:
    line = re.sub(r"<[^<>\n]+>", PLACEHOLDER, line)
    line = re.sub(r"(?<=\S)\.\.\.|\.\.\.(?=\S)", PLACEHOLDER, line)  # `+method=...`: a value to fill in
    line = OPTIONAL.sub(lambda m: re.sub(r"\\?\|[^\s\]]*", "", m.group(1)), line)  # as if given, first alternative
    for name, value in re.findall(r"""(?:^|;)\s*(\w+)=("[^"]*"|'[^']*'|[^\s;]+)\s*(?=;|$)""", line):
        variables[name] = value.strip("\"'")
    for name, items in re.findall(r"\bfor (\w+) in ([^;]+);", line):
        variables[name] = items.split()[0]
    line = re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), PLACEHOLDER), line)
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split, lexer.commenters = True, "#"
    try:
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: not a shell line (prose in a code block)
        return []
    segments, current = [], []
    for token in tokens:
        if token in SEPARATORS:
            segments.append(current)
            current = []
        else:
            current.append(token)
    segments.append(current)
    found = []
    for words in segments:
        while words and (words[0] in SHELL_WORDS or re.fullmatch(r"\w+=.*", words[0])):
            words = words[1:]  # `do`, `then`, environment assignments before the program
        if words and words[0] not in SKIPPED and (words[0] in PYTHONS or words[0] == "make"):
            found.append(Command(n, tuple(w for w in words if w != "...")))
    return found


COMMANDS = every_command()


@pytest.mark.parametrize("page", [README, HOME], ids=lambda p: p.relative_to(PROJECT_ROOT).as_posix())
def test_the_page_activates_the_virtualenv_before_its_first_bare_python(page):
    assert len(COMMANDS) >= 50 and {c.words[0] for c in COMMANDS} >= {"python", "make"}
    assert {c.page for c in COMMANDS} >= {"README.md", "docs/index.md", "docs/configuration.md"}
    text = page.read_text(encoding="utf-8")
    first_bare = min(c.line for c in commands(text) if c.words[0] == "python")
    assert ACTIVATE in text, f"{page.name} never says `{ACTIVATE}`"
    assert text[: text.index(ACTIVATE)].count("\n") + 1 < first_bare, (
        f"{page.name}:{first_bare} runs a bare `python` before the page says `{ACTIVATE}`"
    )


class Parsed(Exception):
    """Raised once a script's argparse parser accepted the command's arguments: nothing more runs."""


@pytest.fixture
def parse_only(monkeypatch):
    """argparse parses as usual (exiting on a bad argument), then stops the script."""
    real = argparse.ArgumentParser.parse_known_args

    def parse_known_args(self, args=None, namespace=None):
        real(self, args, namespace)
        raise Parsed(self.prog)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", parse_known_args)


@pytest.mark.parametrize("command", COMMANDS, ids=str)
def test_each_readme_command_composes_or_parses(command, parse_only, monkeypatch):
    program, *args = command.words
    if program == "make":
        targets = set(re.findall(r"^([\w.-]+):", (PROJECT_ROOT / "Makefile").read_text(), re.MULTILINE))
        named = [a for a in args if not a.startswith("-") and "=" not in a]
        assert named and set(named) <= targets, f"{command}: no such Makefile target in {named}"
        return
    if args[:1] == ["-m"]:
        module = args[1]
        if module.split(".")[0] == "hoprag":
            assert importlib.util.find_spec(module) is not None, f"{command}: no module {module}"
        return
    script = PROJECT_ROOT / args[0]
    assert script.is_file(), f"{command}: no file {args[0]}"
    if args[0] in OTHER_VENVS:
        return
    hydra = HYDRA_MAIN.search(script.read_text(encoding="utf-8"))
    if hydra:
        compose_like_cfg_job(command, hydra.group(1), args[1:])
    else:
        monkeypatch.setattr(sys, "argv", [str(script), *args[1:]])
        with pytest.raises(Parsed):
            runpy.run_path(str(script), run_name="__main__")


def compose_like_cfg_job(command: Command, config_name: str, args: list[str]) -> None:
    """The config the entry point would compose from these overrides (a sweep by its first value)."""
    parser = OverridesParser.create()
    overrides = []
    args = hydra_overrides_only(args)
    for arg in args:
        if PLACEHOLDER in arg:
            arg = first_option(arg)
        if arg is None or arg in ("-m", "--multirun"):
            continue
        override = parser.parse_override(arg)
        if override.is_sweep_override():
            arg = f"{override.get_key_element()}={next(iter(override.sweep_string_iterator()))}"
        overrides.append(arg)
    register_resolvers()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
            compose(config_name=config_name, overrides=overrides, return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as e:  # what a user would read, with the README line
        pytest.fail(f"{command}\n  composes to: {type(e).__name__}: {e}")
    finally:
        GlobalHydra.instance().clear()


def hydra_overrides_only(args: list[str]) -> list[str]:
    """`args` without Hydra's own flags that show instead of run (`--cfg job`, `--resolve`), as they compose."""
    kept, skip_value = [], False
    for arg in args:
        if skip_value:
            skip_value = False
        elif arg in ("--cfg", "-c"):
            skip_value = True
        elif arg != "--resolve":
            kept.append(arg)
    return kept


def first_option(override: str) -> str | None:
    """`+method=<name>` as `+method=<the group's first option>`; None for a placeholder elsewhere (a path)."""
    key, _, value = override.partition("=")
    group = PROJECT_ROOT / "conf" / key.lstrip("+~")
    options = [p.stem for p in group.glob("*.yaml")] if value == PLACEHOLDER and group.is_dir() else []
    return f"{key}={min(options)}" if options else None


def test_the_parser_reads_blocks_variables_loops_and_placeholders():
    text = """Prose with `python eval.py +method=a data=b` inline, and `make demo`.

    C="limit=3 show=0"; E=logs/x
    for m in one two; do
      python eval.py +method=$m $C hydra.run.dir=$E/$m; done
    python compare.py $E/<run> --out \\
        $E/compare   # a comment
```bash
make CONSTRAINTS= test && CUDA_VISIBLE_DEVICES=0 .venv/bin/python train.py ... +model=m &
pip install x
python reproduce.py table=<name> [scale=smoke|paper] ks=[5,10]
```"""
    found = [c.words for c in commands(text)]
    assert ("python", "reproduce.py", f"table={PLACEHOLDER}", "scale=smoke", "ks=[5,10]") in found
    assert ("python", "eval.py", "+method=one", "limit=3", "show=0", "hydra.run.dir=logs/x/one") in found
    assert ("python", "compare.py", f"logs/x/{PLACEHOLDER}", "--out", "logs/x/compare") in found
    assert ("make", "CONSTRAINTS=", "test") in found and (".venv/bin/python", "train.py", "+model=m") in found
    assert ("python", "eval.py", "+method=a", "data=b") in found and ("make", "demo") in found
    assert not [w for w in found if w[0] == "pip"]


def test_a_broken_override_fails_naming_the_page_and_line():
    with pytest.raises(pytest.fail.Exception, match=r"docs/data.md:7: .*nope"):
        compose_like_cfg_job(
            Command(7, ("python", "eval.py", "+method=nope"), "docs/data.md"), "eval", ["+method=nope"]
        )


def test_a_placeholder_in_a_groups_place_is_checked_with_its_first_option():
    method = first_option(f"+method={PLACEHOLDER}")
    assert method.startswith("+method=") and (PROJECT_ROOT / "conf/method" / f"{method[8:]}.yaml").is_file()
    assert first_option(f"method.search.ckpt={PLACEHOLDER}/export") is None  # a path: left out
