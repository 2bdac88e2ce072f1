"""Servers and credentials: every object with a `base_url` is asked what a job would ask first. An
OpenAI-compatible LLM or judge (it names a `model`): `GET <base_url>/models`, which must list the model; a
hosted one (not on this machine) needs OPENAI_API_KEY when its config gives no key; OPENAI_BASE_URL, when set,
stands for OpenAI's own URL (a local stand-in server). Any other server (the CRAG
mock API): `GET <base_url>/`, its client's ping. Keys are sent as the job sends them and never shown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

from hoprag.reproduce.preflight.host import Host, is_local
from hoprag.reproduce.preflight.need import MISSING, OK, Need

KEY_VAR = "OPENAI_API_KEY"  # what hoprag.llm.OpenAICompatLLM reads when `api_key` is null
OPENAI_API = "https://api.openai.com/v1"
URL_VAR = "OPENAI_BASE_URL"  # the OpenAI client convention: where "the OpenAI API" is, when set
MOCK_API_START = "cd mock_api && uvicorn server:app --port {port}  # in a clone of facebookresearch/CRAG"


def service_needs(objects: list[dict[str, Any]], host: Host) -> Iterator[Need]:
    for obj in objects:
        url = obj.get("base_url")
        if not isinstance(url, str):
            continue
        if url.rstrip("/") == OPENAI_API and host.has_env(URL_VAR):
            url = host.env[URL_VAR]
        if isinstance(obj.get("model"), str):
            yield _served(url.rstrip("/"), obj["model"], obj.get("api_key"), host)
            if not is_local(url) and obj.get("api_key") is None:
                present = host.has_env(KEY_VAR)
                yield Need("credential", KEY_VAR, f"set {KEY_VAR} in the environment", OK if present else MISSING,
                           "" if present else f"{urlsplit(url).hostname} needs a key")  # fmt: skip
        else:
            yield _pinged(url.rstrip("/"), obj["_target_"].rsplit(".", 1)[-1], host)


def _served(url: str, model: str, api_key: str | None, host: Host) -> Need:
    key = api_key or host.env.get(KEY_VAR) or "EMPTY"
    answer = host.get(f"{url}/models", {"Authorization": f"Bearer {key}"})
    what = f"{url} serving {model}"
    port = urlsplit(url).port or 8000
    command = f"vllm serve {model} --port {port}" if is_local(url) else f"network access to {urlsplit(url).hostname}"
    if answer.status != 200 or not isinstance(answer.body, dict):
        return Need("server", what, command, MISSING, f"GET {url}/models: {answer.error or answer.status}")
    served = [m.get("id") for m in answer.body.get("data") or [] if isinstance(m, dict)]
    if model not in served:
        return Need("server", what, command, MISSING, f"it serves {', '.join(map(str, served)) or 'no model'}")
    return Need("server", what, command, OK)


def _pinged(url: str, name: str, host: Host) -> Need:
    answer = host.get(f"{url}/")
    command = MOCK_API_START.format(port=urlsplit(url).port or 80) if name == "APISource" else f"start {name}'s server"
    ok = answer.status is not None and 200 <= answer.status < 300
    return Need("server", f"{url} ({name})", command, OK if ok else MISSING,
                "" if ok else f"GET {url}/: {answer.error or answer.status}")  # fmt: skip
