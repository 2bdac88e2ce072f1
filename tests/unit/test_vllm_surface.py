"""hoprag/llm/vllm.py against the source of the vLLM release constraints-gpu.txt pins, read without a GPU.

tests/unit/test_llm_vllm.py runs the backend against stand-ins; this checks that what it calls exists in the
real release: every engine argument (the backend's and the configs' `engine_kwargs`), `SamplingParams` field,
`generate` keyword, engine method, output field read and `from vllm... import` is defined there. What the
backend uses is read from its syntax tree, so a new keyword is checked without touching this file. The
release's Python files come out of its wheel on PyPI by HTTP range requests (a few hundred kB of ~340 MB),
kept in pytest's cache; skipped when PyPI cannot be reached.
"""

from __future__ import annotations

import ast
import io
import json
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
import yaml

from hoprag.paths import PROJECT_ROOT
from tests.scripts import load_script

pytestmark = pytest.mark.network

BACKEND = PROJECT_ROOT / "hoprag" / "llm" / "vllm.py"
# The variables of vllm.py that hold vLLM objects, and the class each holds.
ROLES = {"output": "RequestOutput", "completion": "CompletionOutput", "c": "CompletionOutput", "entry": "Logprob",
         "e": "Logprob"}  # fmt: skip
# Settable through engine_kwargs, as vllm.py's docstring and conf/llm/vllm.yaml say.
DOCUMENTED_ENGINE_ARGS = {"logprobs_mode", "enforce_eager"}


class RangeFile(io.RawIOBase):
    """A remote file read by HTTP range requests, so `zipfile` fetches only a wheel's index and chosen members."""

    def __init__(self, url: str) -> None:
        self.url, self.pos = url, 0
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=30) as reply:
            self.size = int(reply.headers["Content-Length"])

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = (0, self.pos, self.size)[whence] + offset
        return self.pos

    def readinto(self, buffer) -> int:
        end = min(self.pos + len(buffer), self.size) - 1
        if end < self.pos:
            return 0
        ask = urllib.request.Request(self.url, headers={"Range": f"bytes={self.pos}-{end}"})
        with urllib.request.urlopen(ask, timeout=60) as reply:
            if reply.status != 206:  # a mirror that ignores ranges would send all ~340 MB: skip instead
                raise ConnectionError(f"{self.url} answered a range request with HTTP {reply.status}")
            data = reply.read()
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


class Release:
    """vLLM's Python files at one version, from its wheel (any platform's: the Python files are the same)."""

    def __init__(self, version: str, cache: Path) -> None:
        self.version, self.cache, self._zip = version, cache, None

    def source(self, path: str) -> str | None:
        """The text of `path` (e.g. "vllm/outputs.py"), None when the release has no such file."""
        cached = self.cache / path
        if not cached.is_file():
            names = self.wheel().namelist()
            if path not in names:
                return None
            cached.parent.mkdir(parents=True, exist_ok=True)
            cached.write_bytes(self.wheel().read(path))
        return cached.read_text()

    def module(self, name: str) -> ast.Module | None:
        """A module's syntax tree by dotted name (a package's `__init__.py`), None when absent."""
        base = name.replace(".", "/")
        text = self.source(f"{base}.py") or self.source(f"{base}/__init__.py")
        return None if text is None else ast.parse(text)

    def wheel(self) -> zipfile.ZipFile:
        if self._zip is None:
            ask = urllib.request.Request("https://pypi.org/simple/vllm/",
                                         headers={"Accept": "application/vnd.pypi.simple.v1+json"})  # fmt: skip
            with urllib.request.urlopen(ask, timeout=30) as reply:
                files = json.load(reply)["files"]
            url = next(f["url"] for f in files if f["filename"].startswith(f"vllm-{self.version}-"))
            self._zip = zipfile.ZipFile(io.BufferedReader(RangeFile(url), buffer_size=1 << 20))
        return self._zip

    def find_class(self, module: str, name: str) -> ast.ClassDef:
        tree = self.module(module)
        assert tree is not None, f"vllm {self.version} has no module {module}"
        found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
        assert found, f"vllm {self.version}: {module} defines no class {name}"
        return found[0]

    def exported(self, name: str) -> ast.ClassDef:
        """A class `vllm.<name>`, found through vllm/__init__.py's lazy `MODULE_ATTRS` table."""
        init = self.module("vllm")
        table = next(n.value for n in init.body if isinstance(n, ast.Assign) and _name(n.targets[0]) == "MODULE_ATTRS")
        where = ast.literal_eval(table)
        assert name in where, f"vllm {self.version} exports no {name}"
        module, attr = where[name].split(":")
        return self.find_class("vllm" + module, attr)


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else None


