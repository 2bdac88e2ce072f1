"""OpenAICompatLLM against a fake OpenAI-compatible server on 127.0.0.1 (real HTTP, no network)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from hoprag.cost import Cost
from hoprag.llm import LLMConnectionError, LLMError, LLMRequestError, OpenAICompatLLM, SamplingParams, openai_compat
from hoprag.llm import tokenizer as tokenizer_module
from hoprag.llm.openai_compat import derived_seed


def content_of(body: dict[str, Any]) -> str:
    if "messages" in body:
        return body["messages"][-1]["content"]
    return body["prompt"]


def default_reply(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Echo the prompt: choice i answers `<prompt> #i`, in tokens of one word each, logprob -0.5 per token."""
    n = body.get("n", 1)
    choices, completion_tokens = [], 0
    for i in range(n):
        text = f"{content_of(body)} #{i}"
        words = text.split(" ")
        tokens = [w if j == 0 else " " + w for j, w in enumerate(words)]
        completion_tokens += len(tokens)
        choice: dict[str, Any] = {"index": i, "finish_reason": "stop"}
        if path.endswith("/chat/completions"):
            choice["message"] = {"role": "assistant", "content": text}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [{"token": t, "logprob": -0.5, "bytes": None} for t in tokens]}
        else:
            choice["text"] = text
            if body.get("logprobs"):
                choice["logprobs"] = {"tokens": tokens, "token_logprobs": [-0.5] * len(tokens)}
        choices.append(choice)
    usage = {"prompt_tokens": 7, "completion_tokens": completion_tokens}
    return 200, {"id": "x", "object": "chat.completion", "choices": choices, "usage": usage}


