"""TreeHop retrieval (spec/treehop.md): the trained query rewriter's tree search, scored like the paper's Table 2.

Retrieval only by default: the prediction is empty unless `generate=true` feeds the passages (hop by hop,
best first within a hop) to the LLM. With `compare=true` the same run also retrieves with direct top-5 and
top-10, the training-free `q − c` update and an untrained TreeHop (PyTorch default init), on the same
index and embedder, and records per question, for each variant and hop, the gold titles found (`hits`), the
per-question recall in percent (its mean is macro recall) and the distinct passages read (`k`), plus `gold`: the
runner averages them into `method/<variant>/hop<N>/...`, and micro recall = hits / gold
(`python scripts/runs/eval_treehop.py <run dir>` prints the table), and seconds per question (encoding plus the
variant's share of the batched search). Only questions of `table_types` report them (the paper leaves out
2Wiki's comparison questions).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, ContextPrompt, PassageFormat
from hoprag.methods.base import Method, MethodOutput, setting
from hoprag.retrieval.retrievers import DenseRetriever, Retriever
from hoprag.treehop.model import TreeHop
from hoprag.treehop.retriever import TreeHopRetriever, model_step, q_minus_c
from hoprag.treehop.search import TreeResult


class TreeHopMethod(Method):
    """TreeHop@`top_k` over `n_hops` rounds gives the passages; `report_hops` rounds are scored. `search` is
    the tree search, given unfinished (Hydra `_partial_`, or the class) with its own settings
    (`TreeHopRetriever`'s: the checkpoint, pruning switches) and completed here with the dense retriever,
    its corpus and `n_hops`."""

    name = "treehop"
    completes = {"search": ("corpus", "dense", "n_hops")}

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever,
        search: Callable[..., TreeHopRetriever] = TreeHopRetriever,
        top_k: int = 5,
        n_hops: int = 2,
        report_hops: int = 3,
        compare: bool = True,
        untrained_seed: int = 0,
        table_types: Sequence[str] | None = ("compositional", "inference", "bridge_comparison"),
        generate: bool = False,
        prompt: ChatPrompt | None = None,
        passage_template: str = "Title: {title}\n{text}",
        **kwargs,
    ) -> None:
        super().__init__(llm, retriever, **kwargs)
        self.check_generate(generate, prompt)
        dense = retriever.dense if isinstance(retriever, TreeHopRetriever) else retriever
        if not isinstance(dense, DenseRetriever):
            raise TypeError(
                f"TreeHop searches with embedding vectors: it needs retriever=dense or retriever=treehop, "
                f"not {type(retriever).__name__}"
            )
        self.search = self.complete_part("search", search, corpus=dense.corpus, dense=dense, n_hops=n_hops)
        self.top_k, self.n_hops, self.report_hops = top_k, n_hops, max(report_hops, n_hops)
        self.table_types = set(table_types) if table_types is not None else None
        self.generates, self.prompt, self.passages = generate, prompt, PassageFormat(passage_template)
        self.variants: dict[str, tuple[object, int, int]] = {}  # name → (step, top_k, hops)
        if compare:
            model = self.search.model
            config = model.config if model is not None else {"dim": self.search.vectors.shape[1]}
            torch.manual_seed(untrained_seed)
            # the paper's untrained TreeHop: a random gate added at full scale (a zero-started correction would be q − c)
            paper = {"gate_scale": 1.0, "gate_init_scale": 1.0, "correction_init": 1.0, "learn_scale": False}
            untrained = TreeHop(**{**config, **paper}).eval()
            self.variants |= {
                f"direct@{top_k}": (None, top_k, 1),
                f"direct@{2 * top_k}": (None, 2 * top_k, 1),
                f"q-c@{top_k}": (q_minus_c, top_k, self.report_hops),
                f"untrained@{top_k}": (model_step(untrained), top_k, self.report_hops),
            }
        main = "treehop" if self.search.model is not None else "q-c"
        self.main = f"{main}@{top_k}"
        self.variants[self.main] = (self.search.step, top_k, self.report_hops)

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """`generate` against `prompt`, as the constructor checks them."""
        cls.check_generate(setting(cls, settings, "generate"), setting(cls, settings, "prompt"))
        super().check_settings(settings)

    @staticmethod
    def check_generate(generate: bool, prompt: object) -> None:
        if generate and prompt is None:
            raise ValueError("generate=true needs a prompt with {passages} and {question}")

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        started = time.perf_counter()
        vectors = self.search.embedder.encode_queries([ex.question for ex in examples])
        encode = (time.perf_counter() - started) / len(examples)
        runs = {name: self.search.tree(vectors, k, hops, step) for name, (step, k, hops) in self.variants.items()}
        main = runs[self.main]
        retrieved = []
        for ex, result, cost in zip(examples, main, costs):
            cost.seconds["encode"] += encode
            spent = [0.0, *result.seconds]
            for hop, rows in enumerate(result.hops[: self.n_hops]):
                ids = [self.search.passages[r].id for r in rows]
                cost.add_retrieval(ids, spent[hop + 1] - spent[hop], "retrieval")
            retrieved.append([self.search.passages[r] for r in result.rows(self.n_hops)])
        if self.generates:
            outputs = self._final_answers([self._prompt(ex, ps) for ex, ps in zip(examples, retrieved)], costs, retrieved)
        else:
            outputs = [MethodOutput("", passages) for passages in retrieved]
        for i, (ex, out) in enumerate(zip(examples, outputs)):
            result = main[i]
            out.trace |= {
                "hops": [[self.search.passages[r].id for r in hop] for hop in result.hops],
                "scores": [[round(s, 4) for s in hop] for hop in result.scores],
                "candidates": result.candidates,
            }
            if self.table_types is None or ex.type in self.table_types:
                out.stats = self._stats(ex, {name: res[i] for name, res in runs.items()}, encode)
        return outputs

    def _stats(self, example: QAExample, runs: dict[str, TreeResult], encode: float) -> dict[str, float]:
        """Per variant and hop: gold titles found, recall (%), distinct passages and seconds (encoding included)."""
        gold = set(example.supporting_titles)
        stats: dict[str, float] = {"gold": float(len(gold))}
        for name, result in runs.items():
            for hop in range(1, len(result.hops) + 1):
                rows = result.rows(hop)
                hits = len(gold & {self.search.passages[r].title for r in rows})
                stats[f"{name}/hop{hop}/hits"] = float(hits)
                stats[f"{name}/hop{hop}/recall"] = 100 * hits / len(gold) if gold else float("nan")
                stats[f"{name}/hop{hop}/k"] = float(len(rows))
                stats[f"{name}/hop{hop}/seconds"] = result.seconds[hop - 1] + encode
        return {k: v for k, v in stats.items() if not np.isnan(v)}

    def _prompt(self, example: QAExample, passages: list[Passage]) -> ContextPrompt:
        return self.prompt.with_context("passages", self.passages.context(passages), question=example.question)
