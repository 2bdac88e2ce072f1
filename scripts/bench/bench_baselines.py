"""Baselines benchmark: each baseline batched per step across questions vs one LLM call per prompt.

    python scripts/bench/bench_baselines.py [--questions 32] [--batch-size 16] [--delay 0.05] [--out bench.json]
        [--methods react ircot ...]

What is measured, in one run: every baseline of issue 29 built from its own config (conf/method/<name>.yaml,
its prompts and stopping rules), on the first --questions questions of the bundled HotpotQA dev sample, with
BM25 over their pooled paragraphs (real retrieval) and a scripted LLM that sleeps --delay seconds per
batched `generate` call, so the figures measure the framework (how many sequential LLM calls and searches a
method needs, plus its parsing and bookkeeping), not a model. The scripted policy (`reply`) walks each
method through more than one step: ReAct, Self-Ask, IRCoT and Search-o1 search twice and then answer; ToT's
states answer at the second step; ProbTree's root has two leaves; Self-RAG retrieves.

Each method runs twice on the same questions: `method.batching=step` (the default: one LLM call per step for
all active questions) and `method.batching=question` (one call per prompt). Reported: wall seconds per
question, LLM calls per batch, prompts per question, retrievals per question, and the ratio question/step.
"""

from __future__ import annotations

import re

from hydra.utils import instantiate

from hoprag.data import QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import Method
from hoprag.retrieval import BM25Retriever
from hoprag.scripts import (
    answer_timed,
    compose_config,
    framework_bench_parser,
    hotpotqa_dev,
    offline_defaults,
    pooled_bm25,
    report_ratios,
)

BASELINES = (
    "cot",
    "self_consistency",
    "tot",
    "react",
    "self_ask",
    "ircot",
    "search_o1",
    "hyde",
    "rrr",
    "probtree",
    "self_rag",
)
# method settings that keep the benchmark's trees small (the paper's ToT makes 5 x 5 states a step)
SETTINGS = {"tot": ["method.branching=2", "method.breadth=2", "method.evaluations=1", "method.depth=3"]}


def last(pattern: str, text: str) -> str:
    found = re.findall(pattern, text)
    return found[-1] if found else ""


def reply(text: str) -> str:
    """The scripted policy: recognise the method's prompt by its end and answer so the method goes on."""
    text = text.rstrip()
    if (turn := re.search(r"Thought (\d+):$", text)) is not None:  # ReAct
        n = int(turn.group(1))
        question = last(r"Question: (.*)\n", text)
        return f" I look it up.\nAction {n}: Search[{question} {n}]" if n < 3 else f" Found.\nAction {n}: Finish[yes]"
    if "Are follow up questions needed here:" in text and "Answer:" not in text[-10:]:  # Self-Ask
        asked = text.rsplit("Are follow up questions needed here:", 1)[1].count("Intermediate answer:")
        return f" Yes.\nFollow up: which one is number {asked}?\n" if asked < 2 else "So the final answer is: yes"
    if "Current Search Query:" in text:  # Search-o1's Reason-in-Documents
        return "**Final Information**\nThe documents say yes."
    if "<|begin_search_query|>" in text:  # Search-o1's reasoning turn
        searched = text.rsplit("Question:", 1)[1].count("<|end_search_result|>")
        if searched < 2:
            return f" I search. <|begin_search_query|>fact {searched}<|end_search_query|>"
        return " The answer is \\boxed{yes}."
    if re.search(r"\nQ: .*\nA:( .*)?$", text) and "Wikipedia Title:" in text:  # IRCoT
        chain = text.rsplit("\nA:", 1)[1]
        return " So the answer is: yes." if chain.count(".") >= 2 else " One more fact is known."
    if text.endswith("Judgement (sure, likely or impossible):"):  # ToT's value
        return " likely"
    if "one reasoning step at a time" in text:  # ToT's next step
        return (
            "A first step." if text.endswith("none yet\nNext step or final answer:") else "#FINAL: The answer is yes."
        )
    if "#FINAL" in text:  # CoT, Self-Consistency
        return "#Explanations: the passages say so.\n#FINAL: The answer is yes."
    if text.endswith("Passage:"):  # HyDE
        return " The passage that answers the question says yes."
    if text.endswith("Queries:"):  # RRR
        return " first query; second query**"
    if "decomposition tree" in text:  # ProbTree's decomposition
        question = last(r"Q: (.*)\nA:", text)
        return f' {{"{question}": ["What is the first part?", "What is the second part of <1>?"]}}.'
    if "So the answer is:" in text:  # ProbTree's answering prompts
        return " It is known. So the answer is: yes."
    if text.endswith("### Response:"):  # Self-RAG's retrieve decision
        return "[Retrieval]"
    if "</paragraph>" in text:  # Self-RAG's segment
        return "[Relevant]yes[Fully supported][Utility:5]"
    return "yes"


def build(name: str, batching: str, retriever: BM25Retriever, delay: float) -> Method:
    cfg = compose_config(
        "eval", [f"+method={name}", "llm=scripted", f"method.batching={batching}", *SETTINGS.get(name, [])]
    )
    llm = ScriptedLLM(rules=[(r"[\s\S]", reply, -0.1)], default_logprob=-0.1, delay=delay)
    factory = instantiate(cfg.method)
    return factory(llm=llm, **({"retriever": retriever} if factory.func.reads_passages(factory.keywords) else {}))


def timed(method: Method, examples: list[QAExample], batch_size: int) -> dict[str, float]:
    _, costs, seconds = answer_timed(method, examples, batch_size)
    n, batches = len(examples), -(-len(examples) // batch_size)
    return {
        "seconds_per_question": seconds / n,
        "llm_calls_per_batch": len(method.llm.calls) / batches,
        "llm_prompts_per_question": sum(c.llm_calls for c in costs) / n,
        "retrievals_per_question": sum(c.retrieval_calls for c in costs) / n,
    }


def main() -> None:
    ap = framework_bench_parser(__doc__)
    ap.add_argument("--methods", nargs="+", default=list(BASELINES), choices=BASELINES)
    args = ap.parse_args()
    offline_defaults()

    examples = hotpotqa_dev(args.questions).examples
    retriever = pooled_bm25(examples)
    results: dict[str, dict[str, float]] = {}
    for name in args.methods:
        for batching in ("step", "question"):
            results[f"{name}/{batching}"] = timed(
                build(name, batching, retriever, args.delay), examples, args.batch_size
            )

    print(f"{len(examples)} HotpotQA questions, batch {args.batch_size}, BM25, scripted LLM {args.delay}s a call")
    print(f"{'method/batching':<26} {'s/question':>11} {'calls/batch':>12} {'prompts/q':>10} {'searches/q':>11}")
    for name, r in results.items():
        print(f"{name:<26} {r['seconds_per_question']:>11.4f} {r['llm_calls_per_batch']:>12.1f} "
              f"{r['llm_prompts_per_question']:>10.1f} {r['retrievals_per_question']:>11.1f}")  # fmt: skip
    ratios = {
        f"{name}: question/step": results[f"{name}/question"]["seconds_per_question"]
        / results[f"{name}/step"]["seconds_per_question"]
        for name in args.methods
    }
    report_ratios(ratios, results, args)


if __name__ == "__main__":
    main()
