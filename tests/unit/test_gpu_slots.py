"""`gpus_per_job`: jobs running at once on one machine each claim their own GPU group (hoprag/utils/gpu_slots.py).
The GPUs are stood in for by `CUDA_VISIBLE_DEVICES` (the claim never starts CUDA); the processes are real."""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hoprag.utils import gpu_slots


@pytest.fixture
def four_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setenv("HOPRAG_GPU_LOCKS", str(tmp_path / "locks"))
    monkeypatch.delenv(gpu_slots.SLOT, raising=False)
    yield
    gpu_slots.release_unless_cuda_started()


def test_groups_are_consecutive_and_a_remainder_idles():
    assert gpu_slots.groups(["0", "1", "2", "3", "4"], 2) == [["0", "1"], ["2", "3"]]
    assert gpu_slots.groups(["0", "1"], 1) == [["0"], ["1"]]
    with pytest.raises(RuntimeError, match="gpus_per_job=4, but 2 GPU"):
        gpu_slots.groups(["0", "1"], 4)
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="must be an integer >= 1"):
            gpu_slots.groups(["0", "1"], bad)


def _claim_and_report(queue, hold) -> None:
    queue.put(gpu_slots.claim(2, wait=0.5, poll=0.1))
    hold.wait(30)


def test_processes_claim_different_groups_and_a_third_is_refused_while_both_are_held(four_gpus):
    ctx = mp.get_context("spawn")
    queue, hold = ctx.Queue(), ctx.Event()
    workers = [ctx.Process(target=_claim_and_report, args=(queue, hold)) for _ in range(2)]
    for w in workers:
        w.start()
    claimed = sorted(queue.get(timeout=60) for _ in workers)
    assert claimed == [["0", "1"], ["2", "3"]]
    with pytest.raises(RuntimeError, match="no free group of 2 GPU"):
        gpu_slots.claim(2, wait=0.3, poll=0.1)
    hold.set()
    for w in workers:
        w.join(30)
    assert gpu_slots.claim(2, wait=5, poll=0.1) == ["0", "1"]  # the kernel dropped the dead workers' locks


def test_a_claim_sets_the_devices_and_is_kept_for_the_process_unless_cuda_never_started(four_gpus):
    assert gpu_slots.claim(1) == ["0"]
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0" and gpu_slots.claim(1) == ["0"]  # a later job keeps it
    assert gpu_slots.release_unless_cuda_started()  # this process never started CUDA
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3" and gpu_slots.SLOT not in os.environ


def test_a_pool_with_more_workers_than_groups_is_refused_before_any_job(four_gpus):
    config = OmegaConf.create({"hydra": {"launcher": {"n_jobs": 3}}})
    with pytest.raises(ValueError, match="n_jobs=3 workers, but gpus_per_job=2 makes 2 GPU group"):
        gpu_slots.GPUSlots(2).on_multirun_start(config)
    gpu_slots.GPUSlots(2).on_multirun_start(OmegaConf.create({"hydra": {"launcher": {"n_jobs": 2}}}))
    gpu_slots.GPUSlots(None).on_multirun_start(config)  # not asked for: nothing checked


def test_a_job_claims_by_its_own_setting_which_a_sweeper_may_give_per_job(four_gpus):
    """reproduce.py's rows sweeper gives `gpus_per_job` to each job, not to the multirun the callback is made for."""
    slots = gpu_slots.GPUSlots(None)
    slots.on_job_start(OmegaConf.create({"gpus_per_job": 2}))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    slots.on_job_end(OmegaConf.create({"gpus_per_job": 2}))
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"
    slots.on_job_start(OmegaConf.create({}))  # no setting: every GPU stays visible
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


def test_reproduce_py_claims_no_group_itself_so_that_its_rows_spread_over_the_gpus(four_gpus, compose_cfg):
    """reproduce.py is a Hydra job too: had it claimed GPU 0 with its own `gpus_per_job`, every row's run would
    inherit that group (`HOPRAG_GPU_SLOT`) and run on GPU 0."""
    cfg = compose_cfg("reproduce", ["table=prunerag_t1", "gpus_per_job=1"], hydra=True)
    slots = instantiate(cfg.hydra.callbacks.gpu_slots)
    slots.on_job_start(cfg)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1,2,3" and gpu_slots.SLOT not in os.environ
    eval_cfg = compose_cfg("eval", ["+method=no_retrieval", "gpus_per_job=1"], hydra=True)
    instantiate(eval_cfg.hydra.callbacks.gpu_slots).on_job_start(eval_cfg)  # a row's run does claim
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
