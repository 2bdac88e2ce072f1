"""What the trainers' data does on several devices, without starting any: the global batch split over the devices,
the samplers as Lightning shards them under DDP (its own injection code, as `Trainer.fit` calls it), evaluation
sets read whole, rank 0's result and clock for every rank, the outcome labeller's models released after labelling,
and train.py preparing the data first only in the process that starts the others."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from types import SimpleNamespace

import pytest
from lightning.fabric.utilities.data import _replace_dunder_methods
from lightning.fabric.utilities.distributed import DistributedSamplerWrapper
from lightning.pytorch.trainer.states import RunningStage
from lightning.pytorch.utilities.data import _update_dataloader
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler

from hoprag.data.types import QAExample
from hoprag.paths import PROJECT_ROOT
from hoprag.routers.outcomes import OutcomeLabeller
from hoprag.routers.training import SourceRouterDataModule
from hoprag.training.budget import WallClockBudget
from hoprag.training.distributed import device_batch, from_rank_zero, whole_set, write_atomically
from hoprag.training.sampler import EpochDraw, LengthGroupedSampler
from tests.unit.test_router_outcomes import CONFIGS, LLM, METHOD, QUESTIONS


def trainer(world_size: int = 1, rank: int = 0, accumulate: int = 1, broadcast=None) -> SimpleNamespace:
    strategy = SimpleNamespace(broadcast=broadcast or (lambda obj, src: obj))
    return SimpleNamespace(world_size=world_size, global_rank=rank, is_global_zero=rank == 0, strategy=strategy,
                           accumulate_grad_batches=accumulate, should_stop=False, global_step=0,
                           estimated_stepping_batches=10, current_epoch=0)  # fmt: skip


def test_the_configs_batch_is_global_and_split_over_the_devices(capsys):
    assert device_batch(64, trainer(8), "trees") == 8
    assert device_batch(4, trainer(4, accumulate=4), "questions") == 1
    assert device_batch(16, None, "pairs") == 16  # a datamodule used without a trainer
    assert capsys.readouterr().out.splitlines() == [
        "batch 64 trees = 8 devices × 8",
        "batch 4 questions = 4 devices × 1, 4 accumulated: 16 per optimizer step",
        "batch 16 pairs = 1 device × 16",
    ]
    with pytest.raises(ValueError, match="batch_size=64 trees is the global batch .* over 6 devices"):
        device_batch(64, trainer(6), "trees")


def sharded(loader: DataLoader, rank: int, sampler) -> DataLoader:
    """The loader as Lightning hands it to `rank` of 2 under DDP (`_update_dataloader`, `sampler` its injection)."""
    return _update_dataloader(loader, sampler, mode=RunningStage.TRAINING)


def lightning_loader(make: Callable[[], DataLoader]) -> DataLoader:
    """`make()` called as Lightning calls a `*_dataloader` hook, recording how to rebuild what it makes."""
    with _replace_dunder_methods(DataLoader, "dataset"), _replace_dunder_methods(BatchSampler):
        return make()


def test_length_grouped_batches_are_shared_out_whole_under_ddp():
    lengths = [1, 8, 4, 11, 7, 3, 10, 6, 2, 9]
    one_device = list(LengthGroupedSampler(lengths, batch_size=2, pool=2, seed=4))
    shares = []
    for rank in range(2):
        loader = lightning_loader(lambda: DataLoader(range(10), batch_sampler=LengthGroupedSampler(lengths, 2, 2, 4)))
        ddp = sharded(loader, rank, DistributedSampler(loader.dataset, num_replicas=2, rank=rank, shuffle=False))
        assert isinstance(ddp.batch_sampler, LengthGroupedSampler) and len(ddp) == 3
        shares.append(list(ddp.batch_sampler))
    assert shares[0] == one_device[0::2] and shares[1] == [*one_device[1::2], one_device[0]]  # as many each


def test_an_epochs_draw_is_shared_out_under_ddp_not_replaced_by_the_whole_set():
    one_device = list(EpochDraw(10, 6, seed=1))
    shares = []
    for rank in range(2):
        loader = lightning_loader(lambda: DataLoader(range(10), batch_size=1, sampler=EpochDraw(10, 6, seed=1)))
        wrapper = DistributedSamplerWrapper(loader.sampler, num_replicas=2, rank=rank, shuffle=False)
        shares.append([int(b) for b in sharded(loader, rank, wrapper)])
    assert shares == [one_device[0::2], one_device[1::2]]


def test_an_evaluation_set_is_read_whole_by_every_rank():
    sampler = whole_set(list(range(5)))
    assert isinstance(sampler, DistributedSampler) and list(sampler) == [0, 1, 2, 3, 4]  # Lightning leaves it


def test_rank_zero_computes_and_the_others_receive():
    assert from_rank_zero(None, lambda: "mine") == "mine"
    other = trainer(2, rank=1, broadcast=lambda obj, src: "rank 0's" if obj is None else pytest.fail("sent"))
    assert from_rank_zero(other, lambda: pytest.fail("computed on rank 1")) == "rank 0's"


def test_every_rank_reads_rank_zeros_clock_and_stops_at_the_same_step():
    budget = WallClockBudget(minutes=10)
    budget.on_train_start(None, None)
    rank1 = trainer(2, rank=1, broadcast=lambda share, src: 1.2)  # rank 0 found the budget spent
    budget.on_before_backward(rank1, None, None)
    assert rank1.should_stop and budget.fraction() == 1.2  # and its schedule reads the same share


def test_write_atomically_leaves_the_file_or_nothing(tmp_path):
    path = tmp_path / "cache" / "vectors.npy"
    write_atomically(path, lambda f: f.write(b"whole"))
    with pytest.raises(RuntimeError):
        write_atomically(path, lambda f: (f.write(b"half"), (_ for _ in ()).throw(RuntimeError("killed"))))
    assert path.read_bytes() == b"whole" and [p.name for p in path.parent.iterdir()] == ["vectors.npy"]


def test_the_labeller_releases_its_models_and_a_second_call_answers_nothing(monkeypatch):
    released = []
    monkeypatch.setattr("hoprag.llm.release_engines", lambda: released.append("engines"))
    labeller = OutcomeLabeller(METHOD, LLM, configurations=CONFIGS, cache_dir=None)  # the cache in memory only
    first = labeller(QUESTIONS)
    assert labeller.llm is not None
    labeller.release()
    assert labeller.llm is None and released == ["engines"]
    again = labeller(QUESTIONS)
    assert again.labels == first.labels and again.summary["answered"] == {"web": 0, "llm": 0}
    assert labeller.llm is None  # nothing was built again


def test_the_router_data_labels_in_prepare_data_then_releases_and_setup_only_reads():
    events = []

    class Labeller:
        def __call__(self, train):
            events.append(("label", len(train)))
            return SimpleNamespace(labels=[("web",)] * len(train), summary={})

        def release(self):
            events.append(("release",))

    data = SimpleNamespace(examples=[QAExample(f"q{i}", f"Question {i}?", ["x"], metadata={"context_uid": f"c{i}"})
                                     for i in range(6)])  # fmt: skip
    dm = SourceRouterDataModule(data, options="crag_single", labels="outcome", labeller=Labeller(), val_fraction=0.34)
    assert dm.prepare_data_per_node is False  # one labelling run for every node
    dm.prepare_data()
    assert events == [("label", 3), ("release",)]  # the training half of the questions
    dm.setup("fit")
    assert events[2:] == [("label", 3)]  # the same questions again, read from what the first run cached


def test_train_py_prepares_first_only_where_it_starts_the_other_processes():
    spec = importlib.util.spec_from_file_location("train_entry", PROJECT_ROOT / "train.py")
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    calls = []
    data = SimpleNamespace(prepare_data=lambda: calls.append(1), prepare_data_per_node=True)

    def run(environment, node_rank=0, per_node=True):
        calls.clear()
        data.prepare_data_per_node = per_node
        strategy = SimpleNamespace() if environment is None else SimpleNamespace(cluster_environment=environment)
        entry.prepare_first(data, SimpleNamespace(strategy=strategy, node_rank=node_rank))
        return len(calls)

    launcher, cluster = (SimpleNamespace(creates_processes_externally=flag) for flag in (False, True))
    assert run(None) == 1 and run(launcher) == 1  # one device; trainer=ddp's first process
    assert run(cluster) == 0  # SLURM tasks, torchrun, or a process trainer=ddp started: Lightning's call prepares
    assert run(launcher, node_rank=1) == 1 and run(launcher, node_rank=1, per_node=False) == 0