def members(cls: ast.ClassDef) -> set[str]:
    """What an instance of `cls` has: annotated fields, methods and properties, attributes set on self."""
    names = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    names |= {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _name(node.value) == "self":
            names.add(node.attr)
    return names


def parameters(cls: ast.ClassDef, method: str) -> tuple[set[str], bool]:
    """A method's keyword-passable parameters, and whether it takes **kwargs."""
    func = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method)
    args = func.args
    return {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs} - {"self"}, args.kwarg is not None


def dict_keys(node: ast.AST) -> set[str]:
    """The string keys of every dict display in `node`."""
    return {k.value for d in ast.walk(node) if isinstance(d, ast.Dict) for k in d.keys if isinstance(k, ast.Constant)}


def is_self_attr(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr and _name(node.value) == "self"


class Backend:
    """What hoprag/llm/vllm.py uses of vLLM, read from its syntax tree."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.assigned: dict[str, list[ast.AST]] = {}  # local name -> the values assigned to it
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                self.assigned.setdefault(node.targets[0].id, []).append(node.value)

    def spread(self, node: ast.AST) -> set[str]:
        """The keys `**node` adds: a dict display's, or those of the dicts assigned to a name."""
        values = self.assigned.get(node.id, []) if isinstance(node, ast.Name) else [node]
        return set().union(*(dict_keys(v) for v in values))

    def keywords(self, call: ast.Call) -> set[str]:
        spread = (self.spread(k.value) for k in call.keywords if not k.arg)
        return {k.arg for k in call.keywords if k.arg}.union(*spread)

    def calls(self, name: str) -> list[ast.Call]:
        """Calls of `name(...)` or `x.name(...)`."""
        return [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and
                (getattr(n.func, "attr", None) == name or _name(n.func) == name)]  # fmt: skip

    def engine_args(self) -> set[str]:
        """The keys of `self.engine_args`, what `vllm.LLM(**self.engine_args)` is given."""
        names: set[str] = set()
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.Assign | ast.AnnAssign):
                continue
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if is_self_attr(target, "engine_args"):
                    spread = [v for d in ast.walk(node.value) if isinstance(d, ast.Dict)
                              for k, v in zip(d.keys, d.values) if k is None]  # fmt: skip
                    names |= dict_keys(node.value).union(*(self.spread(v) for v in spread))
                elif isinstance(target, ast.Subscript) and is_self_attr(target.value, "engine_args"):
                    names.add(target.slice.value)
        return names

    def engine_methods(self) -> set[str]:
        """Methods called on the engine: `self.engine.X(...)`, `_ENGINES[key].X(...)`."""
        return {n.func.attr for n in ast.walk(self.tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and (is_self_attr(n.func.value, "engine") or
                     (isinstance(n.func.value, ast.Subscript) and _name(n.func.value.value) == "_ENGINES"))}  # fmt: skip

    def reads(self) -> dict[str, set[str]]:
        """The fields read from vLLM's outputs, by class: `x.field` and `getattr(x, "field")` for x in ROLES,
        `top[i].field` for a position's top log-probs."""
        found: dict[str, set[str]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
                held = node.value
                top = isinstance(held, ast.Subscript) and _name(held.value) == "top"
                role = "Logprob" if top else ROLES.get(_name(held))
                if role:
                    found.setdefault(role, set()).add(node.attr)
            elif isinstance(node, ast.Call) and _name(node.func) == "getattr" and _name(node.args[0]) in ROLES:
                found.setdefault(ROLES[_name(node.args[0])], set()).add(node.args[1].value)
        return found

    def imports(self) -> list[tuple[str, str]]:
        return [(n.module, a.name) for n in ast.walk(self.tree) if isinstance(n, ast.ImportFrom)
                and (n.module or "").startswith("vllm.") for a in n.names]  # fmt: skip


def config_engine_kwargs() -> set[str]:
    """Every `engine_kwargs` key the configs set."""
    names: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "engine_kwargs" and isinstance(value, dict):
                    names.update(value)
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for path in (PROJECT_ROOT / "conf").rglob("*.yaml"):
        walk(yaml.safe_load(path.read_text()))
    return names


@pytest.fixture(scope="module")
def release(pytestconfig, tmp_path_factory) -> Release:
    version = load_script("installs/gpu_constraints.py").read_pins(PROJECT_ROOT / "constraints-gpu.txt")["vllm"]
    folder = f"vllm-{version}-source"
    cache = getattr(pytestconfig, "cache", None)  # None under -p no:cacheprovider
    cache = cache.mkdir(folder) if cache else tmp_path_factory.mktemp(folder)
    found = Release(version, cache)
    try:
        found.module("vllm")
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        pytest.skip(f"PyPI cannot be reached: {err}")
    return found


@pytest.fixture(scope="module")
def backend() -> Backend:
    return Backend(ast.parse(BACKEND.read_text()))


def test_engine_arguments_are_the_releases(release, backend):
    llm = release.exported("LLM")
    named, forwards = parameters(llm, "__init__")
    assert forwards, "vllm.LLM no longer forwards **kwargs to EngineArgs"
    accepted = named | members(release.exported("EngineArgs"))
    used = backend.engine_args()
    assert {"model", "max_logprobs", "enable_lora"} <= used  # the syntax-tree reading still works
    used |= config_engine_kwargs() | DOCUMENTED_ENGINE_ARGS
    assert not used - accepted, f"vllm {release.version} has no engine argument {sorted(used - accepted)}"


def test_sampling_params_and_generate_keywords(release, backend):
    fields = members(release.exported("SamplingParams"))
    (sampling,) = backend.calls("SamplingParams")
    used = backend.keywords(sampling)
    assert not used - fields, f"vllm {release.version}'s SamplingParams has no {sorted(used - fields)}"
    assert {"n", "logprobs", "skip_special_tokens"} <= used  # the syntax-tree reading still works
    accepted, _ = parameters(release.exported("LLM"), "generate")
    (generate,) = [c for c in backend.calls("generate") if is_self_attr(c.func.value, "engine")]
    used = backend.keywords(generate)
    assert not used - accepted, f"vllm {release.version}'s LLM.generate takes no {sorted(used - accepted)}"
    assert "lora_request" in used
    methods = members(release.exported("LLM"))
    assert backend.engine_methods() <= methods


def test_output_fields_read_are_the_releases(release, backend):
    classes = {"RequestOutput": release.exported("RequestOutput"),
               "CompletionOutput": release.exported("CompletionOutput"),
               "Logprob": release.find_class("vllm.logprobs", "Logprob")}  # fmt: skip
    reads = backend.reads()
    for name, fields in reads.items():
        missing = fields - members(classes[name])
        assert not missing, f"vllm {release.version}'s {name} has no {sorted(missing)}"
    assert set(reads) == set(classes) and "token_ids" in reads["CompletionOutput"]


def test_imports_and_lora_request(release, backend):
    for module, name in backend.imports():
        tree = release.module(module)
        assert tree is not None, f"vllm {release.version} has no module {module}"
        defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
        assert name in defined, f"vllm {release.version}: {module} defines no {name}"
    # LoRARequest(name, int id, path): the positional order hoprag passes them in
    fields = [n.target.id for n in release.find_class("vllm.lora.request", "LoRARequest").body
              if isinstance(n, ast.AnnAssign)]  # fmt: skip
    (call,) = backend.calls("LoRARequest")
    assert fields[: len(call.args)] == ["lora_name", "lora_int_id", "lora_path"][: len(call.args)]
