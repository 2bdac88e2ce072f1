"""The training utilities every trainer shares (hoprag/training): the wall-clock budget (its stop and the
schedule annealed to it) and the length-grouped sampler, pinned to the values the trainers had before they
shared them. Tiny modules and a fake clock: nothing here depends on how fast the machine is."""

from __future__ import annotations

from types import SimpleNamespace

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import Logger
from torch.utils.data import DataLoader, TensorDataset

from hoprag.training import budget as budget_module
from hoprag.training.budget import WallClockBudget
from hoprag.training.sampler import LengthGroupedSampler

STEPS = (0, 1, 2, 5, 9, 10, 12)
# the router's cosine and the verifier's linear factor at STEPS, of 10 steps with 20% warm-up, by budget share
# spent (the formulas of routers/training.py and verifiers/training.py before they shared the callback)
FACTORS = {
    ("cosine", 0.0): [0.5, 1.0, 1.0, 0.691341716183, 0.038060233744, 0.0, 0.0],
    ("linear", 0.0): [0.5, 0.9, 0.8, 0.5, 0.1, 0.0, 0.0],
    ("cosine", 0.5): [0.691341716183, 0.691341716183, 0.691341716183, 0.691341716183, 0.038060233744, 0.0, 0.0],
    ("linear", 0.5): [0.5, 0.5, 0.5, 0.5, 0.1, 0.0, 0.0],
    ("cosine", 1.2): [0.0] * 7,
    ("linear", 1.2): [0.0] * 7,
}


@pytest.fixture
def clock(monkeypatch) -> list[float]:
    """The budget's clock, in seconds; a test moves it by assigning `clock[0]`."""
    now = [1000.0]
    monkeypatch.setattr(budget_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


def test_the_sampler_gives_the_same_batches_for_a_seed_as_before():
    lengths = [1, 8, 4, 11, 7, 3, 10, 6, 2, 9]
    sampler = LengthGroupedSampler(lengths, batch_size=3, pool=2, seed=4)
    assert list(sampler) == [[3], [5, 4, 1], [7, 9, 6], [0, 8, 2]]
    assert list(sampler) == [[7, 1, 3], [5, 4, 9], [6], [0, 8, 2]]  # the next epoch's order
    assert len(sampler) == 4


@pytest.mark.parametrize(("shape", "spent"), sorted(FACTORS))
def test_the_schedule_takes_the_larger_of_the_step_and_the_budget_share(clock, shape, spent):
    budget = WallClockBudget(minutes=10)
    budget.on_train_start(None, None)
    clock[0] += spent * 10 * 60
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    schedule = budget.schedule(optimizer, total=10, warmup=0.2, shape=shape)
    assert schedule["interval"] == "step"
    factor = schedule["scheduler"].lr_lambdas[0]
    assert [factor(step) for step in STEPS] == pytest.approx(FACTORS[shape, spent], abs=1e-12)


def test_without_warm_up_or_budget_the_schedule_follows_the_steps_alone():
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    for shape in ("cosine", "linear"):
        factor = WallClockBudget().schedule(optimizer, total=10, warmup=0.0, shape=shape)["scheduler"].lr_lambdas[0]
        assert [factor(step) for step in (0, 5, 10)] == pytest.approx([1.0, 0.5, 0.0])


class Tiny(L.LightningModule):
    """One weight; each backward pass costs a minute of the fake clock."""

    def __init__(self, minutes: float | None, clock: list[float]) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.budget, self.clock, self.validated = WallClockBudget(minutes), clock, 0

    def configure_callbacks(self) -> list[L.Callback]:
        return [self.budget]

    def training_step(self, batch, batch_idx):
        return (self.weight - batch[0]).pow(2).mean()

    def on_after_backward(self) -> None:
        self.clock[0] += 60

    def validation_step(self, batch, batch_idx):
        self.validated += 1

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Recorded(Logger):
    """Keeps what is logged, as a run's CSV or wandb logger would write it."""

    name, version = "recorded", 0

    def __init__(self) -> None:
        super().__init__()
        self.metrics: dict[str, float] = {}

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    def log_metrics(self, metrics, step=None) -> None:
        self.metrics.update(metrics)


def fit(module: Tiny, logger: Logger | bool = False, **trainer_args) -> L.Trainer:
    data = DataLoader(TensorDataset(torch.ones(20, 1)), batch_size=1)
    trainer = L.Trainer(accelerator="cpu", logger=logger, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, num_sanity_val_steps=0, **trainer_args)  # fmt: skip
    trainer.fit(module, data, data)
    return trainer


def test_the_budget_stops_after_the_step_whose_forward_pass_found_it_spent_and_validates(clock, capsys):
    module, logger = Tiny(minutes=3, clock=clock), Recorded()
    trainer = fit(module, logger, max_epochs=5)
    # the 4th step's forward pass (before its backward) is the first to see 3 minutes spent: that step completes
    assert trainer.global_step == 4 and trainer.should_stop
    assert module.validated == 20  # the final weights are validated once
    assert module.budget.fraction() == pytest.approx(4 / 3)
    # and the run says it was cut short, by how much
    assert module.budget.cut == (4, 100, 1)
    assert "training budget (3 min) spent: stopped after 4 of 100 planned steps (epoch 1 of 5)" in capsys.readouterr().out
    assert logger.metrics["train/steps"] == 4 and logger.metrics["train/steps_planned"] == 100  # and its logs keep it


def test_a_budget_spent_on_the_last_planned_step_cut_nothing(clock, capsys):
    module = Tiny(minutes=2, clock=clock)
    trainer = fit(module, max_steps=3)  # the 3rd step's forward pass sees 2 minutes spent
    assert trainer.global_step == 3 and module.budget.cut == (3, 3, 1)
    assert "budget" not in capsys.readouterr().out


def test_without_a_budget_training_runs_its_steps(clock, capsys):
    module, logger = Tiny(minutes=None, clock=clock), Recorded()
    trainer = fit(module, logger, max_steps=7)
    assert trainer.global_step == 7 and module.budget.fraction() == 0.0
    assert module.budget.cut is None and "budget" not in capsys.readouterr().out
    assert "train/steps" not in logger.metrics  # an untimed run trains its plan
