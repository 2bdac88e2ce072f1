"""An OpenAI-compatible HTTP backend: vLLM's server, llama.cpp's `llama-server`, Ollama, hosted APIs.

Standard library only (`urllib.request`). Each prompt of a batch is one request (`n` choices), sent in
parallel by a pool of `concurrency` threads. With `chat` (the default) prompts go to
`{base_url}/chat/completions` as messages (a plain string becomes one user message), else to
`{base_url}/completions` as the prompt string. Messages ending with an assistant message (a prefill the
model must continue) also send vLLM's `continue_final_message: true, add_generation_prompt: false`. These
are not OpenAI API fields: other servers and hosted APIs may ignore them (the reply then starts a new
message instead of continuing) or reject them (HTTP 400), so check a prefill on a new server. Per-token
log-probs are requested (chat `logprobs: true`, completions `logprobs: 1`) and parsed when the server
returns them; when it returns none, or a null for any token, the generation's `logprobs` is `None`
(unknown, never a made-up probability; counted per question as `missing_logprobs`); token counts come from the response's `usage` (a request's completion
tokens are split over its choices, by their token counts when the server reports log-probs, else evenly).

Connection errors, timeouts, 429 and 5xx are retried `max_retries` times with exponential back-off and
jitter (a `Retry-After` header is honoured up to `max_backoff`); other 4xx fail at once with the
server's message. A server that stays unreachable raises `LLMConnectionError` naming the URL.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from hoprag.llm.base import LLM, Generation, Prompt, SamplingParams, continues_reply, covering_tokens, cut_at_stop

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class LLMError(RuntimeError):
    """An LLM backend failed."""


class LLMConnectionError(LLMError):
    """The server could not be reached (after retries)."""


class LLMRequestError(LLMError):
    """The server answered with an error (a 4xx at once, a 429/5xx after retries) or an unreadable body."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _start_hint(base_url: str) -> str:
    return (
        f"Start an OpenAI-compatible server there, e.g. `vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000` "
        f"(base_url http://localhost:8000/v1), `llama-server -m model.gguf --port 8000`, or `ollama serve` "
        f"(base_url http://localhost:11434/v1); or point `llm.base_url` at a running one "
        f"(now {base_url})."
    )


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
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        concurrency: int = 8,
        extra_body: Mapping[str, Any] | None = None,
        default: SamplingParams | Mapping[str, Any] | None = None,
        generation_cache: str | None = None,
        tokenizer: str | None = None,
        max_input_tokens: int | None = None,
    ) -> None:
        super().__init__(default, generation_cache, max_input_tokens)
        if concurrency < 1 or max_retries < 0:
            raise ValueError("concurrency must be positive and max_retries non-negative")
        if max_input_tokens is not None and tokenizer is None:
            raise ValueError(
                "max_input_tokens needs llm.tokenizer (the served model's tokenizer: hub id, local folder or "
                ".gguf) to count prompt tokens"
            )
        self.tokenizer_ref = tokenizer
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.name = name or model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "EMPTY")
        self.chat = chat
        self.logprobs = logprobs
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.concurrency = concurrency
        self.extra_body = dict(extra_body or {})
        self.retries = 0  # retried requests over the object's life
        self._lock = threading.Lock()

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

    # -- requests -----------------------------------------------------------------------------------

    def request_body(self, prompt: Prompt, params: SamplingParams, n: int | None = None) -> dict[str, Any]:
        """The JSON body sent for one prompt."""
        body: dict[str, Any] = {
            "model": self.model,
            "n": n or params.n,
            "max_tokens": params.max_new_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
        }
        if self.chat:
            body["messages"] = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [
                dict(m) for m in prompt
            ]
            if self.logprobs:
                body["logprobs"] = True
            if continues_reply(prompt):  # vLLM's chat extras; other servers may ignore them or refuse
                body["continue_final_message"], body["add_generation_prompt"] = True, False
        else:
            if not isinstance(prompt, str):
                raise ValueError("chat-message prompts need chat=True (the completions endpoint takes a string)")
            body["prompt"] = prompt
            if self.logprobs:
                body["logprobs"] = 1
        if params.stop:
            body["stop"] = list(params.stop)
        if params.seed is not None:
            body["seed"] = params.seed
        body.update(self.extra_body)
        return body

    def post(self, url: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """POST `body` as JSON and return the decoded answer, retrying as the module docstring says."""
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"}
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                request = urllib.request.Request(url, data=data, headers=headers, method="POST")
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
                try:
                    return json.loads(raw)
                except json.JSONDecodeError as err:
                    raise LLMRequestError(f"{url} answered with a body that is not JSON: {raw[:200]!r}") from err
            except urllib.error.HTTPError as err:
                detail = _error_detail(err)
                if err.code not in RETRY_STATUS or attempt >= self.max_retries:
                    raise LLMRequestError(
                        f"{url} answered HTTP {err.code}"
                        + (f" after {attempt + 1} attempts" if attempt else "")
                        + f": {detail}",
                        status=err.code,
                    ) from None
                retry_after = _retry_after(err)
                reason = f"HTTP {err.code}"
            except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as err:
                if attempt >= self.max_retries:
                    why = getattr(err, "reason", err)
                    raise LLMConnectionError(
                        f"cannot reach the OpenAI-compatible server at {url} after {attempt + 1} attempts "
                        f"({why}). {_start_hint(self.base_url)}"
                    ) from None
                reason = f"{type(err).__name__}: {getattr(err, 'reason', err)}"
            delay = min(self.max_backoff, self.backoff * 2**attempt) * (0.5 + random.random())
            if retry_after is not None:
                delay = max(delay, min(retry_after, self.max_backoff))
            attempt += 1
            with self._lock:
                self.retries += 1
            log.warning("%s failed (%s); retry %d/%d in %.2f s", url, reason, attempt, self.max_retries, delay)
            time.sleep(delay)

    # -- generation ---------------------------------------------------------------------------------

    def _generate(
        self, prompts: list[Prompt], params: SamplingParams, seeds: list[int] | None = None
    ) -> list[list[Generation]]:
        per_prompt = [params if seeds is None else replace(params, seed=s) for s in (seeds or [None] * len(prompts))]
        if len(prompts) == 1 or self.concurrency == 1:
            return [self._one(p, q) for p, q in zip(prompts, per_prompt)]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts))) as pool:
            return list(pool.map(self._one, prompts, per_prompt))

    def _one(self, prompt: Prompt, params: SamplingParams) -> list[Generation]:
        """`params.n` generations of one prompt; servers that ignore `n` (llama.cpp) are asked again."""
        gens: list[Generation] = []
        while len(gens) < params.n:
            missing = params.n - len(gens)
            body = self.request_body(prompt, params, n=missing)
            if params.seed is not None and gens:
                body["seed"] = params.seed + len(gens)  # a re-ask with the same seed would repeat itself
            answer = self.post(self.endpoint, body)
            new = self.parse(answer, params)
            if not new:
                raise LLMRequestError(f"{self.endpoint} answered without choices: {str(answer)[:200]}")
            gens.extend(new[:missing])
        return gens

    def parse(self, answer: Mapping[str, Any], params: SamplingParams) -> list[Generation]:
        """Generations from one response body (chat or completions), in choice order."""
        try:
            choices = sorted(answer["choices"], key=lambda c: c.get("index", 0))
        except (KeyError, TypeError) as err:
            raise LLMRequestError(f"unexpected response from {self.endpoint}: {str(answer)[:300]}") from err
        usage = answer.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        parsed, generated = [], []
        for choice in choices:
            if "message" in choice:
                text = (choice.get("message") or {}).get("content") or ""
            else:
                text = choice.get("text") or ""
            tokens, logprobs = _choice_logprobs(choice.get("logprobs"))
            generated.append(len(tokens or ()))
            kept, stopped = cut_at_stop(text, params.stop)
            if tokens is not None:
                keep = covering_tokens(tokens, len(kept))
                tokens, logprobs = tokens[:keep], None if logprobs is None else logprobs[:keep]
            finish = "length" if choice.get("finish_reason") == "length" and not stopped else "stop"
            parsed.append((kept, tokens, logprobs, finish))
        counts = _split(int(usage.get("completion_tokens") or 0), generated)
        return [
            Generation(
                text=kept,
                tokens=tuple(tokens or ()),
                logprobs=None if logprobs is None else tuple(logprobs),
                prompt_tokens=prompt_tokens,
                completion_tokens=count,
                finish_reason=finish,
            )
            for (kept, tokens, logprobs, finish), count in zip(parsed, counts)
        ]

    def __repr__(self) -> str:
        return f"OpenAICompatLLM(name={self.name!r}, model={self.model!r}, base_url={self.base_url!r})"


