"""PruneRAG framework benchmark: round batching vs node-by-node calls, and vs the iterative chain baseline.

    python scripts/bench/bench_prunerag.py [--questions 32] [--batch-size 16] [--delay 0.05] [--out bench.json]

What is measured, in one run: the first --questions questions of the bundled HotpotQA dev sample, BM25
over their pooled paragraphs (real retrieval), and a scripted LLM that sleeps --delay seconds per batched
`generate` call, so the figures measure the framework (how many sequential LLM calls a method needs, plus
its retrieval, parsing and bookkeeping), not a model. The scripted policy makes every tree the same shape:
the root decomposes into two halves of the question, the first half is answered with full confidence, the
second extracts two entities; the final call answers in \\boxed{}. Per question that is 3 decisions + 1
final answer and 5 retrieval queries (RN = 5).

1. prunerag, batching=round: every round's nodes of a batch in one LLM call and one search (3 LLM calls a batch);
2. prunerag, batching=node: the same trees with one call per node and per query (4 LLM calls a question);
3. iter_retgen with --rounds (default 3 and 7, the paper's retrieval cap): one batched call per round.

Reported: wall seconds per question, LLM calls per batch, RN, and the ratios node/round and
iter_retgen/round (wall time per question, same questions and retriever). Index building is not timed.
"""

from __future__ import annotations

import json
import re

from hoprag.data import QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, IterRetGen, Method, PruneRAG
from hoprag.scripts import (
    answer_timed,
    framework_bench_parser,
    hotpotqa_dev,
    offline_defaults,
    pooled_bm25,
    report_ratios,
)

QUERY = re.compile(r"Parent query: (.*)\nQuery: (.*)\nOutput:")


def decide(prompt: str) -> str:
    """The scripted decision policy (see the module docstring)."""
    parent, query = QUERY.findall(prompt)[-1]  # the node's own, after the prompt's worked examples
    if parent == "ROOT":
        words = query.rstrip("?").split()
        half = max(1, len(words) // 2)
        sub1, sub2 = " ".join(words[:half]), " ".join(words[half:])
        return json.dumps({"type": "decomposition", "subquery1": sub1, "subquery2": sub2})
    if parent.rstrip("?").split()[: len(query.split())] == query.split():  # the first half
        return "```json " + json.dumps({"type": "answer", "answer": query.split()[-1]}) + " ```"
    words = query.split()
    return json.dumps({"type": "entity", "entity1": " ".join(words[:3]), "entity2": " ".join(words[-3:])})


def scripted(delay: float) -> ScriptedLLM:
    return ScriptedLLM(
        rules=[(r"### Inference Tree", r"\\boxed{yes}", 0.0), (r"Query: .*\nOutput:", decide, 0.0)],
        default_reply="Answer: yes",
        default_logprob=0.0,
        delay=delay,
    )


def timed(method: Method, examples: list[QAExample], batch_size: int) -> dict[str, float]:
    calls_before = len(method.llm.calls)
    _, costs, seconds = answer_timed(method, examples, batch_size)
    n, batches = len(examples), -(-len(examples) // batch_size)
    return {
        "seconds_per_question": seconds / n,
        "llm_calls_per_batch": (len(method.llm.calls) - calls_before) / batches,
        "llm_prompts_per_question": sum(c.llm_calls for c in costs) / n,
        "rn": sum(c.retrieval_calls for c in costs) / n,
    }


def main() -> None:
    ap = framework_bench_parser(__doc__)
    ap.add_argument("--rounds", type=int, nargs="+", default=[3, 7], help="iter_retgen rounds to compare")
    args = ap.parse_args()
    offline_defaults()

    examples = hotpotqa_dev(args.questions).examples
    retriever = pooled_bm25(examples)
    prompt = ChatPrompt("Answer with a short phrase.", "{passages}\n\nQuestion: {question}\nAnswer:")
    methods: dict[str, Method] = {
        "prunerag_round": PruneRAG(scripted(args.delay), retriever, batching="round"),
        "prunerag_node": PruneRAG(scripted(args.delay), retriever, batching="node"),
        **{f"iter_retgen_{r}": IterRetGen(scripted(args.delay), retriever, prompt, rounds=r) for r in args.rounds},
    }
    timed(methods["prunerag_round"], examples[:2], args.batch_size)  # warm-up (imports, first BM25 search)
    results = {name: timed(method, examples, args.batch_size) for name, method in methods.items()}

    print(f"{len(examples)} HotpotQA questions, batch {args.batch_size}, BM25, scripted LLM {args.delay}s a call")
    print(f"{'method':<18} {'s/question':>11} {'calls/batch':>12} {'prompts/q':>10} {'RN':>5}")
    for name, r in results.items():
        print(f"{name:<18} {r['seconds_per_question']:>11.4f} {r['llm_calls_per_batch']:>12.1f} "
              f"{r['llm_prompts_per_question']:>10.1f} {r['rn']:>5.1f}")  # fmt: skip
    base = results["prunerag_round"]["seconds_per_question"]
    ratios = {
        f"{name}/prunerag_round": r["seconds_per_question"] / base
        for name, r in results.items()
        if name != "prunerag_round"
    }
    report_ratios(ratios, results, args)


if __name__ == "__main__":
    main()
