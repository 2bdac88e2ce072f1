"""`scale=rehearsal`: a table's paper jobs run end to end on this machine, with only what cannot run here swapped.

The jobs are the paper scale's (rows, methods, settings, backends, judges, file names and folder layout), launched
the same way; what changes is their environment (`environment`) and the question count (`swap`):

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
- questions: `QUESTIONS` per run, drawn with the paper's seed where the paper draws a sample.

The stand-ins live in the test suite's helpers (tests/standins/), never in the methods. A rehearsal's figures
mean nothing; it shows that every row of the paper configuration runs and is scored."""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from hoprag.paths import PROJECT_ROOT, cache_root, data_root

log = logging.getLogger(__name__)

QUESTIONS = 2  # per run (a paper sample of 500 is drawn as QUESTIONS with the same seed)
MAX_TOKENS = 48  # the stand-in engine's per-request generation cap on a CPU (a cut reply ends "length")
STANDINS = PROJECT_ROOT / "tests" / "standins"
SERVED = ["gpt-4o-mini", "gpt-6-luna"]  # the model names the paper tables ask an OpenAI-compatible API for
STAND_INS = (
    "model weights: the paper's hub ids hold the bundled SmolLM2-135M (chat models; Qwen3's thinks first) and "
    "MiniLM (encoders), in a local Hugging Face cache",
    f"vLLM: a CPU stand-in engine with a simulated 80 GiB GPU; at most {MAX_TOKENS} generated tokens a request "
    "there and on the stand-in server",
    "served models and judges: a local OpenAI-compatible stand-in server running SmolLM2; CRAG's mock API: a "
    "stand-in answering its endpoints from test fixtures (empty where none)",
    "Stanza's constituency parser: brackets derived from the bundled spaCy model's dependency parse; task heads "
    "(the cross-encoder, the SQuAD reader): MiniLM with untrained heads",
    "data: the bundled samples under the official file names; wiki-18: 7,406 real passages in FlashRAG's layout",
    f"questions: {QUESTIONS} per run (the paper's seed draws them where it draws a sample)",
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


@contextlib.contextmanager
def environment(root: Path, shared_data: Path) -> Iterator[dict[str, str]]:
    """The variables a rehearsed job runs with (its stand-in data, models and servers laid out under `root`),
    valid while the context is open (the stand-in server stops when it closes)."""
    if str(PROJECT_ROOT) not in sys.path:
        sys.path.insert(0, str(PROJECT_ROOT))
    from tests.standins import data, hub

    hub_cache, data_root = root / "hub", root / "data"
    hub.lay_out(hub_cache)
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
    if scale != "rehearsal":
        yield {}
        return
    shared = data_root()  # the bundled samples, found before HOPRAG_DATA points at the rehearsal's data root
    with environment(cache_root() / "rehearsal", shared) as env:
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


def provide(commands: Sequence[str]) -> None:
    """Run what the preflight says provides a missing index (`python build_index.py ...`), as a user would
    before a paper run, so the rehearsal's jobs start with their indexes built, never inside an eval job."""
    for command in commands:
        args = shlex.split(command)
        if args[:2] != ["python", "build_index.py"]:
            raise ValueError(f"the rehearsal only runs index builds, not {command!r}")
        log.info("rehearsal: %s", command)
        subprocess.run([sys.executable, *args[1:]], cwd=PROJECT_ROOT, check=True)
