"""What the OpenAI-compatible backend (`hoprag.llm.openai_compat`) reads over HTTP, apart from its state: its
errors, the message and `Retry-After` of a failed request, and the generations of a response body (choices in
order, token log-probs, the completion tokens split over the choices)."""

from __future__ import annotations

import json
import urllib.error
from collections.abc import Mapping
from typing import Any

from hoprag.llm.base import covering_tokens, cut_at_stop
from hoprag.llm.reasoning import server_reasoning, server_reasoning_tokens
from hoprag.llm.types import Generation, SamplingParams
from hoprag.utils.refusals import Refusal

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# the server asking its clients to slow down (rate limited, overloaded): every request of the backend waits, not
# only the refused one, so a pool of concurrent requests backs off together instead of each collecting a refusal
THROTTLE_STATUS = frozenset({429, 503})


class LLMError(RuntimeError):
    """An LLM backend failed."""


class LLMConnectionError(Refusal, LLMError):
    """The server could not be reached (after retries)."""


class LLMRequestError(LLMError):
    """The server answered with an error (a 4xx at once, a 429/5xx after retries) or an unreadable body."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def start_hint(base_url: str) -> str:
    """What to do when no server answers at `base_url`."""
    return (
        f"Start an OpenAI-compatible server there, e.g. `vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000` "
        f"(base_url http://localhost:8000/v1), `python scripts/servers/llama_cpp_server.py --model model.gguf --port 8000` "
        f"(with llm.tokenizer=model.gguf), or `ollama serve` "
        f"(base_url http://localhost:11434/v1); or point `llm.base_url` at a running one "
        f"(now {base_url})."
    )


def parse_response(answer: Mapping[str, Any], params: SamplingParams, url: str) -> list[Generation]:
    """Generations from one response body (chat or completions), in choice order. Thinking a server returned
    apart (`hoprag.llm.reasoning.server_reasoning`) is held in `reasoning`, and its tokens are dropped from
    the returned log-probs (which cover the whole reply); an inline `<think>` block is left to `LLM.generate`."""
    try:
        choices = sorted(answer["choices"], key=lambda c: c.get("index", 0))
    except (KeyError, TypeError) as err:
        raise LLMRequestError(f"unexpected response from {url}: {str(answer)[:300]}") from err
    usage = answer.get("usage") or {}
    prompt_tokens = int(usage.get("prompt_tokens") or 0)
    parsed, generated = [], []
    for choice in choices:
        message = choice.get("message") or {}
        content = message.get("content") if "message" in choice else choice.get("text")
        text, reasoning = content or "", server_reasoning(message)
        tokens, logprobs = choice_logprobs(choice.get("logprobs"))
        generated.append(len(tokens or ()))
        thinking = None
        if reasoning is not None and tokens is not None:
            thinking = server_reasoning_tokens(tokens)
            if thinking is None:  # no closing tag among the tokens: those covering the thinking's characters
                thinking = covering_tokens(tokens, len(reasoning)) if text else len(tokens)
            tokens, logprobs = tokens[thinking:], None if logprobs is None else logprobs[thinking:]
        kept, stopped = cut_at_stop(text, params.stop)
        if tokens is not None:
            keep = covering_tokens(tokens, len(kept))
            tokens, logprobs = tokens[:keep], None if logprobs is None else logprobs[:keep]
        finish = "length" if choice.get("finish_reason") == "length" and not stopped else "stop"
        # ended while thinking: a parser gives no content, or the token limit left none
        cut = reasoning is not None and (content is None or (finish == "length" and not text.strip()))
        parsed.append((kept, tokens, logprobs, finish, reasoning, thinking, cut))
    counts = _split(int(usage.get("completion_tokens") or 0), generated)
    details = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens")
    return [
        Generation(
            text=kept,
            tokens=tuple(tokens or ()),
            logprobs=None if logprobs is None else tuple(logprobs),
            prompt_tokens=prompt_tokens,
            completion_tokens=count,
            finish_reason=finish,
            reasoning=reasoning,
            reasoning_tokens=_reasoning_tokens(reasoning, thinking, details, len(choices), count, kept),
            reasoning_cut=cut,
        )
        for (kept, tokens, logprobs, finish, reasoning, thinking, cut), count in zip(parsed, counts)
    ]


def _reasoning_tokens(
    reasoning: str | None, counted: int | None, reported: Any, choices: int, completion: int, text: str
) -> int:
    """A choice's thinking tokens: counted among its returned tokens, else as the server's usage reports
    them (`completion_tokens_details.reasoning_tokens`, split evenly over the choices), else estimated from
    its completion tokens in proportion to characters."""
    if reasoning is None:
        return 0
    if counted is not None:
        return counted
    if isinstance(reported, int):
        return reported // choices
    return round(completion * len(reasoning) / (len(reasoning) + len(text)))


def choice_logprobs(data: Any) -> tuple[list[str] | None, list[float] | None]:
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


def error_detail(err: urllib.error.HTTPError) -> str:
    """The server's message in a failed request's body (`error.message` of a JSON body), at most 500 characters."""
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


def retry_after_seconds(err: urllib.error.HTTPError) -> float | None:
    """The `Retry-After` header in seconds (None when absent or not a number)."""
    value = err.headers.get("Retry-After") if err.headers else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