class FakeServer:
    """A threaded HTTP server whose reply to each request is `handler(path, body) -> (status, json)`."""

    def __init__(self, handler: Callable[[str, dict], tuple[int, dict]] = default_reply) -> None:
        self.handler = handler
        self.requests: list[tuple[str, dict, dict]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append((self.path, body, dict(self.headers)))
                status, payload = fake.handler(self.path, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    with FakeServer() as s:
        yield s


ALL_CAPABILITIES = {"logprobs": True, "n": True, "prefill": True}


def make(server: FakeServer, **kw: Any) -> OpenAICompatLLM:
    """A backend with every capability declared (no probe requests), unless `probe=True` is passed."""
    kw.setdefault("backoff", 0.01)
    if not kw.setdefault("probe", False):
        kw.setdefault("capabilities", ALL_CAPABILITIES)
    return OpenAICompatLLM(model="fake-model", base_url=server.url, api_key="sk-test", **kw)


def test_chat_request_and_parsing(server):
    llm = make(server)
    [[g]] = llm.generate(["What is two plus two?"], max_new_tokens=12, seed=3)
    path, body, headers = server.requests[0]
    assert path == "/v1/chat/completions"
    assert body["messages"] == [{"role": "user", "content": "What is two plus two?"}]
    assert body["model"] == "fake-model" and body["logprobs"] is True
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["n"], body["seed"]) == (12, 0.0, 1.0, 1, 3)
    assert "stop" not in body
    assert headers["Authorization"] == "Bearer sk-test"
    assert g.text == "What is two plus two? #0"
    assert g.tokens == ("What", " is", " two", " plus", " two?", " #0")
    assert g.logprobs == (-0.5,) * 6
    assert (g.prompt_tokens, g.completion_tokens, g.finish_reason) == (7, 6, "stop")


def test_chat_messages_are_sent_as_given(server):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    [[g]] = make(server).generate([messages])
    assert server.requests[0][1]["messages"] == messages
    assert g.text == "Hi #0"


def test_completions_request_and_logprobs(server):
    llm = make(server, chat=False)
    [[g]] = llm.generate(["Paris is in"], max_new_tokens=5)
    path, body, _ = server.requests[0]
    assert path == "/v1/completions"
    assert body["prompt"] == "Paris is in" and body["logprobs"] == 1 and "messages" not in body
    assert g.text == "Paris is in #0"
    assert g.tokens == ("Paris", " is", " in", " #0") and g.logprobs == (-0.5,) * 4
    assert g.completion_tokens == 4
    with pytest.raises(ValueError, match="chat=True"):
        llm.generate([[{"role": "user", "content": "x"}]])


def test_n_samples_split_usage_and_keep_choice_order(server):
    llm = make(server)
    [gens] = llm.generate(["a b"], temperature=0.7, top_p=0.9, n=3)
    body = server.requests[0][1]
    assert (body["n"], body["temperature"], body["top_p"]) == (3, 0.7, 0.9)
    assert [g.text for g in gens] == ["a b #0", "a b #1", "a b #2"]
    assert [g.completion_tokens for g in gens] == [3, 3, 3]
    assert llm.usage.completion_tokens == 9 and llm.usage.prompt_tokens == 7


def test_server_ignoring_n_is_asked_again():
    def one_choice(path, body):
        status, payload = default_reply(path, {**body, "n": 1})
        return status, payload

    with FakeServer(one_choice) as s:
        gens = make(s).generate(["q"], temperature=1.0, n=3, seed=10)[0]
    assert len(gens) == 3 and len(s.requests) == 3
    assert [r[1]["n"] for r in s.requests] == [3, 2, 1]
    assert [r[1]["seed"] for r in s.requests] == [10, derived_seed(10, 1), derived_seed(10, 2)]


def test_stop_is_sent_and_enforced_on_the_text_and_tokens():
    TOKENS = [("Paris", -0.1), (".", -0.2), ("\n", -0.3), ("The", -0.4), (" end", -0.5)]  # noqa: N806

    def ignores_stop(path, body):  # a server that returns the text past the stop string
        return 200, {
            "choices": [
                {
                    "index": 0,
                    "message": {"content": "Paris.\nThe end"},
                    "finish_reason": "length",
                    "logprobs": {"content": [{"token": t, "logprob": lp} for t, lp in TOKENS]},
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 5},
        }

    with FakeServer(ignores_stop) as s:
        [[g]] = make(s).generate(["q"], stop=["\n"])
    assert s.requests[0][1]["stop"] == ["\n"]
    assert g.text == "Paris."
    assert g.tokens == ("Paris", ".") and g.logprobs == (-0.1, -0.2)
    assert g.finish_reason == "stop" and g.completion_tokens == 5


def test_missing_logprobs_and_usage_give_none_and_zero():
    def bare(path, body):
        return 200, {"choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "length"}]}

    with FakeServer(bare) as s:
        [[g]] = make(s).generate(["q"])
    assert g.text == "ok" and g.logprobs is None and g.tokens == ()
    assert (g.prompt_tokens, g.completion_tokens, g.finish_reason) == (0, 0, "length")


def test_retries_on_503_then_succeeds():
    attempts = []

    def flaky(path, body):
        attempts.append(time.monotonic())
        if len(attempts) <= 2:
            return 503, {"error": {"message": "overloaded"}}
        return default_reply(path, body)

    with FakeServer(flaky) as s:
        llm = make(s, max_retries=3, backoff=0.01)
        [[g]] = llm.generate(["hello"])
    assert len(attempts) == 3 and llm.retries == 2
    assert g.text == "hello #0"


def test_no_retry_on_400():
    calls = []

    def bad(path, body):
        calls.append(body)
        return 400, {"error": {"message": "max_tokens is too large"}}

    with FakeServer(bad) as s:
        with pytest.raises(LLMRequestError, match="HTTP 400.*max_tokens is too large") as info:
            make(s, max_retries=5).generate(["q"])
    assert info.value.status == 400 and len(calls) == 1


def test_gives_up_after_max_retries_on_5xx():
    calls = []

    def down(path, body):
        calls.append(1)
        return 500, {"error": "boom"}

    with FakeServer(down) as s:
        with pytest.raises(LLMRequestError, match="HTTP 500 after 3 attempts") as info:
            make(s, max_retries=2).generate(["q"])
    assert info.value.status == 500 and len(calls) == 3


def test_timeout_is_retried():
    calls = []

    def slow_first(path, body):
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.6)
        return default_reply(path, body)

    with FakeServer(slow_first) as s:
        [[g]] = make(s, timeout=0.2, timeout_per_token=0.0, max_retries=2).generate(["q"])
    assert g.text == "q #0" and len(calls) == 2


def test_unreachable_server_raises_a_clear_error():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    url = f"http://127.0.0.1:{port}/v1"
    llm = OpenAICompatLLM(model="m", base_url=url, timeout=0.5, max_retries=2, backoff=0.01, probe=False,
                          capabilities=ALL_CAPABILITIES)
    started = time.perf_counter()
    with pytest.raises(LLMConnectionError) as info:
        llm.generate(["q"])
    message = str(info.value)
    assert f"{url}/chat/completions" in message and "after 3 attempts" in message
    assert "vllm serve" in message and "base_url" in message
    assert time.perf_counter() - started < 5
    assert llm.retries == 2


def test_batch_is_sent_concurrently_and_returned_in_order():
    def slow(path, body):
        time.sleep(0.3)
        return default_reply(path, body)

    with FakeServer(slow) as s:
        llm = make(s, max_concurrency=8)
        prompts = [f"p{i}" for i in range(8)]
        started = time.perf_counter()
        out = llm.generate(prompts)
        elapsed = time.perf_counter() - started
    assert [o[0].text for o in out] == [f"p{i} #0" for i in range(8)]
    assert elapsed < 1.5  # sequentially it would take 2.4 s


def test_costs_are_charged_per_prompt(server):
    llm = make(server)
    costs = [Cost(), Cost()]
    llm.generate(["one", "two three"], costs=costs, stage="answer")
    assert [c.llm_calls for c in costs] == [1, 1]
    assert [c.prompt_tokens for c in costs] == [7, 7]
    assert [c.completion_tokens for c in costs] == [2, 3]
    assert all(c.seconds["answer"] > 0 for c in costs)
    assert llm.usage.calls == 1 and llm.usage.prompts == 2


def test_default_params_and_extra_body(server):
    llm = make(server, default=SamplingParams(max_new_tokens=9, stop=("END",)), extra_body={"top_k": 5})
    llm.generate(["q"])
    body = server.requests[0][1]
    assert body["max_tokens"] == 9 and body["stop"] == ["END"] and body["top_k"] == 5


def test_api_key_defaults_to_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    assert OpenAICompatLLM(model="m").api_key == "sk-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert OpenAICompatLLM(model="m").api_key == "EMPTY"


# -- servers as they are: llama.cpp's quirks as switches of a fake server ---------------------------------


def render(messages: list[dict], open_last: bool) -> str:
    """The fake chat template: `<role>content<end>` per message, then `<assistant>` for a new turn; with
    `open_last` the final (assistant) message is left open, as a prefill continued."""
    parts = [f"<{m['role']}>{m['content']}<end>" for m in messages]
    if open_last:
        return "".join(parts)[: -len("<end>")]
    return "".join(parts) + "<assistant>"


class FakeTemplateTokenizer:
    chat_template = "fake"

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True, continue_final_message=False):
        return render(messages, continue_final_message)


def quirky_server(top_logprobs_needed=False, ignores_n=False, ignores_prefill=False, model="served-model"):
    """A reply function with llama.cpp's quirks as switches: chat log-probs only with `top_logprobs`, one
    choice whatever `n`, `continue_final_message` ignored (a small model then repeats the prefix in its new
    turn). The reply is `ok<seed>`; prompt_tokens are the rendered prompt's characters."""

    def reply(path: str, body: dict) -> tuple[int, dict]:
        chat = path.endswith("/chat/completions")
        prefix = ""
        if chat:
            messages = body["messages"]
            prefill = messages[-1]["role"] == "assistant"
            continued = prefill and body.get("continue_final_message") and not ignores_prefill
            rendered = render(messages, bool(continued))
            if prefill and not continued:
                prefix = messages[-1]["content"]  # the doubled prefix of a new turn
            logprobs = body.get("logprobs") and (body.get("top_logprobs") or not top_logprobs_needed)
        else:
            rendered, logprobs = body["prompt"], body.get("logprobs")
        choices = []
        for i in range(1 if ignores_n else body.get("n", 1)):
            text = f"{prefix}ok{body.get('seed', '')}"
            choice: dict[str, Any] = {"index": i, "finish_reason": "stop"}
            if chat:
                choice["message"] = {"role": "assistant", "content": text}
                if logprobs:
                    choice["logprobs"] = {"content": [{"token": text, "logprob": -0.25}]}
            else:
                choice["text"] = text
                if logprobs:
                    choice["logprobs"] = {"tokens": [text], "token_logprobs": [-0.25]}
            choices.append(choice)
        usage = {"prompt_tokens": len(rendered), "completion_tokens": len(choices)}
        return 200, {"model": model, "choices": choices, "usage": usage}

    return reply


LLAMA_CPP = {"top_logprobs_needed": True, "ignores_n": True, "ignores_prefill": True}
PREFILLED = [{"role": "user", "content": "Who?"}, {"role": "assistant", "content": '{"type": "'}]


@pytest.fixture(autouse=True)
def fresh_probes(monkeypatch):
    monkeypatch.setattr(openai_compat, "_PROBED", {})
    monkeypatch.setitem(tokenizer_module._TOKENIZERS, ("fake-tokenizer", False), FakeTemplateTokenizer())


def test_probe_finds_llama_cpp_quirks_and_asks_for_top_logprobs():
    with FakeServer(quirky_server(**LLAMA_CPP, model="smollm2.gguf")) as s:
        llm = make(s, probe=True)
        assert llm.capabilities == {
            "logprobs": True, "logprob_fields": "logprobs+top_logprobs", "n": False, "prefill": False,
            "model": "smollm2.gguf", "probed": True,
        }  # fmt: skip
        probes = len(s.requests)
        [[g]] = llm.generate(["q"])
    body = s.requests[probes][1]
    assert body["logprobs"] is True and body["top_logprobs"] == 1
    assert g.logprobs == (-0.25,)


def test_probe_finds_a_vllm_like_server_honouring_everything():
    with FakeServer(quirky_server()) as s:
        llm = make(s, probe=True)
        caps = llm.capabilities
        probes = len(s.requests)
        [[g]] = llm.generate([PREFILLED])
    assert (caps["logprob_fields"], caps["n"], caps["prefill"]) == ("logprobs", True, True)
    path, body, _ = s.requests[probes]
    assert path == "/v1/chat/completions" and body["continue_final_message"] is True and "top_logprobs" not in body
    assert g.text == "ok"  # continued, not repeated


def test_probe_runs_once_per_base_url_and_model():
    with FakeServer(quirky_server(**LLAMA_CPP)) as s:
        make(s, probe=True).generate(["a"])
        probes = len(s.requests) - 1
        make(s, probe=True).generate(["b"])
        assert len(s.requests) == probes + 2
        make(s, probe=True, chat=True).capabilities  # noqa: B018 - same URL and model: no new probe
        assert len(s.requests) == probes + 2
    assert probes >= 3


def test_ignored_prefill_is_rendered_locally_never_doubled():
    with FakeServer(quirky_server(**LLAMA_CPP)) as s:
        llm = make(s, probe=True, tokenizer="fake-tokenizer")
        assert llm.missing_capabilities(["prefill", "logprobs", "n"]) == []
        probes = len(s.requests)
        [[g]] = llm.generate([PREFILLED])
    path, body, _ = s.requests[probes]
    assert path == "/v1/completions" and body["prompt"] == render(PREFILLED, open_last=True)
    assert body["logprobs"] == 1 and "messages" not in body
    assert g.text == "ok" and g.logprobs == (-0.25,)  # the continuation alone: no doubled '{"type": "'


def test_ignored_prefill_without_a_tokenizer_is_missing_and_refused():
    with FakeServer(quirky_server(**LLAMA_CPP)) as s:
        llm = make(s, probe=True)
        assert llm.missing_capabilities(["prefill", "logprobs"]) == ["prefill"]
        with pytest.raises(LLMError, match="llm.tokenizer"):
            llm.generate([PREFILLED])


def test_server_without_logprobs_is_found_missing():
    def no_logprobs(path, body):
        return quirky_server()(path, {**body, "logprobs": None})

    with FakeServer(no_logprobs) as s:
        llm = make(s, probe=True)
        assert llm.capabilities["logprobs"] is False
        assert llm.missing_capabilities(["logprobs"]) == ["logprobs"]


def test_ignored_n_samples_with_hashed_seeds_and_charges_every_request():
    with FakeServer(quirky_server(**LLAMA_CPP)) as s:
        llm = make(s, probe=True)
        llm.capabilities  # noqa: B018
        probes = len(s.requests)
        costs = [Cost(), Cost()]
        out = llm.generate(["q", "r"], temperature=1.0, n=3, seeds=[10, 11], costs=costs)
    sent = [body for _, body, _ in s.requests[probes:]]
    assert all(body["n"] == 1 for body in sent) and len(sent) == 6
    seeds = [body["seed"] for body in sent]
    assert len(set(seeds)) == 6 and seeds[0] == 10 and seeds[3] == 11  # no seed + 1: 11 is the next prompt's
    assert [g.text for g in out[0]] == [f"ok{x}" for x in seeds[:3]]
    one_request = len(render([{"role": "user", "content": "q"}], open_last=False))
    assert costs[0].prompt_tokens == 3 * one_request  # the server processed the prompt three times
    assert costs[0].completion_tokens == 3


def test_cache_key_covers_extra_body_and_the_served_model(tmp_path, monkeypatch):
    served = {"model": "model-a"}

    def reply(path, body):
        return quirky_server(model=served["model"])(path, body)

    with FakeServer(reply) as s:
        cache = str(tmp_path / "gen")

        def asked(**kw):
            before = len([r for r in s.requests if r[1].get("max_tokens") != 1])
            make(s, probe=True, generation_cache=cache, **kw).generate(["q"])
            return len([r for r in s.requests if r[1].get("max_tokens") != 1]) - before

        assert asked() == 1 and asked() == 0  # a greedy repeat is a cache hit
        assert asked(extra_body={"top_k": 5}) == 1  # another extra_body field: another reply
        assert asked(chat=False) == 1
        served["model"] = "model-b"  # another model behind the same URL (after a restart)
        monkeypatch.setattr(openai_compat, "_PROBED", {})
        assert asked() == 1


def test_timeout_scales_with_max_tokens():
    calls = []

    def slow(path, body):
        calls.append(1)
        time.sleep(0.6)
        return default_reply(path, body)

    with FakeServer(slow) as s:
        llm = make(s, timeout=0.2, timeout_per_token=0.1, max_retries=1)
        assert llm.request_timeout(10) == pytest.approx(1.2)
        [[g]] = llm.generate(["q"], max_new_tokens=10)  # 0.2 + 10 * 0.1 s: the slow answer is waited for
    assert g.text == "q #0" and len(calls) == 1


def test_probe_off_needs_declared_capabilities():
    with pytest.raises(ValueError, match="llm.capabilities"):
        OpenAICompatLLM(model="m", probe=False)
    with pytest.raises(ValueError, match="unknown"):
        OpenAICompatLLM(model="m", probe=False, capabilities={"logprob": True})
    llm = OpenAICompatLLM(model="m", probe=False, capabilities={"logprobs": True})
    assert llm.capabilities["logprob_fields"] == "logprobs" and llm.capabilities["probed"] is False


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_refused_key_or_an_unknown_model_stops_the_probe_instead_of_being_cached_as_no_capability(status):
    def refuse(path, body):
        return status, {"error": {"message": "no", "type": "invalid_request_error"}}

    with FakeServer(refuse) as srv:
        with pytest.raises(LLMRequestError) as info:
            make(srv, max_retries=0, probe=True).capabilities
    assert info.value.status == status
