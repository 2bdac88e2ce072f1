"""Training data for the cross-encoder reranker: question groups with mined hard negatives, and held-back pools.

The training sources' paragraphs are pooled into one corpus, searched by BM25 and by the dense index (both built
once, by `prepare_data`, and cached under their `cache_dir`, as every retriever is; under DDP rank 0 alone searches
them and hands every rank the results). A seeded slice of each source's questions
(`held_back`) is kept out of training: validation reranks each of them over its BM25 top `val_pool` of the pooled
corpus (the candidate list a reranker is given in use) and logs gold-title recall@k and MRR, so the checkpoint is
chosen on training-file questions the model never trained on, never on a dev set. The same pools ordered by BM25
itself and by the bi-encoder (`EmbeddingReranker` over the dense index's embedder) are measured once, as the
references the trained model is read against.

A training group is (question, one gold paragraph, hard negatives): `bm25_negatives` and `dense_negatives` drawn
afresh each time the group is batched from each retriever's top `mined_depth` hits minus gold-titled ones
(`mining.py`). An epoch is `groups_per_epoch` groups drawn without replacement (all of them when null; over all
devices under DDP, as `batch_size` is), so validation, and with it checkpoint choice, comes often enough within a
CPU budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader

from hoprag.data.corpus import pool_corpus
from hoprag.data.dataset import QADataset
from hoprag.data.types import Passage, QAExample
from hoprag.rerankers.mining import gold_passages, mine
from hoprag.rerankers.ranking import order_metrics
from hoprag.retrieval.rerankers import EmbeddingReranker
from hoprag.retrieval.retrievers import DenseRetriever, Hit, Retriever
from hoprag.training.distributed import device_batch, from_rank_zero, report, whole_set
from hoprag.training.sampler import EpochDraw
from hoprag.utils.bundled import resolve_model_ref


@dataclass(frozen=True)
class Group:
    """A training question's gold paragraph; its negatives are drawn when it is batched."""

    question: int  # index into the datamodule's training questions
    positive: Passage


@dataclass(frozen=True)
class Pool:
    """A held-back question and the candidates validation reranks (BM25's order)."""

    question: QAExample
    candidates: list[Passage]


@dataclass(frozen=True)
class Searched:
    """What the miners found, as rows of the pooled corpus (what rank 0 hands the other ranks): per training
    question its negatives by BM25 and by the dense index, per held-back question its BM25 pool; the references'
    figures on those pools and the gold-titled hits dropped from the negatives, per miner."""

    bm25: list[list[int]]
    dense: list[list[int]]
    pools: list[list[int]]
    references: dict[str, float]
    dropped: dict[str, int]


class GroupCollator:
    """Draws each group's negatives (seeded, so a run is reproducible) and tokenizes its (question, passage) pairs:
    the positive first, then the BM25 negatives, then the dense ones not already drawn; `mask` marks the real
    candidates of groups that have fewer."""

    def __init__(self, data: RerankerDataModule, seed: int) -> None:
        self.data = data
        self.rng = np.random.default_rng(seed)

    def __call__(self, groups: list[Group]) -> dict[str, torch.Tensor]:
        d = self.data
        size = 1 + d.bm25_negatives + d.dense_negatives
        queries, passages, mask = [], [], torch.zeros(len(groups), size, dtype=torch.bool)
        for g, group in enumerate(groups):
            chosen = [group.positive]
            for pool, n in (
                (d.bm25_mined[group.question], d.bm25_negatives),
                (d.dense_mined[group.question], d.dense_negatives),
            ):
                fresh = [p for p in pool if p.id not in {c.id for c in chosen}]
                picks = self.rng.choice(len(fresh), size=min(n, len(fresh)), replace=False) if fresh else []
                chosen += [fresh[i] for i in sorted(picks)]
            mask[g, : len(chosen)] = True
            chosen += [group.positive] * (size - len(chosen))  # padding, masked out of the loss
            queries += [d.train_questions[group.question].question] * size
            passages += [p.contents for p in chosen]
        batch = dict(d.tokenize(queries, passages))
        batch["mask"] = mask
        return batch


