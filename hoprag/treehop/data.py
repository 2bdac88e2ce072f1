"""Training data for TreeHop: trees over frozen embeddings, cached on disk, served in batches of trees.

The questions and the pooled paragraphs of the training file are encoded once by the frozen embedder and
kept in `<cache>/treehop/<embedder>-<fingerprint>.npz`, keyed by the embedder's description and the texts,
so later runs skip the encoder (`prepare_data` encodes once, before DDP's other processes start; every rank's
`setup` reads the files); an `open_corpus` (e.g. every bundled passage) is cached on its own file and appended to
the index. A slice of the trees (`dev_fraction`, seeded) is held aside: validation runs real tree
retrieval for those questions over the open corpus and every training pool (without an open corpus: the main
training pool), so the epoch is never picked on the evaluation set. Each positive gets `n_negatives` of its
question's own paragraphs, resampled every batch, plus optionally `corpus_negatives` random paragraphs of the
index and `mined_negatives` drawn from the `mined_pool` nearest passages of the index to the node's query
(`mined_from: query`, what retrieval will face) or to its positive (`positive`: the paper's "sampled from the
embedding database"), never a passage of the tree nor one with a gold title. Mined before training from the
frozen stand-in `q − c`; with `mined_refresh: n` the module mines again every n epochs from the queries the
model being trained now makes (`remine`), so the negatives stay the passages that currently outrank the gold.
`branch_negatives: w` also hands each node the w wrong siblings of its parent (the parent query's mined
neighbours): the branches that compete with the gold one in the search's layer-wise top K.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
from torch import Tensor
from torch.utils.data import DataLoader

from hoprag.data.corpus import pool_corpus, read_corpus, unique_passages
from hoprag.data.dataset import QADataset
from hoprag.data.fetch import ensure_file
from hoprag.data.types import Passage
from hoprag.paths import cache_root
from hoprag.retrieval.embedders import Embedder
from hoprag.retrieval.fingerprint import corpus_fingerprint
from hoprag.training.distributed import device_batch, report, whole_set, write_atomically
from hoprag.treehop.trees import Tree, build_trees

log = logging.getLogger(__name__)

MINED_FROM = ("query", "positive")
ENCODE_CHUNK = 512  # passages per progress tick: ~12k passages encode for minutes on a CPU


@dataclass
class Embedded:
    """Unit question vectors (file order of the trees' questions) and pool passage vectors with ids/titles."""

    questions: np.ndarray
    passages: np.ndarray
    passage_ids: list[str]
    titles: list[str]


def cache_path(questions: list[str], passages: list[Passage], embedder: Embedder, cache_dir: Path) -> Path:
    """The cache file named by what determines the vectors: the embedder's description and the texts."""
    key = json.dumps({"embedder": embedder.describe(), "query_prefix": embedder.query_prefix}, sort_keys=True)
    digest = hashlib.sha256(key.encode())
    digest.update(corpus_fingerprint(passages).encode())
    digest.update("\n".join(questions).encode())
    return cache_dir / f"{embedder.name.replace('/', '_')}-{digest.hexdigest()[:16]}.npz"


def embed_cached(questions: list[str], passages: list[Passage], embedder: Embedder, cache_dir: Path) -> Embedded:
    """Encode questions and passages, or load them from their cache file (`cache_path`); a file encoded here is
    written whole under a name of its own first, so a reader never meets half of one."""
    path = cache_path(questions, passages, embedder, cache_dir)
    if path.is_file():
        with np.load(path) as saved:
            log.info("loaded cached embeddings from %s", path)
            q, p = saved["questions"], saved["passages"]
    else:
        started = time.perf_counter()
        q = embedder.encode_queries(questions)
        chunks = [vectors for _, vectors in embedder.passage_chunks(passages, ENCODE_CHUNK)]
        p = np.concatenate(chunks) if chunks else embedder.encode_passages([])
        print(f"treehop data: encoded {len(questions)} questions and {len(passages)} passages with {embedder.name} "
              f"in {time.perf_counter() - started:.1f} s")  # fmt: skip
        write_atomically(path, lambda f: np.savez(f, questions=q, passages=p))
    return Embedded(q.astype(np.float32), p.astype(np.float32), [x.id for x in passages], [x.title for x in passages])


@dataclass
class TreeBatch:
    """A batch of trees flattened into positive nodes in depth order.

    `parent[i]` is the node whose TreeHop output is node i's query (-1: the question `root[tree[i]]`);
    `negatives[i]` holds passage rows, padded with -1 where a question has fewer candidates.
    """

    root: Tensor  # [T] question rows
    tree: Tensor  # [n] tree of each node
    parent: Tensor  # [n]
    depth: Tensor  # [n]
    positive: Tensor  # [n] passage rows
    negatives: Tensor  # [n, m]
    gold: list[set[int]]  # per tree: rows of all its positives (never used as negatives)
    branches: Tensor | None = None  # [n, w] wrong siblings of each node's parent (-1 padded; `branch_negatives`)
    excluded: list[set[int]] | None = None  # per tree with branches: its passages and every row of a gold title


class TreeCollator:
    """Samples negatives when a batch is made, so every epoch sees new ones (seeded, reproducible)."""

    def __init__(self, data: TreeHopDataModule, seed: int) -> None:
        self.data = data
        self.rng = np.random.default_rng(seed)

    def __call__(self, trees: list[Tree]) -> TreeBatch:
        d = self.data
        row = d.row_of
        roots, tree_of, parents, depths, positives, negatives, golds, branches = [], [], [], [], [], [], [], []
        offset = 0
        for t, tree in enumerate(trees):
            gold = {row[n.passage_id] for n in tree.nodes}
            golds.append(gold)
            roots.append(d.question_row[tree.qid])
            for j, node in enumerate(tree.nodes):
                tree_of.append(t)
                parents.append(-1 if node.parent < 0 else node.parent + offset)
                depths.append(node.depth)
                positives.append(row[node.passage_id])
                mined = d.mined[tree.qid][j] if d.mined_negatives else ()
                negatives.append(self._negatives(node.negatives, mined, gold))
                if d.branch_negatives and node.parent >= 0:  # the parent query's nearest non-gold passages
                    branches.append([int(r) for r in d.mined[tree.qid][node.parent][: d.branch_negatives]])
                else:
                    branches.append([])
            offset += len(tree.nodes)
        return TreeBatch(
            torch.as_tensor(roots), torch.as_tensor(tree_of), torch.as_tensor(parents), torch.as_tensor(depths),
            torch.as_tensor(positives), _padded(negatives), golds,
            _padded(branches) if d.branch_negatives else None,
            [d.excluded[t.qid] for t in trees] if d.branch_negatives else None,
        )  # fmt: skip

    def _negatives(self, pool_ids: tuple[str, ...], mined: Sequence[int], gold: set[int]) -> list[int]:
        d, rng = self.data, self.rng
        pool = [d.row_of[i] for i in pool_ids]
        chosen = list(rng.choice(pool, size=min(d.n_negatives, len(pool)), replace=False)) if pool else []
        if d.corpus_negatives:
            extra = rng.choice(len(d.embedded.passage_ids), size=d.corpus_negatives + len(gold), replace=False)
            chosen += [int(r) for r in extra if r not in gold][: d.corpus_negatives]
        if d.mined_negatives:
            near = [int(r) for r in mined if r >= 0 and r not in chosen]
            chosen += list(rng.choice(near, size=min(d.mined_negatives, len(near)), replace=False))
        return [int(r) for r in chosen]


def _padded(rows: list[list[int]]) -> Tensor:
    """Ragged rows of passage rows as one tensor, -1 where a row is shorter."""
    padded = torch.full((len(rows), max(1, max(map(len, rows)))), -1, dtype=torch.long)
    for i, r in enumerate(rows):
        padded[i, : len(r)] = torch.as_tensor(r, dtype=torch.long)
    return padded


class TreeHopDataModule(L.LightningDataModule):
    """Trees from `train` (a QADataset, e.g. the 2Wiki train file), split into train and a held-aside dev slice.

    `extra` datasets (e.g. MuSiQue train, whose decompositions give trees too) only add training trees: the
    dev slice stays that of `train`, so validation figures stay comparable. `open_corpus` (QADatasets or
    corpus files, in a list or by name, as `QADataset.extra_corpus` takes them) joins the validation index.
    """

    def __init__(
        self,
        train: QADataset,
        embedder: Embedder,
        extra: Sequence[QADataset] = (),
        cache_dir: str | None = None,
        batch_size: int = 64,
        n_negatives: int = 5,
        corpus_negatives: int = 0,
        mined_negatives: int = 0,
        mined_from: str = "query",
        mined_pool: int = 20,
        mined_refresh: int = 0,
        branch_negatives: int = 0,
        open_corpus: Mapping[str, QADataset | str] | Sequence[QADataset | str] = (),
        dev_fraction: float = 0.1,
        val_batch_size: int = 256,
        seed: int = 0,
    ) -> None:
        super().__init__()
        if mined_from not in MINED_FROM:
            raise ValueError(f"mined_from={mined_from!r}: choose one of {MINED_FROM}")
        self.dataset = train
        self.extra = list(extra)
        self.embedder = embedder
        self.cache_dir = Path(cache_dir) if cache_dir is not None else cache_root() / "treehop"
        self.batch_size = batch_size
        self.n_negatives = n_negatives
        self.corpus_negatives = corpus_negatives
        self.mined_negatives = mined_negatives
        self.mined_from = mined_from
        self.mined_pool = mined_pool
        self.mined_refresh = mined_refresh
        if branch_negatives and (not mined_negatives or mined_from != "query"):
            raise ValueError("branch_negatives are the parent query's mined neighbours: set mined_negatives > 0 and "
                             "mined_from=query")  # fmt: skip
        self.branch_negatives = branch_negatives
        sources = open_corpus.values() if isinstance(open_corpus, Mapping) else open_corpus
        self.open_corpus = [source for source in sources if source is not None]  # null: a member left out
        self.dev_fraction = dev_fraction
        self.val_batch_size = val_batch_size
        self.seed = seed
        self.embedded: Embedded | None = None

    @property
    def dim(self) -> int:
        return self.embedded.passages.shape[1]

    def prepare_data(self) -> None:
        """Encode what the cache lacks, once: train.py calls this before DDP starts its other processes (Lightning
        again on each node's rank 0, the others waiting), so every rank's `setup` only reads the files."""
        per_source, _, pool = self._trees_and_pools()
        questions = [t.question for trees, _ in per_source for t in trees]
        for texts, passages in self._encodings(questions, pool):
            if not cache_path(texts, passages, self.embedder, self.cache_dir).is_file():
                embed_cached(texts, passages, self.embedder, self.cache_dir)

    def setup(self, stage: str | None = None) -> None:
        if self.embedded is not None:
            return
        per_source, main_pool, pool = self._trees_and_pools()
        self.tree_counts = {}  # per source, for the training run to write out
        for dataset, (trees, skipped) in zip((self.dataset, *self.extra), per_source):
            self.tree_counts[dataset.name] = {"trees": len(trees), "questions": len(dataset), "skipped": dict(skipped)}
            report(f"treehop data: {len(trees)} trees from {len(dataset)} questions of {dataset.name}, "
                   f"skipped {dict(skipped)}")
        trees = per_source[0][0]
        if len(trees) < 2:
            raise ValueError(f"{self.dataset!r} gives {len(trees)} trainable trees; TreeHop needs at least 2")
        everything = [t for source, _ in per_source for t in source]
        questions = [t.question for t in everything]
        encoded = [embed_cached(*part, self.embedder, self.cache_dir) for part in self._encodings(questions, pool)]
        self.embedded = self._with_open_corpus(pool, *encoded) if self.open_corpus else encoded[0]
        # the dev slice retrieves from the whole index when there is an open corpus, else from its own pool only
        self.n_val_passages = len(self.embedded.passage_ids) if self.open_corpus else len(main_pool)
        self.row_of = {pid: i for i, pid in enumerate(self.embedded.passage_ids)}
        self.question_row = {t.qid: i for i, t in enumerate(everything)}
        order = np.random.default_rng(self.seed).permutation(len(trees))
        n_dev = max(1, round(self.dev_fraction * len(trees))) if self.dev_fraction > 0 else 0
        self.dev_trees = [trees[i] for i in sorted(order[:n_dev])]
        extra = [t for source, _ in per_source[1:] for t in source]
        self.train_trees = [trees[i] for i in sorted(order[n_dev:])] + extra
        if self.mined_negatives:
            self.mined = self._mine(self.train_trees)

    def _trees_and_pools(self) -> tuple[list[tuple[list[Tree], Counter]], list[Passage], list[Passage]]:
        """Per source (`train`, then `extra`) its trees and what was skipped; the pooled paragraphs of `train`;
        those of every source, each passage once."""
        per_source = [build_trees(dataset.examples) for dataset in (self.dataset, *self.extra)]
        main_pool = pool_corpus(self.dataset.examples)
        extra_pool = pool_corpus(ex for d in self.extra for ex in d.examples)
        return per_source, main_pool, unique_passages([*main_pool, *extra_pool])

    def _encodings(self, questions: list[str], pool: list[Passage]) -> list[tuple[list[str], list[Passage]]]:
        """What is encoded and cached apart: the questions with the training pool; with an open corpus, that
        corpus first on its own (a change of training data does not encode its ~13k passages again), then the
        questions with the pool's passages it lacks (none is encoded twice)."""
        if not self.open_corpus:
            return [(questions, pool)]
        passages = []
        for source in self.open_corpus:
            is_file = isinstance(source, str | os.PathLike)
            passages += read_corpus(ensure_file(source, self.dataset.root)) if is_file else source.corpus()
        opened = unique_passages(passages)
        in_open = {p.id for p in opened}
        return [([], opened), (questions, [p for p in pool if p.id not in in_open])]

    def _with_open_corpus(self, pool: list[Passage], opened: Embedded, own: Embedded) -> Embedded:
        """The training pool's rows (in order, each vector from whichever encoding holds it), then the open
        corpus's passages the pool lacks (by id)."""
        open_row = {pid: i for i, pid in enumerate(opened.passage_ids)}
        own_row = {pid: i for i, pid in enumerate(own.passage_ids)}
        vectors = [own.passages[own_row[p.id]] if p.id in own_row else opened.passages[open_row[p.id]] for p in pool]
        in_pool = {p.id for p in pool}
        rest = [i for i, pid in enumerate(opened.passage_ids) if pid not in in_pool]
        report(f"treehop data: open corpus of {len(opened.passage_ids)} passages, {len(rest)} not in the training "
               "pools")
        ids = [p.id for p in pool] + [opened.passage_ids[i] for i in rest]
        titles = [p.title for p in pool] + [opened.titles[i] for i in rest]
        return Embedded(own.questions, np.concatenate([np.stack(vectors), opened.passages[rest]]), ids, titles)

    def remine(self, node_queries: Mapping[str, np.ndarray]) -> None:
        """Mine the training trees' negatives again from each node's current query (per tree id, [nodes, d]:
        what the model being trained would search with), replacing the ones the next batches draw from."""
        self.mined = self._mine(self.train_trees, node_queries)

    def _mine(self, trees: list[Tree], node_queries: Mapping[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """Per tree, each node's `mined_pool` nearest passages of the whole index ([nodes, mined_pool] rows, -1
        padded), never a passage of the tree nor one with a gold title (the same page from another dataset).

        The node's query is `node_queries[tree id]` when given, else the question at hop 1 and its parent's query
        minus the parent's positive below: `q − c`, the frozen stand-in for the TreeHop output it is trained from
        (`mined_from: positive`: its positive)."""
        e, row = self.embedded, self.row_of
        self.excluded: dict[str, set[int]] = {}  # per tree: its passages and every row with one of its gold titles
        rows_of_title: dict[str, list[int]] = {}
        for i, title in enumerate(e.titles):
            rows_of_title.setdefault(title, []).append(i)
        queries, excluded = [], []
        for tree in trees:
            gold = {row[n.passage_id] for n in tree.nodes}
            titles = {*tree.gold_titles, *(e.titles[r] for r in gold)}
            excluded.append(gold | {r for title in titles for r in rows_of_title.get(title, ())})
            self.excluded[tree.qid] = excluded[-1]
            if node_queries is not None:
                queries.append(np.asarray(node_queries[tree.qid], dtype=np.float32))
                continue
            stand_in = []
            for node in tree.nodes:
                if self.mined_from == "positive":
                    stand_in.append(e.passages[row[node.passage_id]])
                elif node.parent < 0:
                    stand_in.append(e.questions[self.question_row[tree.qid]])
                else:
                    parent = tree.nodes[node.parent]
                    stand_in.append(stand_in[node.parent] - e.passages[row[parent.passage_id]])
            queries.append(np.stack(stand_in))
        k = min(len(e.passage_ids), self.mined_pool + max(map(len, excluded)))  # enough left after exclusion
        q, p = torch.from_numpy(np.concatenate(queries)), torch.from_numpy(e.passages)
        top = torch.cat([(q[i : i + 1024] @ p.T).topk(k, dim=1).indices for i in range(0, len(q), 1024)]).numpy()
        mined, start = {}, 0
        for tree, skip in zip(trees, excluded):
            block = np.full((len(tree.nodes), self.mined_pool), -1, dtype=np.int64)
            for j, near in enumerate(top[start : start + len(tree.nodes)]):
                kept = [int(r) for r in near if r not in skip][: self.mined_pool]
                block[j, : len(kept)] = kept
            mined[tree.qid] = block
            start += len(tree.nodes)
        return mined

    def train_dataloader(self) -> DataLoader:
        """`batch_size` trees a step over all devices; Lightning shards the shuffled trees under DDP, and each rank
        draws its negatives from a generator of its own."""
        rank = self.trainer.global_rank if self.trainer is not None else 0
        return DataLoader(
            self.train_trees, batch_size=device_batch(self.batch_size, self.trainer, "trees"), shuffle=True,
            collate_fn=TreeCollator(self, self.seed + rank), generator=torch.Generator().manual_seed(self.seed),
        )  # fmt: skip

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.dev_trees, batch_size=self.val_batch_size, sampler=whole_set(self.dev_trees),
                          collate_fn=list)  # fmt: skip

    def transfer_batch_to_device(self, batch, device, dataloader_idx):  # noqa: ANN001, ANN201
        if isinstance(batch, TreeBatch):
            for name in ("root", "tree", "parent", "depth", "positive", "negatives", "branches"):
                if getattr(batch, name) is not None:
                    setattr(batch, name, getattr(batch, name).to(device))
        return batch
