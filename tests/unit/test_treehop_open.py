"""TreeHop against an open corpus (issue 17): validation over the whole index with the untrained row at step 0,
the zero-started correction and its penalty, and negatives mined from the index without gold titles."""

from __future__ import annotations

import csv
import functools
import json
import zlib

import lightning as L
import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from lightning.pytorch.loggers import CSVLogger

from hoprag.data import QADataset
from hoprag.treehop import TreeHop
from hoprag.treehop.data import TreeCollator, TreeHopDataModule
from hoprag.treehop.module import TreeHopModule, info_nce
from tests.unit.test_treehop_training import HashEmbedder, Records, module_on


class TextEmbedder(HashEmbedder):
    """A passage's vector is its text's (the title line dropped), so a passage whose text is a question's
    lies exactly on that question."""

    def _encode(self, texts, batch_size):
        keys = [t.split("\n", 1)[-1] for t in texts]
        return np.stack([np.random.default_rng(zlib.crc32(k.encode())).normal(size=self.dim) for k in keys])


class Attached(TreeHopModule):
    """The module with its datamodule set directly, to validate without a Trainer."""

    data = None


def open_corpus_file(tmp_path, records: Records, qid: str):
    """A wiki-style corpus: a page with the same title as `qid`'s hop-2 gold but another text (the question's,
    so it is the question's nearest passage), a copy of a pool paragraph (deduplicated) and 5 others."""
    example = next(ex for ex in records.examples if ex.id == qid)
    studio = next(p for p in example.context if p.title.startswith("Studio"))
    lines = [{"id": "wiki-dup", "title": studio.title, "text": example.question},
             {"title": studio.title, "text": studio.text}, *({"id": f"wiki-{i}", "title": f"Page {i}",
             "text": f"Page {i} is about something else."} for i in range(5))]  # fmt: skip
    path = tmp_path / "wiki.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return str(path)


@pytest.fixture
def records():
    return Records(12)


def open_data(tmp_path, records, **kwargs) -> TreeHopDataModule:
    dm = TreeHopDataModule(records, TextEmbedder(), cache_dir=str(tmp_path), dev_fraction=0.25, **kwargs)
    dm.setup("fit")
    return dm


# -- validation over the open index ----------------------------------------------------------------------


def test_open_corpus_joins_the_validation_index_and_is_cached_on_its_own(tmp_path, records):
    plain = open_data(tmp_path, records)
    qid = plain.dev_trees[0].qid
    dm = open_data(tmp_path, records, open_corpus={"wiki": open_corpus_file(tmp_path, records, qid)})
    assert plain.n_val_passages == 120  # the main training pool only
    assert dm.embedded.passage_ids[:120] == plain.embedded.passage_ids  # the pool's rows stay where they were
    assert dm.embedded.passage_ids[120:] == ["wiki-dup", *(f"wiki-{i}" for i in range(5))]  # the copy is dropped
    assert dm.n_val_passages == 126 == len(dm.embedded.titles)
    # three files: the plain run's; the open corpus's (7 passages); the open run's own, without the pool
    # paragraph the open corpus holds too (119 of 120), which is taken from the open corpus's file
    sizes = sorted(len(np.load(f)["passages"]) for f in tmp_path.glob("hash-*.npz"))
    assert sizes == [7, 119, 120]
    assert np.array_equal(dm.embedded.passages[:120], plain.embedded.passages)


def test_validation_finds_a_gold_title_that_only_the_open_corpus_holds(tmp_path, records):
    plain = open_data(tmp_path, records)
    tree = plain.dev_trees[0]
    dm = open_data(tmp_path, records, open_corpus=[open_corpus_file(tmp_path, records, tree.qid)])
    hop1 = []
    for data in (plain, dm):
        module = module_on(data, Attached)
        module.data = data
        gold = [data.row_of[n.passage_id] for n in tree.nodes]
        module.passages[gold] = -module.questions[data.question_row[tree.qid]]  # its own gold paragraphs: never found
        row = module._val_row([tree])
        hop1.append((row[0], row[6]))  # hits after hop 1: TreeHop, then q − c (3 hops × [hits, K] each)
    assert hop1 == [(0, 0), (1, 1)]  # the open page titled like the hop-2 gold is found by both, first


