"""An OpenAI-compatible HTTP backend: vLLM's server, llama.cpp's `llama-server`, Ollama, hosted APIs.

Standard library only (`urllib.request`). Each prompt of a batch is one request (`n` choices). The requests
of one `generate` call go out together, at most `max_concurrency` in flight (a pool of threads): a served model
decodes the requests in flight together (vLLM's continuous batching); 1 suits a server that answers one
request at a time (llama.cpp's with one slot). Replies come back in prompt order whatever order the server
answers in; only the generation cache's misses are sent, and a prompt is charged once, with the usage of the
reply that answered it (never for a retried attempt). Each request may take `timeout + max_tokens *
timeout_per_token` seconds.

Servers differ, so on first use the backend probes the server with a few one-token requests (cached per
base URL + model for the process, shown as `capabilities` in the run's metrics.json): does it return
token log-probs, and for which request fields (`logprobs`, `logprobs` + `top_logprobs` as llama.cpp's
chat endpoint wants, or only the completions endpoint); does it honour `n`; does it honour an assistant
prefill (vLLM's `continue_final_message`: the probe compares the prompt tokens of a continued and of a
re-opened final assistant message, which a server ignoring the flag renders alike). `probe: false`
takes declared `capabilities` instead (hosted APIs). Then:

- With `chat` (the default) prompts go to `{base_url}/chat/completions` as messages (a plain string is one
  user message), else to `{base_url}/completions` as the prompt string. A prefill (messages ending with an
  assistant message) is sent with `continue_final_message` where the server honours it; elsewhere the chat
  template is rendered locally with `llm.tokenizer` (the final assistant message left open) and sent to the
  completions endpoint, so the reply continues the prefix and never repeats it. The same local rendering
  serves log-probs from a server whose chat endpoint has none but whose completions endpoint does.
- A server that ignores `n` is asked once per sample; sample i > 0 of a prompt seeded s gets the seed
  `derived_seed(s, i)`, a hash no other request of a search reuses (not s + i, which is the next
  question's or step's seed), and every request's prompt tokens are charged.
- Log-probs are parsed when the server returns them; when it returns none, or a null for any token, the
  generation's `logprobs` is `None` (unknown, never made up; counted per question as `missing_logprobs`).
  Token counts come from the response's `usage` (a request's completion tokens are split over its
  choices, by their token counts when the server reports log-probs, else evenly); llama.cpp and the
  OpenAI API leave the end-of-sequence token out, as `Generation`'s token rule does.
- `chat_template_kwargs` (e.g. `{enable_thinking: false}`) are sent as the request field of that name
  (vLLM's chat endpoint passes them to the template) and used when the template is rendered locally.
- A reasoning model's thinking, returned apart by a server's reasoning parser (the message's `reasoning`,
  or `reasoning_content` in older vLLM) or inline as `<think>…</think>`, is held apart from the text
  (`hoprag.llm.reasoning`); the returned log-probs cover both, so the thinking's tokens are dropped from them.
  A server looks for stop strings in the whole reply: one met while thinking ends it there (`reasoning_cut`).
- The generation cache keys on `identity()`: endpoint, configured and served model, chat and log-prob
  settings, how prefills are sent, the template settings and `extra_body`, besides the prompt and every
  sampling field.

Connection errors, timeouts, 429 and 5xx are retried `max_retries` times with exponential back-off and
jitter (a `Retry-After` header is honoured up to `max_backoff`); a 429 or 503 (slow down) also holds back
every other request of the backend for that delay, so a pool of concurrent requests backs off together; other
4xx fail at once with the server's message. A server that stays unreachable raises `LLMConnectionError`
naming the URL. The errors and the reading of response bodies live in `hoprag.llm.openai_http`.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from hoprag.llm.base import LLM, Prompt, continues_reply
from hoprag.llm.openai_http import (
    RETRY_STATUS,
    THROTTLE_STATUS,
    LLMConnectionError,
    LLMError,
    LLMRequestError,
    choice_logprobs,
    error_detail,
    parse_response,
    retry_after_seconds,
    start_hint,
)
from hoprag.llm.reasoning import opens_block
from hoprag.llm.tokenizer import render_prompt
from hoprag.llm.types import Generation, SamplingParams
from hoprag.utils.secrets import redact

log = logging.getLogger(__name__)

CAPABILITIES = ("logprobs", "n", "prefill")
_PROBED: dict[tuple[Any, ...], dict[str, Any]] = {}  # probed capabilities per base URL + model (+ what is probed)
_PROBE_LOCK = threading.Lock()


class OpenAICompatLLM(LLM):
    """A model behind an OpenAI-compatible API (see the module docstring)."""

    def __init__(
        self,
        model: str,
        base_url: str = "http://localhost:8000/v1",
        name: str | None = None,
        api_key: str | None = None,
        chat: bool = True,
        logprobs: bool = True,
        timeout: float = 60.0,
        timeout_per_token: float = 0.5,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        max_concurrency: int = 1,
        extra_body: Mapping[str, Any] | None = None,
        default: SamplingParams | Mapping[str, Any] | None = None,
        generation_cache: str | None = None,
        tokenizer: str | None = None,
        max_input_tokens: int | None = None,
        probe: bool = True,
        capabilities: Mapping[str, Any] | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        reasoning_budget: int = 0,
        max_tokens_field: str = "max_tokens",
    ) -> None:
        super().__init__(default, generation_cache, max_input_tokens, chat_template_kwargs, reasoning_budget)
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ValueError(f"max_tokens_field={max_tokens_field!r}: max_tokens or max_completion_tokens")
        # OpenAI's reasoning models refuse `max_tokens` and take `max_completion_tokens` (so do its other chat
        # models); llama.cpp's server and older vLLM releases read `max_tokens`
        self.max_tokens_field = max_tokens_field
        if not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValueError(f"max_concurrency={max_concurrency!r} must be an integer >= 1 (requests in flight)")
        if max_retries < 0 or timeout <= 0 or timeout_per_token < 0:
            raise ValueError("timeout must be positive, max_retries and timeout_per_token non-negative")
        if max_input_tokens is not None and tokenizer is None:
            raise ValueError(
                "max_input_tokens needs llm.tokenizer (the served model's tokenizer: hub id, local folder or "
                ".gguf) to count prompt tokens"
            )
        if not probe and capabilities is None:
            raise ValueError(
                "llm.probe=false needs declared llm.capabilities, e.g. {logprobs: true, n: true, prefill: false}"
            )
        unknown = set(capabilities or {}) - {*CAPABILITIES, "logprob_fields", "model"}
        if unknown:
            raise ValueError(f"unknown llm.capabilities {sorted(unknown)}: known are {list(CAPABILITIES)}")
        self.tokenizer_ref = tokenizer
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.name = name or model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "EMPTY")
        self.chat = chat
        self.logprobs = logprobs
        self.timeout = timeout
        self.timeout_per_token = timeout_per_token
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_concurrency = max_concurrency
        self.extra_body = dict(extra_body or {})
        self.probe = probe
        self.declared = None if probe else _declared(capabilities or {}, chat, model)
        self.retries = 0  # retried requests over the object's life
        self._lock = threading.Lock()
        self._resume_at = 0.0  # monotonic time before which no request goes out (a 429 or 503 paused them all)

    # -- token counting (with the served model's tokenizer, loaded locally) -------------------------------

    @property
    def tokenizer(self) -> Any:
        if self.tokenizer_ref is None:
            raise LLMError(
                f"{self.name} cannot count tokens (prompt budgets, MMKP token costs): set llm.tokenizer to the "
                "served model's tokenizer (hub id, local folder or .gguf file)"
            )
        from hoprag.llm.tokenizer import load_tokenizer

        return load_tokenizer(self.tokenizer_ref)

    @property
    def token_counting(self) -> str:
        return f"tokenizer:{self.tokenizer_ref}" if self.tokenizer_ref else "none"

    @property
    def chat_template(self) -> bool:  # prompts are counted as the server's chat template renders them
        return self.chat

    @property
    def endpoint(self) -> str:
        return f"{self.base_url}/chat/completions" if self.chat else f"{self.base_url}/completions"

    # -- capabilities -------------------------------------------------------------------------------

    @property
    def capabilities(self) -> dict[str, Any]:
        """What the server does (see the module docstring): `logprobs`, `logprob_fields` ("logprobs",
        "logprobs+top_logprobs", "completions" or None), `n`, `prefill`, the `model` it reports, and
        whether this was `probed`. Probed once per base URL + model and process; declared with probe off."""
        if self.declared is not None:
            return self.declared
        key = (self.base_url, self.model, self.chat, self.logprobs, self.tokenizer_ref is not None)  # what is probed
        with _PROBE_LOCK:
            if key not in _PROBED:
                _PROBED[key] = self._probe()
                log.info("%s at %s: %s", self.model, self.base_url, _PROBED[key])
            return dict(_PROBED[key])

    def missing_capabilities(self, needs: Iterable[str]) -> list[str]:
        """Of `needs`, what neither the server nor this backend provides: log-probs (none from the server,
        or `llm.logprobs` off) and prefill (ignored by the server, and no `llm.tokenizer` to render the chat
        template locally). `n` is always provided: a server that ignores it is asked once per sample."""
        caps = self.capabilities
        have = {
            "logprobs": self.logprobs and caps["logprobs"],
            "n": True,
            "prefill": caps["prefill"] or (self.chat and self.tokenizer_ref is not None),
        }
        return [need for need in needs if not have.get(need, False)]

    def _probe(self) -> dict[str, Any]:
        """One tiny request per capability (one token each; a 4xx answer means "no")."""
        chat, completions = f"{self.base_url}/chat/completions", f"{self.base_url}/completions"
        ask = [{"role": "user", "content": "Say yes."}]
        base = {"model": self.model, "max_tokens": 1, "temperature": 0.0}
        caps: dict[str, Any] = {"logprobs": False, "logprob_fields": None, "n": False, "prefill": False,
                                "model": self.model, "probed": True}  # fmt: skip
        lp_tries: list[tuple[str, str, dict[str, Any]]] = []
        if self.logprobs and self.chat:
            lp_tries += [
                ("logprobs", chat, {"messages": ask, "logprobs": True}),
                ("logprobs+top_logprobs", chat, {"messages": ask, "logprobs": True, "top_logprobs": 1}),
            ]
        if self.logprobs and (not self.chat or self.tokenizer_ref is not None):
            lp_tries.append(("completions", completions, {"prompt": "Say yes.", "logprobs": 1}))
        for fields, url, extra in lp_tries:
            answer = self._probe_post(url, {**base, **extra})
            if answer is None:
                continue
            caps["model"] = answer.get("model") or caps["model"]
            choices = answer.get("choices") or [{}]
            if choice_logprobs(choices[0].get("logprobs"))[1] is not None:
                caps["logprobs"], caps["logprob_fields"] = True, fields
                break
        url, ask_body = (chat, {"messages": ask}) if self.chat else (completions, {"prompt": "Say yes."})
        answer = self._probe_post(url, {**base, **ask_body, "temperature": 1.0, "n": 2, "seed": 0})
        caps["n"] = answer is not None and len(answer.get("choices") or ()) >= 2
        if self.chat:
            prefilled = [*ask, {"role": "assistant", "content": "Yes"}]
            kept = self._probe_post(chat, {**base, "messages": prefilled, "continue_final_message": True,
                                           "add_generation_prompt": False})  # fmt: skip
            reopened = self._probe_post(chat, {**base, "messages": prefilled, "continue_final_message": False,
                                               "add_generation_prompt": True})  # fmt: skip
            tokens = [int(((a or {}).get("usage") or {}).get("prompt_tokens") or 0) for a in (kept, reopened)]
            caps["prefill"] = 0 < tokens[0] < tokens[1]  # a continued prefill is not closed and re-opened
        return caps

    def _probe_post(self, url: str, body: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return self.post(url, {**body, **self.extra_body}, timeout=self.request_timeout(1))
        except LLMRequestError as err:
            # a refused field says what the server cannot do; a refused key or an unknown model says nothing
            # about it (and would be cached as "cannot" for every later client of the same server)
            if err.status is not None and 400 <= err.status < 500 and err.status not in (401, 403, 404):
                return None
            raise

    def identity(self) -> str:
        """Everything besides the prompt and the sampling fields that changes a reply: the generation
        cache's key (a server that serves another model behind the same URL misses the cache). Credentials
        are not part of it: the API key never is, and a secret in `extra_body` enters redacted."""
        caps = self.capabilities
        return json.dumps(
            {
                "backend": type(self).__name__, "base_url": self.base_url, "model": self.model,
                "served_model": caps.get("model"), "chat": self.chat, "logprobs": self.logprobs,
                "logprob_fields": caps.get("logprob_fields"), "server_prefill": caps.get("prefill"),
                "tokenizer": self.tokenizer_ref, "extra_body": redact(self.extra_body),
                **({"chat_template_kwargs": self.chat_template_kwargs} if self.chat_template_kwargs else {}),
            },
            sort_keys=True,
        )  # fmt: skip

    # -- requests -----------------------------------------------------------------------------------

    def request_timeout(self, max_tokens: int) -> float:
        """Seconds one request may take: `timeout + max_tokens * timeout_per_token`."""
        return self.timeout + max_tokens * self.timeout_per_token

    def request(self, prompt: Prompt, params: SamplingParams, n: int | None = None) -> tuple[str, dict[str, Any]]:
        """(url, JSON body) of one request for `prompt` (see the module docstring for the route)."""
        caps = self.capabilities
        body: dict[str, Any] = {
            "model": self.model,
            "n": n or params.n,
            self.max_tokens_field: params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        logprobs = self.logprobs and caps["logprobs"]
        local = self.chat and (
            (continues_reply(prompt) and not caps["prefill"]) or (logprobs and caps["logprob_fields"] == "completions")
        )
        if self.chat and not local:
            url = f"{self.base_url}/chat/completions"
            body["messages"] = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [
                dict(m) for m in prompt
            ]
            if logprobs:
                body["logprobs"] = True
                if caps["logprob_fields"] == "logprobs+top_logprobs":
                    body["top_logprobs"] = 1
            if continues_reply(prompt):  # vLLM's chat extras, sent where the probe found them honoured
                body["continue_final_message"], body["add_generation_prompt"] = True, False
            if self.chat_template_kwargs:
                body["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        else:
            url = f"{self.base_url}/completions"
            if local:
                if self.tokenizer_ref is None:
                    raise LLMError(
                        f"{self.base_url} ignores assistant prefills (continue_final_message): set llm.tokenizer "
                        "to the served model's tokenizer to render the chat template locally, or turn the "
                        "method's prefill off"
                    )
                prompt = render_prompt(self.tokenizer, prompt, True, self.chat_template_kwargs)[0]
            elif not isinstance(prompt, str):
                raise ValueError("chat-message prompts need chat=True (the completions endpoint takes a string)")
            body["prompt"] = prompt
            if logprobs:
                body["logprobs"] = 1
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        body.update(self.extra_body)
        return url, body

    def post(self, url: str, body: Mapping[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """POST `body` as JSON and return the decoded answer, retrying as the module docstring says."""
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"}
        attempt = 0
        while True:
            retry_after: float | None = None
            throttled = False
            self._await_resume()
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=timeout or self.timeout) as response:
                    raw = response.read()
                try:
                    return json.loads(raw)
                except json.JSONDecodeError as err:
                    raise LLMRequestError(f"{url} answered with a body that is not JSON: {raw[:200]!r}") from err
            except urllib.error.HTTPError as err:
                detail = error_detail(err)
                if err.code not in RETRY_STATUS or attempt >= self.max_retries:
                    raise LLMRequestError(
                        f"{url} answered HTTP {err.code}"
                        + (f" after {attempt + 1} attempts" if attempt else "")
                        + f": {detail}",
                        status=err.code,
                    ) from None
                retry_after = retry_after_seconds(err)
                throttled = err.code in THROTTLE_STATUS
                reason = f"HTTP {err.code}"
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as err:
                if attempt >= self.max_retries:
                    why = getattr(err, "reason", err)
                    raise LLMConnectionError(
                        f"cannot reach the OpenAI-compatible server at {url} after {attempt + 1} attempts "
                        f"({why}). {start_hint(self.base_url)}"
                    ) from None
                reason = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
            delay = min(self.max_backoff, self.backoff * 2**attempt) * (0.5 + random.random())
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.max_backoff))
            attempt += 1
            with self._lock:
                self.retries += 1
                if throttled:
                    self._resume_at = max(self._resume_at, time.monotonic() + delay)
            log.warning("%s failed (%s); retry %d/%d in %.2f s", url, reason, attempt, self.max_retries, delay)
            time.sleep(delay)

    def _await_resume(self) -> None:
        """Sleep out the pause a throttled request started: the server asked for fewer requests, so none of the
        pool's threads sends one until it ends."""
        while (wait := self._resume_at - time.monotonic()) > 0:
            time.sleep(wait)

    # -- generation ---------------------------------------------------------------------------------

    def _generate(
        self, prompts: list[Prompt], params: SamplingParams, seeds: list[int] | None = None
    ) -> list[list[Generation]]:
        per_prompt = [params if seeds is None else replace(params, seed=s) for s in (seeds or [None] * len(prompts))]
        self.capabilities  # noqa: B018 - probe once, before the pool's threads would each wait for it
        if len(prompts) == 1 or self.max_concurrency == 1:
            return [self._one(p, q) for p, q in zip(prompts, per_prompt)]
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(prompts))) as pool:
            return list(pool.map(self._one, prompts, per_prompt))

    def _one(self, prompt: Prompt, params: SamplingParams) -> list[Generation]:
        """`params.n` generations of one prompt; a server that ignores `n` (llama.cpp) is asked once per
        missing sample, with a derived seed, and every request's prompt tokens are charged."""
        gens: list[Generation] = []
        prompt_tokens = requests = 0
        honours_n = self.capabilities["n"]
        while len(gens) < params.n:
            missing = params.n - len(gens)
            url, body = self.request(prompt, params, n=missing if honours_n else 1)
            if params.seed is not None and gens:
                body["seed"] = derived_seed(params.seed, len(gens))
            answer = self.post(url, body, timeout=self.request_timeout(params.max_new_tokens))
            new = self.parse(answer, params, url)
            if not new:
                raise LLMRequestError(f"{url} answered without choices: {str(answer)[:200]}")
            prompt_tokens, requests = prompt_tokens + new[0].prompt_tokens, requests + 1
            gens.extend(new[:missing])
        return gens if requests == 1 else [replace(g, prompt_tokens=prompt_tokens) for g in gens]

    def reasoning_opened(self, prompt: Prompt) -> bool:
        """Known only where the chat template can be rendered here (`llm.tokenizer`)."""
        if not self.chat or self.tokenizer_ref is None:
            return False
        return opens_block(render_prompt(self.tokenizer, prompt, True, self.chat_template_kwargs)[0])

    def parse(self, answer: Mapping[str, Any], params: SamplingParams, url: str | None = None) -> list[Generation]:
        """Generations from one response body (chat or completions), in choice order."""
        return parse_response(answer, params, url or self.endpoint)

    def __repr__(self) -> str:
        return f"OpenAICompatLLM(name={self.name!r}, model={self.model!r}, base_url={self.base_url!r})"


def derived_seed(seed: int, sample: int) -> int:
    """The seed of sample `sample` of a prompt seeded `seed` when each sample is its own request: a hash of
    both (31 bits, which every server's seed type holds), so it is no other request's seed, as seed + 1
    would be (the next question's or search step's)."""
    digest = hashlib.sha256(f"hoprag-sample:{seed}:{sample}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


def _declared(capabilities: Mapping[str, Any], chat: bool, model: str) -> dict[str, Any]:
    """Declared capabilities (probe off), completed: log-probs by the standard fields of the endpoint."""
    caps = {"logprobs": False, "n": True, "prefill": False, "model": model, **capabilities, "probed": False}
    if caps["logprobs"] and not caps.get("logprob_fields"):
        caps["logprob_fields"] = "logprobs" if chat else "completions"
    caps.setdefault("logprob_fields", None)
    return caps
