"""Accuracy of an NLI verifier on a JSONL of NLI pairs; the last line printed is the report as JSON.

    python scripts/components/eval_nli.py <verifier folder or hub id> <file.jsonl> [--limit N] [--batch-size 64]
    python scripts/components/eval_nli.py .cache/verifiers/minilm-nli \\
        ../shared/data/nli/multi_nli_validation_matched_5k.jsonl

The file follows the shared schema `{premise, hypothesis, label, source}` with label 0 = entailment,
1 = neutral, 2 = contradiction. The model's own label order is read from its config. PTB-tokenised text
(as in the shared MultiNLI/SNLI files) is detokenised first, as in training; `--no-detokenize` turns that off.
Per-label accuracy is the recall of each gold label; `confusion[gold][predicted]` counts pairs.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from hoprag.data.nli import load_nli
from hoprag.data.records import DataFormatError
from hoprag.scripts import offline_defaults
from hoprag.verifiers import LABELS, CrossEncoderVerifier
from hoprag.verifiers.nli_data import ptb_detokenize


def accuracy_report(gold: np.ndarray, pred: np.ndarray, sources: list[str]) -> dict:
    """Overall, per gold label and per source accuracy (percent), plus the confusion matrix."""

    def pct(mask: np.ndarray) -> float:
        return round(100.0 * float((gold[mask] == pred[mask]).mean()), 2) if mask.any() else float("nan")

    everything = np.ones(len(gold), dtype=bool)
    names = np.array(sources)
    return {
        "pairs": len(gold),
        "accuracy": pct(everything),
        "per_label": {label: pct(gold == i) for i, label in enumerate(LABELS)},
        "per_source": {s: pct(names == s) for s in sorted(set(sources))},
        "confusion": {
            label: {other: int(((gold == i) & (pred == j)).sum()) for j, other in enumerate(LABELS)}
            for i, label in enumerate(LABELS)
        },
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="verifier folder (e.g. <run>/export), hub id or pkg:// reference")
    parser.add_argument("file", type=Path, help="NLI JSONL in the shared schema")
    parser.add_argument("--limit", type=int, default=None, help="first N pairs only")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--no-detokenize", dest="detokenize", action="store_false")
    args = parser.parse_args(argv)
    offline_defaults()

    try:
        pairs = load_nli(args.file, limit=args.limit)
    except (DataFormatError, OSError) as err:
        raise SystemExit(f"eval_nli: {err}") from None
    if not pairs:
        raise SystemExit(f"{args.file}: no NLI pairs")
    text = ptb_detokenize if args.detokenize else str
    verifier = CrossEncoderVerifier(args.model, args.device, args.batch_size, args.max_length, cache=False)
    verifier.columns  # load before the clock starts
    start = time.perf_counter()
    scores = verifier([(text(p.premise), text(p.hypothesis)) for p in pairs])
    seconds = time.perf_counter() - start

    gold = np.array([p.label for p in pairs])
    pred = np.array([int(np.argmax(s)) for s in scores])
    report = {
        "model": args.model,
        "file": str(args.file),
        **accuracy_report(gold, pred, [p.source for p in pairs]),
        "seconds": round(seconds, 2),
        "pairs_per_s": round(len(pairs) / seconds, 1),
    }
    print(f"{args.file.name}: {report['pairs']} pairs, accuracy {report['accuracy']:.2f}%")
    for label, acc in report["per_label"].items():
        print(f"  {label:<14} {acc:6.2f}%")
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
