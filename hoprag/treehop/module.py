"""Training TreeHop with Lightning: paired InfoNCE over retrieval trees, validated by real tree retrieval.

A batch of trees is unrolled depth by depth in one forward pass, so the hop-2 loss back-propagates through
the hop-1 TreeHop call (spec/treehop.md §5.3); hop-1 tuples (query = the question) carry no gradient but
stay in the mean, as in the paper. `correction_penalty` λ adds λ · mean((‖α·gate‖ / ‖q − c‖)²) over the
TreeHop calls to the loss (squared: smooth at a zero correction, so it never pins α at its zero start, and
growing fast where the correction swamps `q − c`); the plain mean ratio is logged as `train/correction_ratio`.

Validation retrieves the held-aside questions over the datamodule's validation index (its open corpus when
it has one) and logs micro gold-title recall after hops 1–3 (`val/recall@5_hop2` picks the checkpoint)
next to the training-free `q − c` update on the same index, their difference (`val/gain_hop{h}`), the mean
K per hop of both, direct top-2K (`val/direct_recall@10`: it reads as many passages as two hops), and the two
collapse signs: the correction's norm relative to `q − c` (`gate_ratio`) and
the mean pairwise cosine of one question's next-hop queries (`branch_cos`, → 1 when every branch asks the
same thing). The same validation of the untrained model is logged at step 0, before training.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.parallel import DistributedDataParallel

from hoprag.training.distributed import report
from hoprag.training.summary import parameter_line
from hoprag.treehop.checkpoint import EXPORT_FILE
from hoprag.treehop.data import TreeBatch, TreeCollator, TreeHopDataModule
from hoprag.treehop.model import TreeHop
from hoprag.treehop.search import tree_search, unit
from hoprag.treehop.trees import Tree


def info_nce(
    queries: Tensor, positives: Tensor, negatives: Tensor, neg_mask: Tensor | None = None,
    temperature: float = 0.15, in_batch: Tensor | None = None, rivals: Tensor | None = None,
) -> Tensor:  # fmt: skip
    """Mean over tuples of CE([cos(h, p), cos(h, n_1..n_m)] / τ, target 0) (spec §6.1).

    `negatives` [n, m, d] with `neg_mask` [n, m] (False = padding). `in_batch` [n, n] (True = usable) adds the
    other tuples' positives as further negatives (the SimCSE form, §6.2). `rivals` [n, r] are further cosines
    competing with the positive's (-inf = none): other branches' best hits, see `TreeHopModule.branch_rivals`.
    """
    h, p, neg = F.normalize(queries, dim=-1), F.normalize(positives, dim=-1), F.normalize(negatives, dim=-1)
    pos_logit = (h * p).sum(-1, keepdim=True)
    neg_logit = torch.einsum("nd,nmd->nm", h, neg)
    if neg_mask is not None:
        neg_logit = neg_logit.masked_fill(~neg_mask, float("-inf"))
    logits = [pos_logit, neg_logit]
    if in_batch is not None:
        logits.append((h @ p.T).masked_fill(~in_batch, float("-inf")))
    if rivals is not None:
        logits.append(rivals)
    logits = torch.cat(logits, dim=1) / temperature
    return F.cross_entropy(logits, torch.zeros(len(h), dtype=torch.long, device=h.device))


class TreeHopModule(L.LightningModule):
    """`model` builds the network for the embedder's width (`model(dim=...)`, a Hydra `_partial_`), when
    the data is known. `top_k`/`val_hops` set the validation retrieval (TreeHop@top_k, hops 1..val_hops)."""

    def __init__(
        self,
        model: Callable[..., TreeHop],
        lr: float = 6e-5,
        weight_decay: float = 2e-8,
        temperature: float = 0.15,
        output_dropout: float = 0.1,
        in_batch_negatives: bool = False,
        correction_penalty: float = 0.0,
        branch_hits: int = 1,
        scale_lr: float | None = None,
        top_k: int = 5,
        val_hops: int = 3,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["model"])
        self.build_model = model
        self.model: TreeHop | None = None
        self.embedder_info: dict[str, Any] = {}
        self.dropout = torch.nn.Dropout(output_dropout)
        self._val: list[np.ndarray] = []
        self.untrained_metrics: dict[str, float] | None = None  # the validation before the first step

    # -- set-up ------------------------------------------------------------------------------------------

    @property
    def data(self) -> TreeHopDataModule:
        return self.trainer.datamodule

    def configure_model(self) -> None:
        if self.model is not None:
            return
        self.model = self.build_model(dim=self.data.dim)
        self.embedder_info = self.data.embedder.describe_encoding()
        report(parameter_line("TreeHop", self.model, {"alpha": "α", "beta": "β"}, f"; {self.model.formula()}"))
        emb = self.data.embedded
        self.register_buffer("questions", torch.from_numpy(emb.questions), persistent=False)
        self.register_buffer("passages", torch.from_numpy(emb.passages), persistent=False)
        # the same frozen vectors on every rank (the cache): DDP would broadcast them from rank 0 every step
        DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(self, ["questions", "passages"])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        """AdamW; the learnt scalars α and β get `scale_lr` (null: `lr`): Adam moves a parameter by about lr a step,
        so at lr 3e-4 a scale could travel only ~0.05 in a short CPU run."""
        scales = [p for name, p in self.model.named_parameters() if name in ("alpha", "beta")]
        rest = [p for name, p in self.model.named_parameters() if name not in ("alpha", "beta")]
        groups = [{"params": rest}, {"params": scales, "lr": self.hparams.scale_lr or self.hparams.lr, "weight_decay": 0.0}]
        return torch.optim.AdamW([g for g in groups if g["params"]], lr=self.hparams.lr,
                                 weight_decay=self.hparams.weight_decay)  # fmt: skip

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["treehop"] = {"config": self.model.config, "embedder": self.embedder_info}

    # -- training ----------------------------------------------------------------------------------------

    def tree_queries(self, batch: TreeBatch) -> tuple[Tensor, Tensor]:
        """Each node's query: the question at depth 1, else its parent's TreeHop output, built depth by depth
        (only nodes with children need an output); and ‖correction‖ / ‖q − c‖ of every TreeHop call."""
        roots = self.questions[batch.root][batch.tree]
        outputs = torch.zeros_like(roots)
        ratios = [roots.new_zeros(0)]
        has_children = torch.zeros(len(roots), dtype=torch.bool, device=roots.device)
        has_children[batch.parent[batch.parent >= 0]] = True
        for depth in range(1, int(batch.depth.max()) + 1):
            idx = torch.nonzero((batch.depth == depth) & has_children).squeeze(1)
            if len(idx):
                parent = batch.parent[idx]
                q = torch.where((parent < 0)[:, None], roots[idx], outputs[parent.clamp(min=0)])
                c = self.passages[batch.positive[idx]]
                out, correction = self.model.update(q, c)
                ratios.append(correction.norm(dim=-1) / (q - c).norm(dim=-1).clamp(min=1e-12))
                outputs = outputs.index_copy(0, idx, out)
        queries = torch.where((batch.parent < 0)[:, None], roots, outputs[batch.parent.clamp(min=0)])
        return queries, torch.cat(ratios)

    def training_step(self, batch: TreeBatch, batch_idx: int) -> Tensor:
        queries, ratios = self.tree_queries(batch)
        mask = batch.negatives >= 0
        negatives = self.passages[batch.negatives.clamp(min=0)]
        in_batch = None
        if self.hparams.in_batch_negatives:
            pos = batch.positive
            in_batch = (pos[:, None] != pos[None, :]) & (batch.tree[:, None] != batch.tree[None, :])
        rivals = self.branch_rivals(batch, queries) if batch.branches is not None else None
        loss = info_nce(
            self.dropout(queries), self.passages[batch.positive], negatives, mask, self.hparams.temperature, in_batch,
            rivals,
        )  # fmt: skip
        if self.hparams.correction_penalty and len(ratios):
            loss = loss + self.hparams.correction_penalty * ratios.square().mean()
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch.root))
        if len(ratios):
            self.log("train/correction_ratio", ratios.detach().mean(), batch_size=len(batch.root))
        return loss

    def on_train_epoch_start(self) -> None:
        """Every `mined_refresh` epochs after the first, mine the negatives again from the queries the model
        makes now (each node's parent output), so they track what outranks the gold as the model moves."""
        data, epoch = self.data, self.current_epoch
        if not (data.mined_negatives and data.mined_refresh) or epoch == 0 or epoch % data.mined_refresh:
            return
        training = self.model.training
        self.model.eval()
        queries = {}
        with torch.no_grad():
            collate = TreeCollator(data, seed=epoch)  # its negatives are not used; the queries do not depend on them
            for i in range(0, len(data.train_trees), data.val_batch_size):
                trees = data.train_trees[i : i + data.val_batch_size]
                batch = data.transfer_batch_to_device(collate(trees), self.device, 0)
                flat = self.tree_queries(batch)[0].float().cpu().numpy()
                for t, tree in enumerate(trees):
                    queries[tree.qid] = flat[batch.tree.cpu().numpy() == t]
        self.model.train(training)
        data.remine(queries)

    def branch_rivals(self, batch: TreeBatch, queries: Tensor) -> Tensor:
        """[n, w · branch_hits] cosines of the best hits of each node's rival branches: its parent's query
        updated with a wrong sibling of the parent (`batch.branches`), searched over the whole index without
        the tree's passages or gold titles' rows (`data.mined` already excludes those from the siblings). In the
        search these compete with the gold branch's hit for the layer's top K, so the loss asks the model to
        score its gold continuation above what wrong branches find (gradient through their queries too)."""
        n, w = batch.branches.shape
        k = self.hparams.branch_hits
        used = batch.branches >= 0
        out = queries.new_full((n, w * k), float("-inf"))
        if not used.any():
            return out
        node, slot = torch.nonzero(used, as_tuple=True)
        parent_query = queries[batch.parent[node]]  # the query that retrieved the parent and its siblings
        rival, _ = self.model.update(parent_query, self.passages[batch.branches[node, slot]])
        scores = F.normalize(rival, dim=-1) @ self.passages.T
        gold = torch.zeros_like(scores, dtype=torch.bool)
        for i, t in enumerate(batch.tree[node].tolist()):
            gold[i, list(batch.excluded[t])] = True
        gold[torch.arange(len(node)), batch.branches[node, slot]] = True  # a branch does not find its own chunk
        top = scores.masked_fill(gold, float("-inf")).topk(k, dim=1).values
        return out.index_put((node[:, None], slot[:, None] * k + torch.arange(k, device=out.device)), top)

    # -- validation --------------------------------------------------------------------------------------

    @torch.no_grad()
    def step_fn(self, q: np.ndarray, c: np.ndarray) -> np.ndarray:
        """The model as tree search's step (eval mode: no dropout)."""
        out = self.model(torch.from_numpy(q).to(self.device), torch.from_numpy(c).to(self.device))
        return out.float().cpu().numpy()

    def _search(self, queries: np.ndarray, owners: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        pool = self.passages[: self.data.n_val_passages]
        scores, rows = (torch.from_numpy(queries).to(self.device) @ pool.T).topk(k, dim=1)
        return scores.float().cpu().numpy(), rows.cpu().numpy()

    def on_train_start(self) -> None:
        """Validate the untrained model and log it at step 0 (Lightning's sanity check logs nothing), so the
        metrics start with the row training must beat; not on a resume. Each rank takes its share of trees."""
        if self.hparams.in_batch_negatives and self.trainer.world_size > 1:  # the loss differs from one device's
            report(f"TreeHop: in-batch negatives come from each device's share of the batch "
                   f"({self.trainer.world_size} devices), not the whole global batch as on one device")  # fmt: skip
        if self.trainer.global_step > 0 or not self.data.dev_trees:
            return
        trees = self.data.dev_trees[self.global_rank :: self.trainer.world_size]
        size = self.data.val_batch_size
        training = self.model.training
        self.model.eval()
        rows = [self._val_row(trees[i : i + size]) for i in range(0, len(trees), size)]
        self.model.train(training)
        metrics = self._val_metrics(rows)
        self.untrained_metrics = metrics  # train.py's summary sets them beside the exported epoch's
        for logger in self.loggers:
            logger.log_metrics(metrics, step=0)
        at = f"@{self.hparams.top_k}_hop{min(2, self.hparams.val_hops)}"
        treehop, qc = metrics[f"val/recall{at}"], metrics[f"val/qc_recall{at}"]
        report(f"TreeHop untrained: val/recall{at} {treehop:.2f}, q − c {qc:.2f}")

    def validation_step(self, trees: list[Tree], batch_idx: int) -> None:
        self._val.append(self._val_row(trees))

    @torch.no_grad()
    def _val_row(self, trees: list[Tree]) -> np.ndarray:
        """Summed hits and K per hop for TreeHop then `q − c`, the number of gold titles, `_collapse`, and the
        hits of direct top-2K (the reference a two-hop search must match: it reads as many passages)."""
        hp, data = self.hparams, self.data
        q = self.questions[[data.question_row[t.qid] for t in trees]].cpu().numpy()
        passages = self.passages.cpu().numpy()
        titles = data.embedded.titles
        row = []
        for name, step in (("treehop", self.step_fn), ("qc", lambda a, b: a - b)):
            results = tree_search(q, passages, self._search, step, hp.top_k, hp.val_hops)
            for hop in range(1, hp.val_hops + 1):
                hits = [len(set(t.gold_titles) & {titles[r] for r in res.rows(hop)}) for t, res in zip(trees, results)]
                row += [sum(hits), sum(len(r.rows(hop)) for r in results)]
        row.append(sum(len(set(t.gold_titles)) for t in trees))
        row += self._collapse(q, passages, len(trees))
        _, direct = self._search(unit(q), np.arange(len(trees)), 2 * hp.top_k)  # reads as many as two hops
        row.append(sum(len(set(t.gold_titles) & {titles[r] for r in rows}) for t, rows in zip(trees, direct)))
        return np.asarray(row, dtype=np.float64)

    def _collapse(self, q: np.ndarray, passages: np.ndarray, n: int) -> list[float]:
        """[sum of correction/(q − c) norm ratios, sum of per-question mean branch cosines, n] over hop-1 branches."""
        scores, rows = self._search(unit(q), np.arange(n), self.hparams.top_k)
        k = rows.shape[1]
        qt = torch.from_numpy(np.repeat(q, k, axis=0)).to(self.device)
        ct = self.passages[torch.from_numpy(rows.reshape(-1)).to(self.device)]
        nxt, correction = self.model.update(qt, ct)
        ratio = (correction.norm(dim=-1) / (qt - ct).norm(dim=-1).clamp(min=1e-12)).sum()
        nxt = F.normalize(nxt, dim=-1).view(n, k, -1)
        cos = nxt @ nxt.transpose(1, 2)
        off = (cos.sum((1, 2)) - cos.diagonal(dim1=1, dim2=2).sum(1)) / max(1, k * (k - 1))
        return [float(ratio), float(off.sum()), float(n * k), float(n)]

    def on_validation_epoch_end(self) -> None:
        if not self._val:
            return
        metrics = self._val_metrics(self._val)
        self._val.clear()
        monitored = f"val/recall@{self.hparams.top_k}_hop2"
        self.log(monitored, metrics.pop(monitored), prog_bar=True)
        self.log_dict(metrics)

    def _val_metrics(self, rows: list[np.ndarray]) -> dict[str, float]:
        """The validation figures from every rank's `_val_row`s (summed across ranks; a rank may have none)."""
        hops, k = self.hparams.val_hops, self.hparams.top_k
        total = np.sum(rows, axis=0) if rows else np.zeros(4 * hops + 6)
        total = self.trainer.strategy.reduce(torch.as_tensor(total, device=self.device), reduce_op="sum")
        gold = float(total[4 * hops])
        metrics = {}
        for i, name in enumerate(("", "qc_")):
            for hop in range(1, hops + 1):
                hits, count = total[2 * (i * hops + hop - 1)], total[2 * (i * hops + hop - 1) + 1]
                metrics[f"val/{name}recall@{k}_hop{hop}"] = 100 * float(hits) / gold
                metrics[f"val/{name}k_hop{hop}"] = float(count) / float(total[4 * hops + 4])
        ratio, cos, n_branches, n, direct = total[4 * hops + 1 :].tolist()
        metrics[f"val/direct_recall@{2 * k}"] = 100 * direct / gold
        for hop in range(2, hops + 1):
            metrics[f"val/gain_hop{hop}"] = metrics[f"val/recall@{k}_hop{hop}"] - metrics[f"val/qc_recall@{k}_hop{hop}"]
        metrics["val/gate_ratio"] = ratio / n_branches
        metrics["val/branch_cos"] = cos / n
        for name in ("alpha", "beta"):  # the learnt scales of the correction and of the subtracted chunk
            if isinstance(getattr(self.model, name), torch.Tensor):
                metrics[f"val/{name}"] = float(getattr(self.model, name).detach())
        return metrics

    # -- export ------------------------------------------------------------------------------------------

    def export(self, directory: str | Path) -> Path:
        """Write `treehop.pt` (architecture, weights, and what decides the embedder's vectors, which
        `load_treehop` holds against the run's embedder) and a readable `config.json`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        meta = {"config": self.model.config, "embedder": self.embedder_info}
        torch.save({**meta, "state_dict": self.model.state_dict()}, directory / EXPORT_FILE)
        (directory / "config.json").write_text(json.dumps(meta, indent=2))
        return directory / EXPORT_FILE