def _choice_logprobs(data: Any) -> tuple[list[str] | None, list[float] | None]:
    """Tokens and their log-probs from a choice's `logprobs`: chat (`content: [{token, logprob}]`) or
    completions (`tokens`, `token_logprobs`) layout; (None, None) when absent."""
    if not data:
        return None, None
    if isinstance(data.get("content"), list):
        items = data["content"]
        tokens, lps = [str(i.get("token", "")) for i in items], [i.get("logprob") for i in items]
    elif isinstance(data.get("tokens"), list) and isinstance(data.get("token_logprobs"), list):
        tokens, lps = [str(t) for t in data["tokens"]], list(data["token_logprobs"])
    else:
        return None, None
    if any(lp is None for lp in lps):  # unknown stays unknown: no token's log-prob is made up
        return tokens, None
    return tokens, [float(lp) for lp in lps]


def _split(total: int, weights: list[int]) -> list[int]:
    """`total` split into len(weights) integer parts: in proportion to the weights when they add up to it
    (the servers' per-choice token counts), else evenly."""
    if not weights:
        return []
    if sum(weights) == total:
        return weights
    base, extra = divmod(total, len(weights))
    return [base + (1 if i < extra else 0) for i in range(len(weights))]


def _error_detail(err: urllib.error.HTTPError) -> str:
    try:
        body = err.read().decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - the status code is already informative
        return str(err.reason)
    try:
        parsed = json.loads(body)
        message = parsed.get("error", parsed) if isinstance(parsed, dict) else parsed
        if isinstance(message, dict):
            message = message.get("message", message)
        return str(message)[:500]
    except json.JSONDecodeError:
        return body[:500] or str(err.reason)


def _retry_after(err: urllib.error.HTTPError) -> float | None:
    value = err.headers.get("Retry-After") if err.headers else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
