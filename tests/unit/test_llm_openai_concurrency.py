"""OpenAICompatLLM with many requests in flight (issue 43, item 2): one batch's requests go out together, at most
`max_concurrency` at a time, against a local threaded HTTP server that answers when and how each test says."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from hoprag.config import check_config
from hoprag.cost import Cost
from hoprag.llm import OpenAICompatLLM

# (prompt, attempt) -> (HTTP status, seconds to wait before answering, Retry-After or None)
Plan = Callable[[str, int], tuple[int, float, float | None]]


def reply(prompt: str) -> dict[str, Any]:
    """A chat completion answering `prompt` with `<prompt> ok` in two tokens, log-prob -0.5 each."""
    tokens = [prompt, " ok"]
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "".join(tokens)},
              "logprobs": {"content": [{"token": t, "logprob": -0.5} for t in tokens]}}  # fmt: skip
    return {"choices": [choice], "usage": {"prompt_tokens": 7, "completion_tokens": 2}}


class Listener(ThreadingHTTPServer):
    request_queue_size = 64  # a burst of connections is never dropped by the listen queue (5 by default)
    daemon_threads = True


class Server:
    """Answers each POST as its plan says, recording when each request arrived and was answered (in that
    order), and the most requests it held at once."""

    def __init__(self, plan: Plan) -> None:
        self.plan, self.lock = plan, threading.Lock()
        self.arrived: list[tuple[float, str]] = []
        self.answered: list[tuple[float, str, int]] = []
        self.in_flight = self.most_in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                prompt = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["messages"][-1]["content"]
                status, seconds, retry_after = server.enter(prompt)
                time.sleep(seconds)
                data = json.dumps(reply(prompt) if status == 200 else {"error": {"message": "slow down"}}).encode()
                server.leave(prompt, status)
                self.send_response(status)
                if retry_after is not None:
                    self.send_header("Retry-After", str(retry_after))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = Listener(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def enter(self, prompt: str) -> tuple[int, float, float | None]:
        with self.lock:
            attempt = sum(p == prompt for _, p in self.arrived)
            self.arrived.append((time.monotonic(), prompt))
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        return self.plan(prompt, attempt)

    def leave(self, prompt: str, status: int) -> None:
        with self.lock:
            self.in_flight -= 1
            self.answered.append((time.monotonic(), prompt, status))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def backend(server: Server, **kw: Any) -> OpenAICompatLLM:
    return OpenAICompatLLM(model="m", base_url=server.url, api_key="sk-test", probe=False, backoff=0.01,
                           capabilities={"logprobs": True, "n": True, "prefill": True}, **kw)  # fmt: skip


def test_replies_come_back_in_prompt_order_when_the_server_answers_in_reverse():
    prompts = [f"p{i}" for i in range(8)]
    with Server(lambda prompt, _: (200, 0.05 * (8 - int(prompt[1:])), None)) as server:
        started = time.perf_counter()
        out = backend(server, max_concurrency=8).generate(prompts)
        elapsed = time.perf_counter() - started
    assert [p for _, p, _ in server.answered] == prompts[::-1]
    assert [o[0].text for o in out] == [f"{p} ok" for p in prompts]
    assert all(o[0].logprobs == (-0.5, -0.5) and o[0].tokens == (p, " ok") for o, p in zip(out, prompts))
    assert elapsed < 1.0  # one at a time: 1.8 s of answering


def test_at_most_max_concurrency_requests_are_in_flight():
    with Server(lambda *_: (200, 0.1, None)) as server:
        out = backend(server, max_concurrency=4).generate([f"p{i}" for i in range(12)])
    assert len(out) == 12 and server.most_in_flight == 4


def test_a_429_is_retried_and_holds_back_every_other_request_until_its_retry_after():
    # p0 is refused with Retry-After 0.3 s while p1 is in flight; without the pause p1's thread would send p2 as
    # soon as p1 is answered, 0.1 s after the refusal
    def plan(prompt: str, attempt: int) -> tuple[int, float, float | None]:
        if prompt == "p0" and attempt == 0:
            return 429, 0.05, 0.3
        return 200, 0.15 if prompt == "p1" else 0.05, None

    with Server(plan) as server:
        llm = backend(server, max_concurrency=2)
        out = llm.generate(["p0", "p1", "p2", "p3"])
    assert [o[0].text for o in out] == ["p0 ok", "p1 ok", "p2 ok", "p3 ok"] and llm.retries == 1
    refused = next(t for t, p, status in server.answered if status == 429)
    sent_after = [t - refused for t, _ in server.arrived if t > refused + 0.02]
    assert len(sent_after) == 3 and min(sent_after) >= 0.28  # p0 again, p2 and p3: all after the pause


def test_each_prompt_is_charged_once_however_often_it_was_asked():
    def plan(prompt: str, attempt: int) -> tuple[int, float, float | None]:
        return (429, 0.0, 0) if int(prompt[1:]) % 2 and attempt == 0 else (200, 0.01, None)

    prompts = [f"p{i}" for i in range(16)]
    costs = [Cost() for _ in prompts]
    with Server(plan) as server:
        llm = backend(server, max_concurrency=8)
        llm.generate(prompts, costs=costs)
    assert len(server.arrived) == 24 and llm.retries == 8
    assert [(c.llm_calls, c.prompt_tokens, c.completion_tokens) for c in costs] == [(1, 7, 2)] * 16
    assert (llm.usage.calls, llm.usage.prompts, llm.usage.prompt_tokens) == (1, 16, 7 * 16)


def test_cache_hits_are_never_sent(tmp_path):
    with Server(lambda *_: (200, 0.01, None)) as server:
        llm = backend(server, max_concurrency=8, generation_cache=str(tmp_path))
        llm.generate(["a", "b"])
        costs = [Cost() for _ in range(4)]
        out = llm.generate(["a", "c", "b", "c"], costs=costs)
    assert sorted(p for _, p in server.arrived) == ["a", "b", "c"]  # c once, though asked twice
    assert [o[0].text for o in out] == ["a ok", "c ok", "b ok", "c ok"]
    assert [c.llm_cache_hits for c in costs] == [1, 0, 1, 0] and all(c.prompt_tokens == 7 for c in costs)


@pytest.mark.parametrize("value", [0, -1, 2.5])
def test_max_concurrency_must_be_an_integer_of_at_least_one(compose_cfg, value):
    with pytest.raises(ValueError, match="max_concurrency"):
        OpenAICompatLLM(model="m", max_concurrency=value)
    cfg = compose_cfg("eval", ["+method=standard_rag", "llm=openai", f"llm.max_concurrency={value}"])
    with pytest.raises(ValueError, match=r"llm.max_concurrency=.* must be an integer >= 1 \(requests in flight"):
        check_config(cfg)
