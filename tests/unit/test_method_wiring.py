"""One wiring rule for every method (conf/method/README.md): a method config configures the method and nothing
else, the method completes its engines with what only it holds, a shared setting is declared once, and every
command a method's docstring or config comment shows composes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hydra.errors import HydraException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hoprag.data.types import Passage
from hoprag.llm import ScriptedLLM
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import Retriever

CONF = PROJECT_ROOT / "conf"
METHODS = sorted(p.stem for p in (CONF / "method").glob("*.yaml"))
DOCUMENTED = sorted(
    [
        *(PROJECT_ROOT / "hoprag" / "methods").glob("*.py"),
        *(CONF / "method").glob("*.yaml"),
        *(p for p in (CONF / "experiment").glob("*.yaml") if not p.stem.startswith("pruningrag")),
    ]
)


def test_a_method_config_sets_the_method_and_nothing_else(compose_cfg):
    base = OmegaConf.to_container(compose_cfg("eval"))
    changed = {}
    for name in METHODS:
        cfg = OmegaConf.to_container(compose_cfg("eval", [f"+method={name}"]))
        changed[name] = sorted(k for k in base.keys() | cfg.keys() if base.get(k) != cfg.get(k))
    assert changed == {name: ["method"] for name in METHODS}  # retriever, metrics ...: an experiment preset's


def test_a_shared_setting_set_in_a_child_as_well_is_refused(compose_cfg):
    """PruneRAG's depth D is the method's (its builder and aggregator both read it): not silently overridden."""
    cfg = compose_cfg("eval", ["+method=prunerag", "+method.builder.max_depth=2"])
    with pytest.raises(ValueError, match=r"method.builder sets \['max_depth'\], which the method itself passes"):
        instantiate(cfg.method)(llm=ScriptedLLM(), retriever=Retriever([]))


def test_a_selector_is_built_with_the_token_counter_the_config_names(compose_cfg):
    cfg = compose_cfg("eval", ["+method=sc_rag_select", "llm=scripted", "method.token_counter.mode=words"])
    passage = Passage("x", "Title", "one two three four five six seven eight nine ten")
    method = instantiate(cfg.method)(llm=ScriptedLLM(), retriever=Retriever([passage]))
    assert method.selector.token_counter([passage]).tolist() == [13]  # the official 1.3 × words
    assert method.run_info()["selector_token_counting"] == "words x 1.3 (official)"


OPTION = re.compile(r"(?:^|\s)\[((?:[^\[\]]|\[[^\[\]]*\])*)\]")  # an optional "[key=value ...]", lists inside


def overrides_of(text: str) -> list[str]:
    """The overrides among `text`'s tokens; placeholders (<...>) and quoted values left out."""
    return [t for t in text.split() if "=" in t and not re.search(r"[<'\"\\]|\.\.\.", t)]


def documented_commands(path: Path) -> list[tuple[str, list[str]]]:
    """Every single-run `python eval.py ...` example in `path`, as (what it shows, its overrides): the
    command alone, then with each option it shows in [brackets] (on its line or the lines right after)."""
    commands: list[tuple[str, list[str], list[str]]] = []  # line, overrides, options
    continues = False
    for line in path.read_text(encoding="utf-8").splitlines():
        match = re.search(r"python eval\.py (.*)", line)
        options = line.lstrip("# ")
        if match and " -m " not in f" {match.group(1)}":
            text = match.group(1).split(" #")[0]
            commands.append((line.strip(), overrides_of(OPTION.sub(" ", text)), OPTION.findall(text)))
            continues = True
        elif continues and options.startswith("["):
            commands[-1][2].extend(OPTION.findall(options.split(" #")[0]))
        else:
            continues = False
    found = []
    for line, overrides, options in commands:
        found += [(f"{line} with [{option}]", overrides + overrides_of(option)) for option in options]
        found += [] if options else [(line, overrides)]
    return found


def distinct(commands: list[tuple[Path, str, list[str]]]) -> list[tuple[Path, str, list[str]]]:
    """The first of the commands with the same overrides (several files show the same one)."""
    return list({tuple(overrides): (path, line, overrides) for path, line, overrides in reversed(commands)}.values())


COMMANDS = distinct([(path, line, o) for path in DOCUMENTED for line, o in documented_commands(path)])


@pytest.mark.parametrize(
    ("path", "line", "overrides"), COMMANDS, ids=[f"{p.name}: {' '.join(o)}" for p, _, o in COMMANDS]
)
def test_every_documented_command_composes(compose_cfg, path, line, overrides):
    try:
        compose_cfg("eval", overrides)
    except HydraException as err:  # names the key that does not exist
        pytest.fail(f"{path.relative_to(PROJECT_ROOT)} documents `{line}`, which does not compose: {err}")
