"""`+model=treehop` is the paper's TreeHop (every model, loss and optimiser setting the digest states), the
small-data variant differs from it only where it says so, and every trainer starts by saying what trains."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch import nn

from hoprag.training.summary import parameter_line
from hoprag.treehop import TreeHop
from hoprag.treehop.module import TreeHopModule


def flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(tree, dict):
        return {prefix[:-1]: tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(flat(value, f"{prefix}{key}."))
    return out


def settings(compose_cfg, overrides: list[str]) -> dict[str, Any]:
    """The composed training config, flattened, interpolations unresolved (paths and run dirs aside)."""
    cfg = compose_cfg("train", overrides)
    return flat(OmegaConf.to_container(cfg, resolve=False))


def test_the_default_is_the_papers_model_and_objective(compose_cfg):
    cfg = compose_cfg("train", ["+model=treehop"])
    module, data = cfg.model.module, cfg.model.datamodule
    net = module.model
    # spec/treehop.md §3.2 (layer table) and §6.4: g_size / mlp_size / n_mlp / n_head = 2048 / 2048 / 3 / 1 at
    # BGE-M3's 1024, gate dropout 0.0; A2: the softmax scaled by √(projected size); Eq. (3): h = q − c + gate
    assert (net.n_mlp, net.n_heads, net.gate_dropout) == (3, 1, 0.0)
    assert (net.gate_scale, net.gate_init_scale) == (1.0, 1.0)  # §3.2: PyTorch's default init, no custom scale
    assert (net.correction_init, net.learn_scale, net.learn_subtraction) == (1.0, False, False)
    paper = instantiate(net)(dim=1024)
    assert paper.config["gate_dim"] == paper.config["mlp_dim"] == paper.config["attn_scale_dim"] == 2048
    assert paper.n_parameters() == sum(p.numel() for p in paper.parameters()) == 25_192_448  # §3.2, §15 item 3
    assert paper.out.bias is None  # §3.2 step 8: W_out has no bias
    q, c = torch.randn(2, 1024), torch.randn(2, 1024)
    assert torch.equal(paper(q, c), q - c + paper.gate(q, c))  # §3.2 step 9
    # §6.1 and §6.4: paired InfoNCE, τ 0.15, 5 negatives from the question's own ctxs, no in-batch negatives (A1)
    assert module.temperature == 0.15 and not module.in_batch_negatives and data.n_negatives == 5
    assert data.corpus_negatives == data.mined_negatives == data.branch_negatives == 0
    assert module.correction_penalty == 0.0  # §6.1: the loss is InfoNCE alone
    assert module.output_dropout == 0.1  # §6.4 and A3: dropout 0.1 on the output representation, in training
    # §6.4: AdamW, lr 6e-5 constant (no scheduler, no warm-up), weight decay 2e-8, 64 trees per step
    assert (module.lr, module.weight_decay, data.batch_size) == (6e-5, 2e-8, 64)
    built = TreeHopModule(model=instantiate(net), **{k: v for k, v in module.items() if k not in ("_target_", "model")})
    built.model = instantiate(net)(dim=16)
    optimizer = built.configure_optimizers()
    assert isinstance(optimizer, torch.optim.AdamW) and len(optimizer.param_groups) == 1  # no scheduler either
    assert (optimizer.defaults["lr"], optimizer.defaults["weight_decay"]) == (6e-5, 2e-8)
    # §6.4 / A6: 20 epochs (the code's default), none cut short, fp32 (§12.1)
    assert cfg.trainer.max_epochs == 20 and cfg.callbacks.early_stopping.patience >= 20 and cfg.trainer.precision == 32
    # only the embedder follows its group: MiniLM by default, its width sets the gate's (2 × 384)
    assert cfg.embedder.name == "all-MiniLM-L6-v2" and instantiate(net)(dim=384).config["gate_dim"] == 768


def test_the_paper_experiments_add_data_and_embedder_to_the_default_and_nothing_else(compose_cfg):
    default = settings(compose_cfg, ["+model=treehop"])
    alias = settings(compose_cfg, ["+experiment=treehop_paper"])
    assert {k for k in default.keys() | alias.keys() if default.get(k) != alias.get(k)} == {"tags"}
    full = settings(compose_cfg, ["+experiment=treehop_2wiki_bge_m3"])
    changed = {k.split(".")[0] if k.startswith(("embedder.", "trainer.")) else k
               for k in default.keys() | full.keys() if default.get(k) != full.get(k)}  # fmt: skip
    assert not any(k.startswith("model.module") for k in changed)  # the model, loss and optimiser: +model=treehop's
    opened = {k for k in changed if k.startswith("model.datamodule.open_corpus.")}
    assert changed - opened == {
        "tags", "embedder", "trainer",  # the paper's embedder (App. C template); trainer=gpu, fp32 still
        "model.datamodule.train.questions", "model.datamodule.dev_fraction",  # the full train split, a 2% dev slice
    }
    assert opened and all(full.get(k) is None for k in opened)  # validation over the training pool alone
    assert full["trainer.precision"] == 32 and full["trainer.max_epochs"] == 20


SMALL_DATA = {  # conf/model/treehop_small_data.yaml: what differs from the paper's +model=treehop
    "model.module.model.correction_init": 0.0,
    "model.module.model.learn_subtraction": True,
    "model.module.lr": 3e-4,
    "model.module.in_batch_negatives": True,
    "model.module.correction_penalty": 0.1,
    "model.module.scale_lr": 1e-2,
    "model.datamodule.batch_size": 16,
    "trainer.max_epochs": 10,
    "callbacks.early_stopping.patience": 3,
}


def test_the_small_data_variant_differs_from_the_paper_only_where_it_says(compose_cfg):
    paper = settings(compose_cfg, ["+model=treehop"])
    small = settings(compose_cfg, ["+model=treehop_small_data"])
    changed = {k: small.get(k) for k in paper.keys() | small.keys() if paper.get(k) != small.get(k)}
    assert changed == SMALL_DATA
    cfg = compose_cfg("train", ["+model=treehop_small_data"])
    model = instantiate(cfg.model.module.model)(dim=16)
    q, c = torch.randn(3, 16), torch.randn(3, 16)
    assert torch.equal(model(q, c), q - c) and [n for n, _ in model.named_parameters()] == ["beta"]  # β alone


def test_the_parameter_line_says_what_trains():
    body, head = nn.Linear(4, 4), nn.Linear(4, 2)
    body.requires_grad_(False)
    assert parameter_line("net", nn.Sequential(body, head)) == "net: 30 parameters, 10 trainable"
    assert parameter_line("net", nn.Sequential(body), detail="; frozen") == "net: 20 parameters, 0 trainable; frozen"
    small = TreeHop(16, correction_init=0.0, learn_subtraction=True)
    line = parameter_line("TreeHop", small, {"alpha": "α", "beta": "β"}, f"; {small.formula()}")
    assert line == "TreeHop: 1 parameter, 1 trainable (β); h = q − β·c (no gate)"
    paper = TreeHop(1024)
    assert parameter_line("TreeHop", paper, {"beta": "β"}, f"; {paper.formula()}") == (
        "TreeHop: 25,192,448 parameters, 25,192,448 trainable; h = q − c + W_out·G(q, c), G 2048 wide × 1 head, "
        "3 MLP blocks of 2048"
    )
    gated = TreeHop(16, gate_dim=8, correction_init=0.0, learn_scale=True, learn_subtraction=True)
    assert gated.formula().startswith("h = q − β·c + α·W_out·G(q, c)")


class Attached(TreeHopModule):
    """The module with a stand-in datamodule set directly, to build its network without a Trainer."""

    data = None


@pytest.mark.parametrize(("model", "expected"), [
    ("treehop", "TreeHop: 6,560 parameters, 6,560 trainable; h = q − c + W_out·G(q, c), G 32 wide × 1 head"),
    ("treehop_small_data", "TreeHop: 1 parameter, 1 trainable (β); h = q − β·c (no gate)"),
])  # fmt: skip
def test_treehop_training_starts_with_its_parameter_line(compose_cfg, model, expected, capsys):
    cfg = compose_cfg("train", [f"+model={model}", "embedder=hashing"])
    settings = {k: v for k, v in cfg.model.module.items() if k not in ("_target_", "model")}
    module = Attached(model=instantiate(cfg.model.module.model), **settings)
    vectors = type("Embedded", (), {"questions": torch.zeros(2, 16).numpy(), "passages": torch.zeros(3, 16).numpy()})
    module.data = type("Data", (), {"dim": 16, "embedder": instantiate(cfg.embedder), "embedded": vectors})
    module.configure_model()
    assert expected in capsys.readouterr().out
