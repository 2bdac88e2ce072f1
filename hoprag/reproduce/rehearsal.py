"""`scale=rehearsal`: a table's paper jobs run end to end on this machine, with only what cannot run here swapped.

The jobs are the paper scale's (rows, methods, settings, backends, judges, file names and folder layout), launched
the same way; what changes is their environment (`environment`), the question count (`swap`) and where the
exports they read lie (`relocated`):

- model weights: the paper's hub ids are laid out in a local Hugging Face cache holding the bundled weights
  (SmolLM2 for chat models, Qwen3's with a thinking chat template; MiniLM for encoders; tests/standins/hub.py),
  read offline through the real loading code;
- the in-process vLLM engine: a stand-in `vllm` package implementing the surface hoprag calls, on the CPU, with a
  simulated GPU (tests/standins/vllm);
- served models and judges: a local OpenAI-compatible stand-in server (tests/standins/openai_server.py), reached
  through `OPENAI_BASE_URL` as the OpenAI client convention has it; CRAG's mock API: a stand-in answering every
  official endpoint (tests/standins/crag_api.py), through `CRAG_MOCK_API_URL` as CRAG's own clients read it;
- Stanza (TreeRare's CT parser), whose English models come from the hub: a stand-in `stanza` package with its
  pipeline's surface, bracketing the bundled spaCy model's parse (tests/standins/stanza);
- data: the bundled samples under the official file names, and wiki-18 as FlashRAG lays it out with a few
  thousand real passages (tests/standins/data.py), in a data root of its own;
- questions: `QUESTIONS` per run, drawn with the paper's seed where the paper draws a sample;
- trained exports (a row's `requires`): its command runs here as a user would run it, with `TRAINING` (a CPU
  trainer, one short epoch) on the stand-in data, weights and servers.

Everything the rehearsal lays out, builds and trains lies under its own root (`root()`): its cache
(`HOPRAG_CACHE`: indexes, generations, published routers) and the run folders of its trainings (`located`),
so nothing it makes lands where a paper run reads.

The stand-ins live in the test suite's helpers (tests/standins/), never in the methods. A rehearsal's figures
mean nothing; it shows that every row of the paper configuration runs and is scored."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Collection, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hoprag.llm.gguf import share_conversions
from hoprag.paths import PROJECT_ROOT, cache_root, data_root

if TYPE_CHECKING:
    from hoprag.reproduce.spec import Requirement, Row, Table

log = logging.getLogger(__name__)

QUESTIONS = 2  # per run (a paper sample of 500 is drawn as QUESTIONS with the same seed)
MAX_TOKENS = 48  # the stand-in engine's per-request generation cap on a CPU (a cut reply ends "length")
STANDINS = PROJECT_ROOT / "tests" / "standins"
SERVED = ["gpt-4o-mini", "gpt-6-luna"]  # the model names the paper tables ask an OpenAI-compatible API for
SCALE = "rehearsal"
CACHE = "cache"  # the rehearsal's HOPRAG_CACHE, under its root
BATCHES = 2  # per loop (train, validation, test) of a rehearsed training's one epoch
TRAINING = ("trainer=cpu", "trainer.max_epochs=1", f"++trainer.limit_train_batches={BATCHES}",
            f"++trainer.limit_val_batches={BATCHES}", f"++trainer.limit_test_batches={BATCHES}")  # fmt: skip
STAND_INS = (
    "model weights: the paper's hub ids hold the bundled SmolLM2-135M (chat models; Qwen3's thinks first) and "
    "MiniLM (encoders), in a local Hugging Face cache",
    f"vLLM: a CPU stand-in engine with a simulated 80 GiB GPU; at most {MAX_TOKENS} generated tokens a request "
    "there and on the stand-in server",
    "served models and judges: a local OpenAI-compatible stand-in server running SmolLM2; CRAG's mock API: a "
    "stand-in answering its endpoints from test fixtures (empty where none)",
    "Stanza's constituency parser: brackets derived from the bundled spaCy model's dependency parse; task heads "
    "(the cross-encoder, the SQuAD reader): MiniLM with untrained heads",
    "data: the bundled samples under the official file names (2Wiki's train.json: the 500-question train sample; "
    "CRAG: 5 questions of the validation portion, 5 of the router-training portion; HippoRAG 2's NQ and PopQA "
    "files: bundled HotpotQA questions in their layout, none of NQ or PopQA being bundled); wiki-18: 7,406 real "
    "passages in FlashRAG's layout",
    f"questions: {QUESTIONS} per run (the paper's seed draws them where it draws a sample)",
    f"trained exports: each row's `requires` command, run here with {' '.join(TRAINING)} (the experiment's "
    "settings otherwise) on the stand-in data, weights and servers, under the rehearsal's root",
)


def label(paper_label: str) -> str:
    return f"The paper scale's jobs, rehearsed on a CPU with stand-ins (figures mean nothing). Paper: {paper_label}"


def swap(overrides: Sequence[str]) -> tuple[str, ...]:
    """The paper overrides with the question count swapped: a drawn sample of any size becomes `QUESTIONS`
    (same seed); without one, `limit=QUESTIONS`."""
    swapped = [f"data.sample={QUESTIONS}" if o.startswith("data.sample=") and o != "data.sample=null" else o
               for o in overrides]  # fmt: skip
    if not any(o.startswith("data.sample=") and o != "data.sample=null" for o in overrides):
        swapped.append(f"limit={QUESTIONS}")
    return tuple(swapped)


def variables(paper: dict[str, str]) -> dict[str, str]:
    """The paper scale's metric-key variables as the rehearsal's runs name them: a judge served here is named
    `local-<its model>` (hoprag/evaluation/judges.py), so the stand-in's verdicts never pass for the API's."""
    return {k: f"local-{v}" if k == "judge" and v not in ("rule", "exact") else v for k, v in paper.items()}


def root() -> Path:
    """The rehearsal's own folder, `rehearsal/` in the checkout's cache (HOPRAG_CACHE, else ./.cache), asked
    before the rehearsal applies (its environment points HOPRAG_CACHE inside it)."""
    return cache_root() / SCALE


def located(path: str | os.PathLike) -> Path:
    """Where the rehearsal keeps what a paper run keeps at `path` (a trained export, a training's run folder), so
    that nothing it trains lands where a paper run reads: a path in the cache (`${paths.cache_dir}/...`) lies
    in the rehearsal's cache, one in the checkout (`logs/...`, relative to it or not) under its root, one
    already there stays."""
    path, home, cache = _absolute(path), root(), cache_root()
    if path.is_relative_to(home):
        return path
    if path.is_relative_to(cache):
        return home / CACHE / path.relative_to(cache)
    if path.is_relative_to(PROJECT_ROOT):
        return home / path.relative_to(PROJECT_ROOT)
    raise ValueError(f"{path}: neither in the checkout nor in its cache, so the rehearsal has no place for it "
                     f"under {home}")  # fmt: skip


def relocated(table: Table) -> Table:
    """`table` with its rehearsal's exports `located`: each row's `requires` (its path, and the arguments of its
    command that name it or a folder holding it) and the overrides that point a job at one. The preflight then
    checks, the rehearsal trains, and the jobs read the rehearsal's own exports."""
    return replace(table, rows=[_relocated_row(r) for r in table.rows])


def _relocated_row(row: Row) -> Row:
    exports = [_absolute(r.path) for r in row.requires[SCALE]]
    if not exports:
        return row

    def moved(overrides: dict[str, tuple]) -> dict[str, tuple]:
        return {**overrides, SCALE: tuple(_moved(o, exports) for o in overrides[SCALE])}

    requires = tuple(replace(r, path=str(located(r.path)), command=_command(r, exports)) for r in row.requires[SCALE])
    return replace(row, requires={**row.requires, SCALE: requires}, overrides=moved(row.overrides),
                   group_overrides={g: moved(o) for g, o in row.group_overrides.items()})  # fmt: skip


def _command(requirement: Requirement, exports: Sequence[Path]) -> str:
    """A `requires` command writing the rehearsal's: its output folder `located`, and (`paths.log_dir`) any run
    folder it makes by default too."""
    args = [_moved(a, exports) for a in shlex.split(requirement.command)]
    return shlex.join([*args, f"paths.log_dir={located('logs')}"])


def _moved(override: str, exports: Sequence[Path]) -> str:
    """`key=value` with `value` `located` when it names an export, a path inside one, or a folder holding one."""
    key, sep, value = override.partition("=")
    if not sep or not value:
        return override
    path = _absolute(value)
    if any(path == e or path in e.parents or e in path.parents for e in exports):
        return f"{key}={located(value)}"
    return override


def _absolute(path: str | os.PathLike) -> Path:
    """`path` as a job started in the checkout reads it."""
    return Path(os.path.normpath(PROJECT_ROOT / Path(path).expanduser()))


@contextlib.contextmanager
def environment(root: Path, shared_data: Path) -> Iterator[dict[str, str]]:
    """The variables a rehearsed job runs with (its stand-in data, models and servers laid out under `root`),
    valid while the context is open (the stand-in server stops when it closes)."""
    if str(PROJECT_ROOT) not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT))
    from tests.standins import data, hub

    hub_cache, data_root = root / "hub", root / "data"
    hub.lay_out(hub_cache)
    share_conversions(root / CACHE)  # the hub stand-ins link their weights there too
    data.lay_out(data_root, shared_data)
    stanza_resources = root / "stanza_resources"  # laid out as stanza.download lays it, holding no real model
    (stanza_resources / "en" / "constituency").mkdir(parents=True, exist_ok=True)
    (stanza_resources / "resources.json").write_text("{}\n", encoding="utf-8")
    (stanza_resources / "en" / "constituency" / "standin.txt").write_text(
        "tests/standins/stanza parses with the bundled spaCy model\n", encoding="utf-8")
    env = {
        "PYTHONPATH": os.pathsep.join([str(STANDINS), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "HF_HUB_CACHE": str(hub_cache),
        "HF_HUB_OFFLINE": "1",
        "HOPRAG_DATA": str(data_root),
        "HOPRAG_CACHE": str(root / CACHE),
        "HOPRAG_STANDIN_MAX_TOKENS": str(MAX_TOKENS),
        "HOPRAG_STANDIN_GPU_GIB": "80",
        "STANZA_RESOURCES_DIR": str(stanza_resources),
    }
    with contextlib.ExitStack() as stack:
        env |= stack.enter_context(_served())
        yield env


@contextlib.contextmanager
def _served() -> Iterator[dict[str, str]]:
    """The stand-in servers: an OpenAI-compatible one serving every model name a paper table asks of one
    (TreeRare's GPT-4o-mini, PruningRAG's judge), and CRAG's mock API, each reached through the variable its
    clients read (`OPENAI_BASE_URL`, `CRAG_MOCK_API_URL`)."""
    from tests.standins.crag_api import CragAPIStandIn
    from tests.standins.openai_server import OpenAIStandIn

    key = "rehearsal-key"
    with OpenAIStandIn(SERVED, api_key=key, threads=1) as server, CragAPIStandIn() as crag:
        yield {"OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": key, "CRAG_MOCK_API_URL": crag.url}


@contextlib.contextmanager
def applied(scale: str) -> Iterator[dict[str, str]]:
    """At scale=rehearsal, this process's environment while the context is open is the rehearsal's (so the
    preflight asks what the jobs will, and the jobs' child process inherits it); at other scales nothing."""
    if scale != SCALE:
        yield {}
        return
    shared = data_root()  # the bundled samples, found before HOPRAG_DATA points at the rehearsal's data root
    with environment(root(), shared) as env:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            yield env
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def gpus() -> list[int]:
    """The stand-in engine's simulated GPU, as the preflight sizes engines against it."""
    return [int(float(os.environ.get("HOPRAG_STANDIN_GPU_GIB", "80")) * 2**30)]


def provide(commands: Sequence[str], exports: Collection[str] = ()) -> None:
    """Run what the preflight says provides a missing need, as a user would before a paper run, so the
    rehearsal's jobs start with their indexes built and their exports trained, never inside an eval job: each
    index build (`python build_index.py ...`), then each training that makes a row's export (`python train.py
    ...`, one of `exports`: the table's `requires` commands), with the `TRAINING` swaps. Anything else is
    refused before anything runs."""
    builds = [c for c in commands if _script(c) == "build_index.py"]
    trainings = [c for c in commands if _script(c) == "train.py" and c in exports]
    refused = [c for c in commands if c not in builds and c not in trainings]
    if refused:
        raise ValueError(f"the rehearsal only builds indexes and trains the exports its table requires, not "
                         f"{refused[0]!r}")  # fmt: skip
    for command in builds:
        _run(shlex.split(command))
    for command in trainings:
        _run([*shlex.split(command), *TRAINING])


def _script(command: str) -> str:
    """The script a `python <script> ...` command runs ("" for any other command)."""
    args = shlex.split(command)
    return args[1] if len(args) > 1 and args[0] == "python" else ""


def _run(args: Sequence[str]) -> None:
    log.info("rehearsal: %s", shlex.join(args))
    start = time.monotonic()
    subprocess.run([sys.executable, *args[1:]], cwd=PROJECT_ROOT, check=True)
    log.info("rehearsal: %s done in %.0f s", args[1], time.monotonic() - start)