def test_the_untrained_model_is_validated_and_logged_at_step_0(tmp_path, records):
    data = TreeHopDataModule(records, HashEmbedder(), cache_dir=str(tmp_path), batch_size=4, dev_fraction=0.25)
    build = functools.partial(TreeHop, gate_dim=8, correction_init=0.0, learn_scale=True)
    module = TreeHopModule(build, lr=1e-2, correction_penalty=0.1)
    trainer = L.Trainer(
        max_epochs=1, limit_train_batches=2, logger=CSVLogger(tmp_path, name="csv"), accelerator="cpu",
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0,
        log_every_n_steps=1,
    )  # fmt: skip
    trainer.fit(module, datamodule=data)
    with open(tmp_path / "csv" / "version_0" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    untrained, trained = (r for r in rows if r["val/recall@5_hop2"])
    assert [r["step"] for r in rows if r["train/correction_ratio"]] == ["0", "1"]
    assert untrained["step"] == "0" and not untrained["epoch"]
    assert untrained["val/recall@5_hop2"] == untrained["val/qc_recall@5_hop2"]  # α = 0: TreeHop is q − c
    assert float(untrained["val/gain_hop2"]) == float(untrained["val/gate_ratio"]) == 0.0
    assert 10 >= float(untrained["val/k_hop2"]) == float(untrained["val/qc_k_hop2"]) > 5
    assert float(untrained["val/direct_recall@10"]) >= float(untrained["val/recall@5_hop1"])  # the 2K reference
    assert trained["epoch"] == "0" and float(trained["val/gate_ratio"]) > 0  # training moved α off zero
    assert module.model.alpha.item() != 0.0


# -- the correction and its penalty ----------------------------------------------------------------------


def test_penalty_adds_lambda_times_the_mean_squared_ratio_and_the_ratio_is_logged(tmp_path, records):
    data = open_data(tmp_path, records)
    module = module_on(data, output_dropout=0.0, correction_penalty=0.5)
    logged = {}
    module.log = lambda name, value, **kwargs: logged.__setitem__(name, value)
    batch = TreeCollator(data, seed=0)(data.train_trees[:4])
    penalised = module.training_step(batch, 0)
    module.hparams.correction_penalty = 0.0
    plain = module.training_step(batch, 0)
    _, ratios = module.tree_queries(batch)
    assert len(ratios) == 4 and (ratios > 0).all()  # one TreeHop call per hop-1 node with a child
    assert (penalised - plain).item() == pytest.approx(0.5 * ratios.square().mean().item(), rel=1e-5)
    assert logged["train/correction_ratio"].item() == pytest.approx(ratios.mean().item(), rel=1e-6)


def test_training_moves_the_zero_started_scale_and_then_the_gate(tmp_path, records):
    data = open_data(tmp_path, records)
    module = module_on(data, output_dropout=0.0)
    torch.manual_seed(0)
    module.model = TreeHop(data.dim, correction_init=0.0, learn_scale=True)
    module.log = lambda *args, **kwargs: None
    optimizer = module.configure_optimizers()
    batch = TreeCollator(data, seed=0)(data.train_trees[:4])
    gate_grads = []
    for step in range(3):
        optimizer.zero_grad()
        module.training_step(batch, step).backward()
        assert module.model.alpha.grad.item() != 0  # <dL/dh, gate>
        gate_grads.append(module.model.out.weight.grad.abs().sum().item())
        optimizer.step()
    assert gate_grads[0] == 0 and gate_grads[1] > 0 and gate_grads[2] > 0  # α = 0 blocks the gate until it moves
    assert module.model.alpha.item() != 0.0


# -- mined negatives -------------------------------------------------------------------------------------


def test_mined_negatives_are_the_querys_nearest_without_gold_titles(tmp_path, records):
    plain = open_data(tmp_path, records)
    tree = plain.train_trees[0]
    dm = open_data(tmp_path, records, open_corpus=[open_corpus_file(tmp_path, records, tree.qid)],
                   mined_negatives=3, mined_pool=4)  # fmt: skip
    e, row = dm.embedded, dm.row_of
    tree = next(t for t in dm.train_trees if t.qid == tree.qid)
    question = e.questions[dm.question_row[tree.qid]]
    duplicate = row["wiki-dup"]
    assert np.argmax(e.passages @ question) == duplicate  # the question's nearest passage has a gold title ...
    gold = {row[n.passage_id] for n in tree.nodes} | {duplicate}
    hop2 = question - e.passages[row[tree.nodes[0].passage_id]]  # the hop-2 node's query: q − c of its parent
    for mined, query in zip(dm.mined[tree.qid], (question, hop2)):
        nearest = [int(r) for r in np.argsort(-(e.passages @ query), kind="stable") if r not in gold]
        assert mined.tolist() == nearest[:4]  # ... so it is skipped, as are the tree's own paragraphs
    batch = TreeCollator(dm, seed=0)(dm.train_trees)
    for i, t in enumerate(batch.tree.tolist()):
        negatives = batch.negatives[i].tolist()
        assert len(negatives) == len(set(negatives))  # a mined one never repeats a question negative
        assert not {e.titles[r] for r in negatives[5:] if r >= 0} & set(dm.train_trees[t].gold_titles)


def test_mined_from_positive_uses_the_positives_neighbours(tmp_path, records):
    dm = open_data(tmp_path, records, mined_negatives=2, mined_from="positive")
    e, tree = dm.embedded, dm.train_trees[0]
    positive = e.passages[dm.row_of[tree.nodes[1].passage_id]]
    gold = {dm.row_of[n.passage_id] for n in tree.nodes}
    nearest = [int(r) for r in np.argsort(-(e.passages @ positive), kind="stable") if r not in gold]
    assert dm.mined[tree.qid][1].tolist() == nearest[:20]
    with pytest.raises(ValueError, match="mined_from='answer'"):
        TreeHopDataModule(records, TextEmbedder(), mined_from="answer")


def test_refresh_mines_again_from_the_models_current_queries(tmp_path, records, monkeypatch):
    dm = open_data(tmp_path, records, mined_negatives=2, mined_pool=3, mined_refresh=2)
    module = module_on(dm, Attached, output_dropout=0.0)
    module.model, module.data = TreeHop(dm.dim, correction_init=0.0, learn_subtraction=True), dm  # h = q − β·c
    with torch.no_grad():
        module.model.beta.fill_(0.3)  # the model moved away from q − c, so its hop-2 queries differ
    stand_in = {qid: m.copy() for qid, m in dm.mined.items()}
    for epoch, refreshed in ((1, False), (2, True)):
        monkeypatch.setattr(Attached, "current_epoch", epoch)  # Lightning's property, without a Trainer
        module.on_train_epoch_start()
        changed = any(not np.array_equal(dm.mined[q], stand_in[q]) for q in stand_in)
        assert changed == refreshed  # only on the refresh epoch
    e, row = dm.embedded, dm.row_of
    for tree in dm.train_trees:
        question = e.questions[dm.question_row[tree.qid]]
        own = {row[n.passage_id] for n in tree.nodes}
        titles = {*tree.gold_titles, *(e.titles[r] for r in own)}
        gold = own | {r for r, title in enumerate(e.titles) if title in titles}
        for node, mined in zip(tree.nodes, dm.mined[tree.qid]):
            parent = tree.nodes[node.parent] if node.parent >= 0 else None
            query = question if parent is None else question - 0.3 * e.passages[row[parent.passage_id]]
            nearest = [int(r) for r in np.argsort(-(e.passages @ query), kind="stable") if r not in gold]
            assert mined.tolist() == nearest[:3]


def test_rival_branches_compete_with_the_gold_continuation(tmp_path, records):
    dm = open_data(tmp_path, records, mined_negatives=2, mined_pool=3, branch_negatives=2)
    module = module_on(dm, Attached, output_dropout=0.0)
    module.model, module.data = TreeHop(dm.dim, correction_init=0.0, learn_subtraction=True), dm
    batch = TreeCollator(dm, seed=0)(dm.train_trees[:3])
    queries, _ = module.tree_queries(batch)
    rivals = module.branch_rivals(batch, queries)
    e = dm.embedded
    for i in range(len(batch.tree)):
        if batch.parent[i] < 0:  # a hop-1 node has no rival branch: the question is its only query
            assert torch.isinf(rivals[i]).all()
            continue
        t = int(batch.tree[i])
        tree, first = dm.train_trees[t], int(torch.nonzero(batch.tree == t)[0])
        parent = int(batch.parent[i]) - first
        assert tree.nodes[parent].parent < 0  # Records' trees have two hops: the parent's query is the question
        siblings = batch.branches[i].tolist()
        assert siblings == dm.mined[tree.qid][parent][:2].tolist()  # the question's nearest wrong passages
        excluded = dm.excluded[tree.qid]
        for slot, sibling in enumerate(siblings):
            query = e.questions[dm.question_row[tree.qid]] - e.passages[sibling]  # β = 1: q − c of the rival
            cos = e.passages @ (query / np.linalg.norm(query))
            allowed = [r for r in range(len(cos)) if r not in excluded and r != sibling]
            assert float(rivals[i, slot].detach()) == pytest.approx(cos[allowed].max(), abs=1e-5)
    mask = batch.negatives >= 0
    loss = info_nce(queries, module.passages[batch.positive], module.passages[batch.negatives.clamp(min=0)], mask,
                    rivals=rivals)  # fmt: skip
    loss.backward()
    assert module.model.beta.grad is not None and module.model.beta.grad != 0  # the rivals' queries carry gradient
    with pytest.raises(ValueError, match="branch_negatives"):
        TreeHopDataModule(records, TextEmbedder(), branch_negatives=2)


# -- configs ---------------------------------------------------------------------------------------------


def test_treehop_config_validates_over_every_bundled_passage_and_small_data_starts_at_q_minus_c(compose_cfg):
    cfg = compose_cfg("train", ["+model=treehop_small_data"])
    data = instantiate(cfg.model.datamodule)
    assert len(data.open_corpus) == 6 and data.open_corpus[-1] == "bamboogle/wiki18_passages.jsonl"
    names = {d.name for d in data.open_corpus[:-1]}
    assert names >= {"2wiki_train", "hotpotqa", "musique_train"} and "2wiki" not in names  # the eval sample stays out
    assert all(isinstance(d, QADataset) for d in data.open_corpus[:-1])
    assert (data.mined_from, data.mined_pool) == ("query", 20)
    module = cfg.model.module
    assert module.correction_penalty == 0.1
    model = instantiate(module.model)(dim=16)
    q, c = torch.randn(3, 16), torch.randn(3, 16)
    assert torch.equal(model(q, c), q - c) and model.alpha == 0.0 and model.beta.requires_grad  # β learnt, no gate
    assert module.scale_lr == 1e-2
    closed = instantiate(compose_cfg("train", ["+model=treehop", "~model.datamodule.open_corpus"]).model.datamodule)
    assert closed.open_corpus == []


@pytest.mark.parametrize("added", ["+model=treehop", "+experiment=treehop_paper", "+experiment=treehop_2wiki_bge_m3"])
def test_the_default_and_paper_experiments_keep_the_papers_update_and_loss(compose_cfg, added):
    cfg = compose_cfg("train", [added])
    assert cfg.model.module.correction_penalty == 0.0 and cfg.model.datamodule.mined_negatives == 0
    model = instantiate(cfg.model.module.model)(dim=16)
    assert model.alpha == 1.0 and model.beta == 1.0 and not {"alpha", "beta"} & dict(model.named_parameters()).keys()
    assert model.config["gate_scale"] == model.config["gate_init_scale"] == 1.0
    q, c = torch.randn(3, 16), torch.randn(3, 16)
    assert torch.equal(model(q, c), q - c + model.gate(q, c))


def test_the_learnt_scales_get_their_own_learning_rate():
    module = TreeHopModule(model=functools.partial(TreeHop), lr=3e-4, scale_lr=1e-2)
    module.model = TreeHop(8, gate_dim=16, correction_init=0.0, learn_scale=True, learn_subtraction=True)
    groups = module.configure_optimizers().param_groups
    assert [g["lr"] for g in groups] == [3e-4, 1e-2] and len(groups[1]["params"]) == 2
    assert groups[1]["weight_decay"] == 0.0
