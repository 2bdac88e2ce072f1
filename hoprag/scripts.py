"""The set-up the scripts under `scripts/` share, written once: their offline defaults, a config composed from
`conf/` as its entry point composes it, the bundled HotpotQA dev sample with BM25 over its questions' own
paragraphs, answering in the runner's batches under a clock, and the framework benchmarks' common arguments and
ratio report. Scripts import it as a package module (hoprag is installed), so none edits `sys.path`."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from hoprag.config import register_resolvers
from hoprag.cost import Cost
from hoprag.data import QADataset, QAExample, pool_corpus
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import BM25Retriever

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from hoprag.methods import Method, MethodOutput

HOTPOTQA_DEV = "hotpotqa/hotpot_dev_distractor_185.json"


def offline_defaults() -> None:
    """A script reaches no model hub unless its caller sets HF_HUB_OFFLINE otherwise, and tokenizers stay
    single-threaded (no warning or deadlock when a benchmark forks); call it before a model loads."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def compose_config(name: str, overrides: Sequence[str]) -> DictConfig:
    """`conf/<name>.yaml` with `overrides`, as `eval.py` (or `build_index.py`) composes it, for scripts that build
    what an entry point builds without running one."""
    register_resolvers()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return compose(name, list(overrides))


def hotpotqa_dev(limit: int | None = None) -> QADataset:
    """The bundled HotpotQA dev sample (185 questions), its first `limit`: what the benchmarks run on."""
    return QADataset("hotpotqa", HOTPOTQA_DEV, format="hotpotqa", limit=limit)


def pooled_bm25(examples: Sequence[QAExample]) -> BM25Retriever:
    """BM25 over the questions' own paragraphs, pooled; built in a temporary directory, so nothing is cached."""
    with tempfile.TemporaryDirectory() as cache:
        return BM25Retriever(pool_corpus(examples), cache_dir=cache)


def answer_timed(
    method: Method, examples: Sequence[QAExample], batch_size: int
) -> tuple[list[MethodOutput], list[Cost], float]:
    """The method's outputs and cost records over `examples`, asked in the runner's batches, and the wall
    seconds the answering took."""
    outputs: list[MethodOutput] = []
    costs = [Cost() for _ in examples]
    started = time.perf_counter()
    for i in range(0, len(examples), batch_size):
        outputs += method.answer(examples[i : i + batch_size], costs[i : i + batch_size])
    return outputs, costs, time.perf_counter() - started


def framework_bench_parser(doc: str) -> argparse.ArgumentParser:
    """The arguments of a framework benchmark on the scripted LLM (its description: `doc`'s first line)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds the scripted LLM sleeps per batched call")
    parser.add_argument("--out", type=Path, default=None, help="also write the results as JSON")
    return parser


def report_ratios(ratios: dict[str, float], results: dict[str, Any], args: argparse.Namespace) -> None:
    """Print each ratio; with `--out`, write the run's other arguments, its results and the ratios as JSON."""
    width = max(len(name) for name in ratios)
    for name, ratio in ratios.items():
        print(f"ratio {name:<{width}} {ratio:6.2f}x")
    if args.out:
        settings = {k: v for k, v in vars(args).items() if k != "out"}
        args.out.write_text(json.dumps({"settings": settings, "results": results, "ratios": ratios}, indent=2))
