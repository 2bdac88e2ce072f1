"""Score knowledge-source routers against gold source labels (TAT-QA's answer_from): accuracy and macro-F1.

    python scripts/components/eval_router.py --data ../shared/data/tatqa/tatqa_dataset_dev.json --format tatqa \
        [--classifier .cache/routers/minilm-tatqa] [--router <LoRA adapter dir>] \
        [--base-llm smollm2|none|<yaml>|<model>] [--split eval|all] [--limit N] [--out report.json]

Routers scored, each on the same questions: the tuned LLM router (`--router`: an export of `python train.py
+model=router_tatqa`, run as the base LLM with that LoRA adapter and the export's none policy), the un-tuned
one (the same prompt on the base LLM, PruningRAG's "w/o fine-tuning"; `--base-llm none` skips both), the
classifier router (`--classifier`: an export of `python train.py +model=router_classifier`), the majority
class of the router-training split, and always-both. `--split eval` (default) scores the router-evaluation
split of `--data`, made by the split training uses (`split_by_context`, same fraction and seed); `--split all`
scores a foreign file whole, less any question that is in the router-training split of `--train-data` (the
bundled TAT-QA dev, by default) by id, context or text. Questions an export (classifier or adapter: their
`router.json`) was trained on are refused, as is an export made for another option set or router prompt, or
an adapter on another base model (each differing key named, both sides). A reply naming no option
is a parse failure and counts as wrong.
The last line printed is the report as JSON (also written to `--out`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import time
from pathlib import Path
from typing import Any

from hoprag.data import DataFormatError, load_questions
from hoprag.data.heldout import context_of, question_key
from hoprag.data.types import QAExample
from hoprag.metrics.routing import routing_report
from hoprag.paths import PROJECT_ROOT, cache_root, data_root
from hoprag.routers.classifier import ClassifierRouter
from hoprag.routers.labels import gold_labels, majority_label
from hoprag.routers.options import TATQA, OptionSet
from hoprag.routers.router import LLMRouter, RouteDecision, check_router_export, router_contract
from hoprag.scripts import offline_defaults
from hoprag.training.exports import from_question_record, read_router_settings
from hoprag.training.splits import check_disjoint, split_by_context

UNPARSED = "?"  # the prediction of a reply that named no option
DEFAULT_TRAIN_DATA = "tatqa/tatqa_dataset_dev.json"


def build_llm(spec: str, adapter: str | None = None) -> Any:
    """An LLM from a conf/llm name (smollm2), a YAML file of that shape, or a model path (HFLLM defaults);
    `adapter` loads a LoRA adapter on top. The adapter's replies bypass the generation cache, so they can
    never be served the base model's cached ones."""
    from hydra.utils import get_class, instantiate
    from omegaconf import OmegaConf

    named = PROJECT_ROOT / "conf" / "llm" / f"{spec}.yaml"
    if named.is_file() or spec.endswith((".yaml", ".yml")):
        node = OmegaConf.load(named if named.is_file() else spec)
        root = OmegaConf.create({"paths": {"cache_dir": str(cache_root())}, "llm": node})
        cfg = OmegaConf.to_container(root, resolve=True)["llm"]
    else:
        cfg = {"_target_": "hoprag.llm.HFLLM", "model": spec}
    if adapter is not None:
        if "adapter" not in inspect.signature(get_class(cfg["_target_"])).parameters:
            raise SystemExit(f"eval_router: {cfg['_target_']} takes no adapter= argument: cannot load {adapter}")
        cfg |= {"adapter": adapter, "generation_cache": None}
    return instantiate(cfg)


def read_adapter_settings(directory: str, options: OptionSet) -> dict[str, Any]:
    """The tuned router's `router.json` (hoprag.routers.training's export): its option set, prompt version,
    base model, none policy and the questions it was trained on, without which it cannot be checked for
    leakage. Refused before any model loads unless made for `options` and today's router prompt."""
    try:
        settings = read_router_settings(directory)
    except FileNotFoundError as err:
        raise SystemExit(f"eval_router: {err}") from None
    check_router_export(directory, settings, router_contract(options))
    return settings


def split_for(args: argparse.Namespace, examples: list[QAExample]) -> tuple[list[QAExample], list[QAExample], int]:
    """(router-training split, questions to score, questions dropped as also in the training split)."""
    if args.split == "eval":
        train, evaluation = split_by_context(examples, args.eval_fraction, args.seed)
        return train, evaluation, 0
    source = args.train_data or data_root() / DEFAULT_TRAIN_DATA
    train, _ = split_by_context(load_questions(source, format=args.format), args.eval_fraction, args.seed)
    seen = {"ids": {ex.id for ex in train}, "contexts": {context_of(ex) for ex in train},
            "texts": {question_key(ex) for ex in train}}  # fmt: skip
    kept = [ex for ex in examples if ex.id not in seen["ids"] and context_of(ex) not in seen["contexts"]
            and question_key(ex) not in seen["texts"]]  # fmt: skip
    return train, kept, len(examples) - len(kept)


