"""Served-model benchmark: one `generate` batch through the OpenAI-compatible backend, 1 vs 16 requests in flight.

    python scripts/bench/bench_serve_concurrency.py [--prompts 64] [--delay 0.2] [--concurrency 1 16] [--out bench.json]

What is measured, in one run: the real backend (`OpenAICompatLLM`: chat endpoint, log-probs requested and
parsed, retries armed, no generation cache) sends --prompts distinct prompts in one `generate` call to a stand-in
server on 127.0.0.1 (the standard library's `ThreadingHTTPServer`) that answers every request --delay seconds
after it arrives, however many it holds: a served model far from full, whose continuous batching (vLLM's)
decodes the requests in flight together. The figures measure the client, not a model: how many round trips a
batch waits for, plus HTTP, JSON and thread overhead. For each --concurrency (`llm.max_concurrency`): wall
seconds, prompts per second and the most requests the server held at once; then the ratio of seconds, the first
setting over each other one. The replies (text and log-probs) are checked to come back alike and in prompt order
in every setting. A real server's latency grows with its batch, so there the ratio is lower.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from hoprag.llm import OpenAICompatLLM
from hoprag.scripts import report_ratios


class StandIn(ThreadingHTTPServer):
    """Answers each chat request after `delay` seconds, echoing its prompt in two tokens with log-probs, and
    keeps the most requests it held at once."""

    request_queue_size = 256  # a burst of connections is never dropped by the listen queue (5 by default)
    daemon_threads = True

    def __init__(self, delay: float) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.delay, self.lock = delay, threading.Lock()
        self.in_flight = self.most_in_flight = 0

    def held(self, change: int) -> None:
        with self.lock:
            self.in_flight += change
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: StandIn

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.server.held(+1)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(self.server.delay)
        data = json.dumps(completion(body["messages"][-1]["content"])).encode()
        self.server.held(-1)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def completion(prompt: str) -> dict[str, Any]:
    tokens = ["Answer", f" to {prompt}"]
    choice = {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "".join(tokens)},
              "logprobs": {"content": [{"token": t, "logprob": -0.25} for t in tokens]}}  # fmt: skip
    return {"choices": [choice], "usage": {"prompt_tokens": 12, "completion_tokens": len(tokens)}}


def timed(url: str, prompts: list[str], concurrency: int) -> tuple[float, list[tuple[str, Any]]]:
    """Seconds one `generate` call takes for `prompts`, and its replies (text, log-probs)."""
    llm = OpenAICompatLLM(model="stand-in", base_url=url, api_key="sk-bench", probe=False,
                          capabilities={"logprobs": True, "n": True, "prefill": False},
                          max_concurrency=concurrency)  # fmt: skip
    started = time.perf_counter()
    out = llm.generate(prompts, max_new_tokens=16)
    return time.perf_counter() - started, [(o[0].text, o[0].logprobs) for o in out]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--delay", type=float, default=0.2, help="seconds the stand-in server takes for each request")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16], help="llm.max_concurrency settings")
    ap.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    args = ap.parse_args()

    prompts = [f"question {i}: who directed the film?" for i in range(args.prompts)]
    results, replies = {}, {}
    with StandIn(args.delay) as server:
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        timed(server.url, prompts[:2], 2)  # warm-up (imports, first connections), not timed
        for concurrency in args.concurrency:
            server.most_in_flight = 0
            seconds, replies[concurrency] = timed(server.url, prompts, concurrency)
            results[concurrency] = {"seconds": seconds, "prompts_per_second": len(prompts) / seconds,
                                    "most_in_flight": server.most_in_flight}  # fmt: skip
        server.shutdown()

    load = os.getloadavg()[0]
    print(f"{len(prompts)} prompts in one generate call; a stand-in server on 127.0.0.1 answers each request after "
          f"{args.delay:.3f} s; load average {load:.2f} on {os.cpu_count()} cores")  # fmt: skip
    print(f"{'in flight':>9} {'seconds':>8} {'prompts/s':>10} {'most held by the server':>24}")
    for concurrency, r in results.items():
        print(f"{concurrency:>9} {r['seconds']:>8.2f} {r['prompts_per_second']:>10.1f} {r['most_in_flight']:>24}")
    first = args.concurrency[0]
    alike = all(replies[c] == replies[first] for c in args.concurrency)
    order = [text for text, _ in replies[first]] == [f"Answer to {p}" for p in prompts]
    print(f"replies alike in every setting and in prompt order: {'yes' if alike and order else 'NO'}")
    ratios = {f"seconds {first}/{c} in flight": results[first]["seconds"] / results[c]["seconds"]
              for c in args.concurrency[1:]}  # fmt: skip
    report_ratios(ratios, {str(c): r for c, r in results.items()}, args)


if __name__ == "__main__":
    main()
