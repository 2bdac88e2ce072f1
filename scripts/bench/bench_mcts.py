"""MCTS benchmark: wall time per question with batched expansions vs one generation at a time.

    python scripts/bench/bench_mcts.py [--questions 8] [--call-latency 0.05] [--sample-latency 0.002] [--out f.json]

The NLI-guided search of Self-Correcting RAG (`hoprag.search.mcts.AnswerSearch`, the paper's budget: 24
simulations, 3 samples per expansion, depth 3, augment children from BM25) runs twice over the same
questions of the bundled HotpotQA dev sample (their own 5 context paragraphs as the starting context):

1. batched: every simulation step makes one `generate` call holding all questions' expansions, n = 3, and
   one holding the rollouts of the step's new augment children, n = 1 (§5.5);
2. one at a time: the same requests, one prompt and one sample per `generate` call.

The LLM is scripted with a latency model, so the figure is about the search's call pattern, not a model:
each call sleeps `--call-latency` plus `--sample-latency` per sequence generated (a GPU decoding a batch
costs little more than one sequence; on a CPU the per-sequence part dominates, so raise it to model one).
Its k-th sample for a prompt answers with the title of snippet (k mod 5) + 1, and the verifier scores a
pair from a hash of its text, so both runs build identical trees (checked) and differ only in how the LLM
is called. The reward's evidence extraction (TF-IDF) and the search itself run for real in both, so the
ratio of wall times per question is measured in one run, overheads included (after an untimed warm-up).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import time
from collections import Counter
from pathlib import Path

import numpy as np

from hoprag.llm.base import LLM
from hoprag.llm.scripted import render
from hoprag.llm.types import Generation, SamplingParams
from hoprag.retrieval import BM25Retriever
from hoprag.scripts import hotpotqa_dev, offline_defaults
from hoprag.search.mcts import AnswerSearch, iter_nodes
from hoprag.search.sc_rag_answer import parse_answer, render_snippets
from hoprag.verifiers import Verifier
from hoprag.verifiers.reward import EvidenceExtractor, NLIReward


class LatencyLLM(LLM):
    """Sleeps `call_latency + sample_latency * sequences` per call; the k-th sample of a prompt (over all
    calls) answers with the title of snippet (k mod 5) + 1, in JSON."""

    def __init__(self, call_latency: float, sample_latency: float) -> None:
        super().__init__()
        self.call_latency = call_latency
        self.sample_latency = sample_latency
        self.drawn: Counter[str] = Counter()

    def _generate(self, prompts, params: SamplingParams, seeds=None) -> list[list[Generation]]:
        time.sleep(self.call_latency + self.sample_latency * len(prompts) * params.n)
        outputs = []
        for prompt in prompts:
            text = render(prompt)
            titles = re.findall(r"\[doc_id=\d+\] title=([^\n]*)", text)
            samples = []
            for _ in range(params.n):
                k = self.drawn[text]
                self.drawn[text] += 1
                answer = titles[k % min(len(titles), 5)] if titles else "unknown"
                reply = json.dumps({"answer": answer, "evidence_doc_ids": [k % 5 + 1],
                                    "reasoning": f"The snippet is about {answer}. It answers the question."})
                samples.append(Generation(reply, tuple(reply.split()), (-0.5,) * len(reply.split()),
                                          len(text.split()), len(reply.split())))
            outputs.append(samples)
        return outputs


class OneAtATime(LLM):
    """Splits every call into one call per prompt and sample (n = 1) to `inner`."""

    def __init__(self, inner: LLM) -> None:
        super().__init__()
        self.inner = inner

    def _generate(self, prompts, params: SamplingParams, seeds=None) -> list[list[Generation]]:
        single = SamplingParams(params.max_new_tokens, params.temperature, params.top_p, 1, params.stop, params.seed)
        outputs = []
        for i, prompt in enumerate(prompts):
            seed = None if seeds is None else [seeds[i]]  # a prompt keeps its own seed
            outputs.append([self.inner.generate([prompt], single, seeds=seed)[0][0] for _ in range(params.n)])
        return outputs


class HashVerifier(Verifier):
    """Deterministic pseudo-NLI probabilities from a hash of the pair."""

    def _predict(self, pairs):
        rows = []
        for premise, hypothesis in pairs:
            digest = hashlib.md5(f"{premise}\x00{hypothesis}".encode()).digest()
            logits = np.frombuffer(digest[:3], dtype=np.uint8) / 64.0
            rows.append(np.exp(logits) / np.exp(logits).sum())
        return np.array(rows)


def search_once(llm: LLM, retriever, examples, simulations: int):
    reward = NLIReward(HashVerifier(), EvidenceExtractor())
    search = AnswerSearch(
        llm,
        prompt=lambda q, passages: [{"role": "user", "content": f"Question: {q}\n{render_snippets(passages)}"}],
        parse=lambda raw: parse_answer(raw, str.strip),
        reward=reward,
        retriever=retriever,
        simulations=simulations,
    )
    started = time.perf_counter()
    trees = search.run([ex.question for ex in examples], [ex.context[:5] for ex in examples])
    return time.perf_counter() - started, trees


def shape(trees) -> list:
    return [[(n.id, n.kind, n.depth, n.visits, n.parsed.answer if n.parsed else None) for n in iter_nodes(t.root)]
            for t in trees]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--simulations", type=int, default=24)
    ap.add_argument("--call-latency", type=float, default=0.05, help="seconds per generate call")
    ap.add_argument("--sample-latency", type=float, default=0.002, help="seconds per generated sequence")
    ap.add_argument("--out", default=None, help="also write the figures to this JSON file")
    args = ap.parse_args()
    offline_defaults()

    data = hotpotqa_dev(args.questions)
    retriever = BM25Retriever(data.corpus())
    search_once(LatencyLLM(0.0, 0.0), retriever, data.examples[:1], simulations=2)  # warm-up, untimed
    figures = {}
    trees = {}
    for label in ("batched", "one_at_a_time"):
        inner = LatencyLLM(args.call_latency, args.sample_latency)
        llm = inner if label == "batched" else OneAtATime(inner)
        seconds, trees[label] = search_once(llm, retriever, data.examples, args.simulations)
        samples = sum(t.samples for t in trees[label])
        figures[label] = {"seconds": round(seconds, 3), "seconds_per_question": round(seconds / len(data), 3),
                          "llm_calls": inner.usage.calls, "samples": samples}
        print(f"{label:>14}: {seconds:7.2f} s = {seconds / len(data):6.3f} s/question, "
              f"{inner.usage.calls:5d} LLM calls, {samples} samples")
    if shape(trees["batched"]) != shape(trees["one_at_a_time"]):
        raise SystemExit("the two runs built different trees: the comparison is void")
    ratio = figures["one_at_a_time"]["seconds"] / figures["batched"]["seconds"]
    print(f"{len(data)} questions x {args.simulations} simulations, call latency {args.call_latency} s "
          f"+ {args.sample_latency} s/sequence: one-at-a-time / batched wall time = {ratio:.2f}x (identical trees)")
    if args.out:
        result = {**vars(args), **figures, "ratio": round(ratio, 2)}
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