def predicted_letters(decisions: list[RouteDecision], options: OptionSet) -> list[str]:
    letters = []
    for d in decisions:
        try:
            letters.append(options.letter_of(d.sources))
        except ValueError:  # abstained: the reply named no option
            letters.append(UNPARSED)
    return letters


def score(name: str, letters: list[str], gold: list[str], options: OptionSet, seconds: float,
          failures: int = 0) -> dict[str, Any]:  # fmt: skip
    report = routing_report(gold, letters, options.letters)
    return {"router": name, **report, "parse_failures": failures, "seconds": round(seconds, 2)}


def run_router(name: str, router: Any, questions: list[str], gold: list[str], options: OptionSet) -> dict[str, Any]:
    started = time.perf_counter()
    decisions = router.route(questions)
    seconds = time.perf_counter() - started
    report = score(name, predicted_letters(decisions, options), gold, options, seconds,
                   sum(not d.parsed for d in decisions))  # fmt: skip
    report["replies"] = [d.reply for d in decisions[:5]]
    return report


def table(reports: list[dict[str, Any]]) -> str:
    lines = [f"{'router':<22} {'n':>5} {'acc %':>7} {'macro-F1 %':>11} {'parse fail':>11} {'seconds':>8}"]
    for r in reports:
        lines.append(f"{r['router']:<22} {r['n']:>5} {100 * r['accuracy']:>7.1f} {100 * r['macro_f1']:>11.1f} "
                     f"{r['parse_failures']:>11} {r['seconds']:>8.1f}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="question file with gold source labels")
    parser.add_argument("--format", default="tatqa", help="question format (hoprag.data FORMATS)")
    parser.add_argument("--router", help="LoRA adapter folder of the tuned LLM router")
    parser.add_argument("--classifier", help="export folder of a classifier router")
    parser.add_argument("--base-llm", default="smollm2", help="conf/llm name, YAML file or model path; none: skip")
    parser.add_argument("--none-policy", default="api", choices=["api", "abstain"])
    parser.add_argument("--split", default="eval", choices=["eval", "all"])
    parser.add_argument("--eval-fraction", type=float, default=0.5, help="as the training config's eval_fraction")
    parser.add_argument("--seed", type=int, default=0, help="as the training config's split_seed")
    parser.add_argument("--train-data", type=Path, help="--split all: the file whose training split to exclude")
    parser.add_argument("--limit", type=int, default=None, help="score the first N questions only")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--out", type=Path, help="write the JSON report here")
    args = parser.parse_args(argv)
    offline_defaults()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.router and args.base_llm == "none":
        raise SystemExit("eval_router: --router needs --base-llm (the model the adapter was trained on)")

    options = TATQA  # the gold labels are TAT-QA's answer_from
    try:
        train, evaluation, dropped = split_for(args, load_questions(args.data, format=args.format))
    except (DataFormatError, OSError) as err:
        raise SystemExit(f"eval_router: {err}") from None
    check_disjoint(train, evaluation)
    # the whole split is checked, so a split other than the exports' is refused under --limit too
    classifier = ClassifierRouter.load(args.classifier, options) if args.classifier else None
    if classifier is not None:
        classifier.check_unseen(evaluation)
    adapter = read_adapter_settings(args.router, options) if args.router else None
    if adapter is not None:
        check_disjoint([from_question_record(r) for r in adapter["trained_on"]], evaluation)
    evaluation = evaluation[: args.limit]
    if not evaluation:
        raise SystemExit("eval_router: no questions to score")
    gold = [options.letter_of(s) for s in gold_labels(evaluation)]
    questions = [ex.question for ex in evaluation]

    majority = majority_label([options.letter_of(s) for s in gold_labels(train)], options.letters)
    reports = []
    if args.router:
        # refused unless --base-llm is the model the adapter was trained on (LLMRouter checks the export)
        tuned = LLMRouter(build_llm(args.base_llm, args.router), options, adapter["none_policy"])
        reports.append(run_router("llm (tuned)", tuned, questions, gold, options))
    if args.base_llm != "none":
        untuned = LLMRouter(build_llm(args.base_llm), options, args.none_policy)
        reports.append(run_router("llm (un-tuned)", untuned, questions, gold, options))
    if classifier is not None:
        reports.append(run_router("classifier", classifier, questions, gold, options))
    reports.append(score(f"majority ({majority})", [majority] * len(gold), gold, options, 0.0))
    both = options.letter_of(("table", "text"))
    reports.append(score(f"always-both ({both})", [both] * len(gold), gold, options, 0.0))

    result = {
        "data": str(args.data),
        "split": args.split,
        "options": options.name,
        "eval_fraction": args.eval_fraction,
        "seed": args.seed,
        "train_questions": len(train),
        "eval_questions": len(evaluation),
        "dropped_as_seen": dropped,
        "gold_distribution": {letter: gold.count(letter) for letter in options.letters},
        "routers": reports,
    }
    print(f"{args.data.name} ({args.split} split): {len(evaluation)} questions, gold {result['gold_distribution']}")
    print(table(reports))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