class RerankerDataModule(L.LightningDataModule):
    """`sources` (QADatasets of training files, by name) give the questions and the pooled corpus; `bm25` and
    `dense` build the two miners over it (Hydra `_partial_` retrievers, completed with `corpus=`)."""

    def __init__(
        self,
        sources: Mapping[str, QADataset],
        tokenizer: str,
        bm25: Callable[..., Retriever],
        dense: Callable[..., DenseRetriever],
        mined_depth: int = 30,
        bm25_negatives: int = 3,
        dense_negatives: int = 2,
        held_back: float = 0.1,
        val_pool: int = 20,
        ks: Sequence[int] = (2, 5, 10),
        max_length: int = 192,
        batch_size: int = 4,
        groups_per_epoch: int | None = None,
        eval_batch_size: int = 64,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if not 0.0 < held_back < 1.0:
            raise ValueError(f"held_back must be in (0, 1), got {held_back}")
        if bm25_negatives + dense_negatives < 1:
            raise ValueError("a group needs at least one negative: bm25_negatives + dense_negatives >= 1")
        self.sources = {name: s for name, s in sources.items() if s is not None}  # null: a source left out
        self.tokenizer_ref = tokenizer
        self.make_bm25, self.make_dense = bm25, dense
        self.mined_depth, self.bm25_negatives, self.dense_negatives = mined_depth, bm25_negatives, dense_negatives
        self.held_back, self.val_pool, self.ks = held_back, val_pool, list(ks)
        self.max_length, self.batch_size, self.eval_batch_size = max_length, batch_size, eval_batch_size
        self.groups_per_epoch, self.seed = groups_per_epoch, seed
        self.groups: list[Group] | None = None
        self.references: dict[str, float] = {}  # BM25's and the bi-encoder's figures on the same pools
        self.stats: dict[str, Any] = {}
        self.prepare_data_per_node = False  # global rank 0 alone searches the indexes (`setup`)

    def tokenize(self, queries: list[str], passages: list[str]) -> Mapping[str, torch.Tensor]:
        """(query, passage) pairs as the exported model's `CrossEncoder` tokenizes them: the passage is
        `Passage.contents` (title, newline, text), truncated to `max_length` tokens together with the query."""
        return self.tokenizer(queries, passages, padding=True, truncation=True, max_length=self.max_length,
                              return_tensors="pt")  # fmt: skip

    def prepare_data(self) -> None:
        """Build both miners' indexes (each cached by its retriever), once: train.py calls this before DDP starts
        its other processes (Lightning again on each node's rank 0, the others waiting)."""
        corpus = self._corpus()
        self.make_bm25(corpus=corpus)
        self.make_dense(corpus=corpus)

    def setup(self, stage: str | None = None) -> None:
        if self.groups is not None:
            return
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(resolve_model_ref(self.tokenizer_ref))
        train, held = self._split()
        corpus = self._corpus()
        self.train_questions = [ex for examples in train.values() for ex in examples]
        self.groups = [Group(i, p) for i, ex in enumerate(self.train_questions) for p in gold_passages(ex)]
        held_out = [ex for examples in held.values() for ex in examples]
        found = from_rank_zero(self.trainer, lambda: self._search(corpus, held_out))
        self.bm25_mined = [[corpus[r] for r in rows] for rows in found.bm25]
        self.dense_mined = [[corpus[r] for r in rows] for rows in found.dense]
        self.pools = [Pool(ex, [corpus[r] for r in rows]) for ex, rows in zip(held_out, found.pools)]
        self.references = found.references
        self.stats = {
            "corpus": len(corpus),
            "train_questions": {name: len(examples) for name, examples in train.items()},
            "held_back_questions": {name: len(examples) for name, examples in held.items()},
            "groups": len(self.groups),
            "false_negatives_dropped": found.dropped,
            "trained_on": {name: [ex.id for ex in examples] for name, examples in train.items()},
            "held_back": {name: [ex.id for ex in examples] for name, examples in held.items()},
        }
        report(f"reranker data: {len(self.groups)} training groups from {len(self.train_questions)} questions "
               f"{self.stats['train_questions']}, {len(self.pools)} held back; corpus {len(corpus)} passages; "
               f"gold-titled hits dropped from the negatives: {found.dropped['bm25']} BM25, {found.dropped['dense']} dense")  # fmt: skip
        report("reranker data: held-back pools (BM25 top-{}): {}".format(self.val_pool, ", ".join(
            f"{k.removeprefix('val/')} {v:.3f}" for k, v in self.references.items())))  # fmt: skip

    def _corpus(self) -> list[Passage]:
        """The training sources' paragraphs, pooled (each passage once)."""
        return pool_corpus(ex for dataset in self.sources.values() for ex in dataset.examples)

    def _search(self, corpus: list[Passage], held_out: list[QAExample]) -> Searched:
        """Mine every training question's negatives, pool each held-back question's BM25 top `val_pool`, and measure
        BM25's and the bi-encoder's own order of those pools (the indexes load from `prepare_data`'s cache)."""
        bm25, dense = self.make_bm25(corpus=corpus), self.make_dense(corpus=corpus)
        by_bm25 = mine(self.train_questions, bm25, self.mined_depth)
        by_dense = mine(self.train_questions, dense, self.mined_depth)
        hits = bm25.search([ex.question for ex in held_out], self.val_pool)
        row = {p.id: i for i, p in enumerate(corpus)}

        def rows(lists: list[list[Passage]]) -> list[list[int]]:
            return [[row[p.id] for p in passages] for passages in lists]

        return Searched(
            rows(by_bm25.negatives), rows(by_dense.negatives), rows([[h.passage for h in pool] for pool in hits]),
            self._references(held_out, hits, EmbeddingReranker(dense.embedder)),
            {"bm25": by_bm25.dropped, "dense": by_dense.dropped},
        )  # fmt: skip

    def _split(self) -> tuple[dict[str, list[QAExample]], dict[str, list[QAExample]]]:
        """Per source, its questions with a gold paragraph in context, a seeded `held_back` share of them apart."""
        train, held = {}, {}
        rng = np.random.default_rng(self.seed)
        for name, dataset in self.sources.items():
            usable = [ex for ex in dataset.examples if gold_passages(ex)]
            if len(usable) < 2:
                raise ValueError(f"{name}: {len(usable)} questions with a gold paragraph; at least 2 are needed")
            n_held = min(len(usable) - 1, max(1, round(self.held_back * len(usable))))
            out = set(rng.permutation(len(usable))[:n_held].tolist())
            train[name] = [ex for i, ex in enumerate(usable) if i not in out]
            held[name] = [ex for i, ex in enumerate(usable) if i in out]
            if len(usable) < len(dataset.examples):
                report(f"reranker data: {name}: {len(dataset.examples) - len(usable)} questions without a gold "
                       "paragraph in their context left out")  # fmt: skip
        return train, held

    def _references(
        self, held_out: list[QAExample], hits: list[list[Hit]], biencoder: EmbeddingReranker
    ) -> dict[str, float]:
        golds = [ex.supporting_titles for ex in held_out]
        bm25 = [[h.passage.title for h in pool] for pool in hits]
        reranked = biencoder.rerank([ex.question for ex in held_out], hits, None)
        by_biencoder = [[h.passage.title for h in pool] for pool in reranked]
        return {**order_metrics(bm25, golds, self.ks, "val/bm25_"),
                **order_metrics(by_biencoder, golds, self.ks, "val/biencoder_")}  # fmt: skip

    def train_dataloader(self) -> DataLoader:
        """`batch_size` groups a step over all devices; under DDP each rank takes its share of the epoch's draw and
        draws negatives from a generator of its own."""
        n = min(self.groups_per_epoch or len(self.groups), len(self.groups))
        rank = self.trainer.global_rank if self.trainer is not None else 0
        return DataLoader(self.groups, batch_size=device_batch(self.batch_size, self.trainer, "groups"),
                          sampler=EpochDraw(len(self.groups), n, self.seed),
                          collate_fn=GroupCollator(self, self.seed + rank))  # fmt: skip

    def val_dataloader(self) -> DataLoader:
        per_batch = max(1, self.eval_batch_size // max(1, self.val_pool))
        return DataLoader(self.pools, batch_size=per_batch, sampler=whole_set(self.pools), collate_fn=self.pool_batch)

    def pool_batch(self, pools: list[Pool]) -> dict[str, Any]:
        queries = [pool.question.question for pool in pools for _ in pool.candidates]
        passages = [p.contents for pool in pools for p in pool.candidates]
        batch: dict[str, Any] = dict(self.tokenize(queries, passages)) if queries else {}  # BM25 may find nothing
        batch["pools"] = pools
        return batch

    def transfer_batch_to_device(
        self, batch: dict[str, Any], device: torch.device, dataloader_idx: int
    ) -> dict[str, Any]:
        return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
