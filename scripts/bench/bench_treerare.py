"""TreeRare framework benchmark: level-batched vs node-by-node traversal, measured side by side in one run.

    python scripts/bench/bench_treerare.py [--questions 32] [--batch-size 16] [--delay 0.05] [--out bench.json]

What is measured: the first --questions questions of the bundled HotpotQA dev sample, parsed into real
dependency trees (spaCy, the offline default), BM25 over their pooled paragraphs (real retrieval), and a
scripted LLM that sleeps --delay seconds per batched `generate` call, so the figures measure the framework
(how many sequential LLM calls the traversal needs, plus parsing, retrieval, prompt building and
bookkeeping), not a model. The scripted QG writes two queries about each node's phrase, SAG a one-line
paragraph and FAG an `Explanations:` / `FINAL:` reply, so both modes walk the same trees and make the same
per-question calls (2 × processed nodes + 1):

1. batching=level: all nodes of one height across a batch in one QG call, one search and one SAG call;
2. batching=node: one call per node, in post-order, question after question.

Reported: wall seconds per question, backend LLM calls per question (sequential `generate` calls; each
question's own prompts are the same in both modes), and the ratio node/level of seconds per question.
"""

from __future__ import annotations

import re
from functools import partial

from hoprag.data import QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import TreeRare
from hoprag.scripts import (
    answer_timed,
    framework_bench_parser,
    hotpotqa_dev,
    offline_defaults,
    pooled_bm25,
    report_ratios,
)
from hoprag.search.treerare import TreeRareSearch
from hoprag.search.treerare.parsers import DependencyParser


def qg(prompt: str) -> str:
    phrase = re.search(r"Phrase: (.*)\n", prompt).group(1)
    return f"response: what is {phrase}?; who is {phrase}?"


def scripted(delay: float) -> ScriptedLLM:
    return ScriptedLLM(
        rules=[
            (r"Phrase: ", qg, 0.0),
            (r"Questions: ", "The documents say several things about these questions.", 0.0),
            (r"Answer the question using", "Explanations: from the documents.\nFINAL: yes", 0.0),
        ],
        delay=delay,
    )


def timed(method: TreeRare, examples: list[QAExample], batch_size: int) -> dict[str, float]:
    calls_before = len(method.llm.calls)
    outputs, costs, seconds = answer_timed(method, examples, batch_size)
    n = len(examples)
    return {
        "seconds_per_question": seconds / n,
        "llm_calls_per_question": (len(method.llm.calls) - calls_before) / n,
        "llm_prompts_per_question": sum(c.llm_calls for c in costs) / n,
        "retrieval_calls_per_question": sum(c.retrieval_calls for c in costs) / n,
        "processed_nodes": sum(o.stats["processed_nodes"] for o in outputs) / n,
        "tree_height": sum(o.stats["tree_height"] for o in outputs) / n,
    }


def main() -> None:
    ap = framework_bench_parser(__doc__)
    ap.add_argument("--k", type=int, default=15, help="BM25 passages per query")
    args = ap.parse_args()
    offline_defaults()

    examples = hotpotqa_dev(args.questions).examples
    retriever = pooled_bm25(examples)
    parser, search = DependencyParser(), partial(TreeRareSearch, k=args.k)
    methods = {
        mode: TreeRare(scripted(args.delay), retriever, {"dt": parser}, search, batching=mode) for mode in ("level", "node")
    }
    timed(methods["level"], examples[:2], args.batch_size)  # warm-up (spaCy load, first BM25 search)
    results = {mode: timed(method, examples, args.batch_size) for mode, method in methods.items()}

    print(f"{len(examples)} HotpotQA questions, batch {args.batch_size}, spaCy DT, BM25 top-{args.k}, "
          f"scripted LLM {args.delay}s a call")  # fmt: skip
    print(f"{'batching':<9} {'s/question':>11} {'LLM calls/q':>12} {'prompts/q':>10} {'searches/q':>11} "
          f"{'nodes/q':>8} {'height':>7}")  # fmt: skip
    for mode, r in results.items():
        print(f"{mode:<9} {r['seconds_per_question']:>11.4f} {r['llm_calls_per_question']:>12.2f} "
              f"{r['llm_prompts_per_question']:>10.2f} {r['retrieval_calls_per_question']:>11.2f} "
              f"{r['processed_nodes']:>8.2f} {r['tree_height']:>7.2f}")  # fmt: skip
    ratios = {
        "seconds_per_question node/level": results["node"]["seconds_per_question"]
        / results["level"]["seconds_per_question"],
        "llm_calls_per_question node/level": results["node"]["llm_calls_per_question"]
        / results["level"]["llm_calls_per_question"],
    }
    report_ratios(ratios, results, args)


if __name__ == "__main__":
    main()
