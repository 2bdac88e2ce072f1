"""Issue 33 (a researcher's first hour), the output side: a run that generates no answer reports no answer metrics
(absent, not 0); eval.py's closing report is one aligned table of headline means with n/a where a metric does
not apply and no totals; train.py's summary leads with the exported epoch beside the untrained start; library
chatter is off unless verbose; long steps without a tick still print a heartbeat line on a pipe, and HFLLM's
batched generation ticks as samples finish; a failed command leaves no empty run folder."""

from __future__ import annotations

import io
import json
import logging
import math
import os
import sys
import time

import pytest
from omegaconf import OmegaConf

from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.runner import run
from hoprag.evaluation.summary import NA, format_summary, metrics_table
from hoprag.llm import ScriptedLLM
from hoprag.methods.base import Method, MethodOutput
from hoprag.training.checkpoints import Best
from hoprag.training.summary import EpochHistory, training_summary
from hoprag.utils import progress, quiet
from hoprag.utils.run_dirs import leaves_no_empty_run, remove_if_empty

GOLD = Passage("g1", "Gold", "The answer is Paris.")
OTHER = Passage("o1", "Other", "Nothing here.")
EXAMPLES = [
    QAExample(f"q{i}", f"Question {i}?", ["Paris"], supporting_titles=["Gold"], context=[GOLD, OTHER]) for i in range(3)
]


class Reader(Method):
    """Reads the gold passage first for every question; answers "Paris" only when it generates."""

    name = "reader"
    needs_retriever = False

    def __init__(self, generates: bool) -> None:
        super().__init__(ScriptedLLM(default_reply="x"))
        self.generates = generates

    def answer(self, examples, costs):
        for cost in costs:
            cost.add_retrieval([GOLD.id, OTHER.id], 0.0, "retrieval")
        return [MethodOutput("Paris" if self.generates else "", [GOLD, OTHER], stats={"pool": 2.0}) for _ in examples]


def test_a_run_that_generates_nothing_reports_retrieval_and_no_answer_metric(tmp_path):
    metrics = run(Reader(generates=False), EXAMPLES, tmp_path / "retrieval_only")
    assert not {"em", "f1", "acc", "cover_em", "efr", "forget_rate", "parse_failures"} & set(metrics)
    assert metrics["retrieval/passage_recall@5"] == 100.0 and metrics["retrieval/all_gold_retrieved"] == 100.0
    records = [json.loads(line) for line in (tmp_path / "retrieval_only" / "predictions.jsonl").open()]
    assert all(r["generated"] is False and r["scores"] == {} for r in records)

    answered = run(Reader(generates=True), EXAMPLES, tmp_path / "answered")
    assert answered["em"] == 100.0 and answered["efr"] == 0.0 and answered["parse_failures"] == 0
    assert answered["retrieval/all_gold_retrieved"] == 100.0
    assert "generated" not in json.loads((tmp_path / "answered" / "predictions.jsonl").open().readline())


def test_the_closing_report_is_one_aligned_table_with_na_and_no_totals(tmp_path):
    run(Reader(generates=False), EXAMPLES, tmp_path, run_info={"dataset": "toy"})
    lines = format_summary(tmp_path, show=1).splitlines()
    assert lines[0] == "Q: Question 0?" and lines[1].startswith("   predicted: ''")
    assert lines[2].startswith("reader on toy: 3 questions in ")
    assert lines[-1] == f"run directory: {tmp_path}  (metrics.json: all {len(metrics_of(tmp_path))} figures)"
    table = lines[3:-1]
    assert table[0].split()[:5] == ["answer", "(%)", "em", NA, "f1"]  # retrieval only: answers n/a, not 0.0
    assert not any("total" in line for line in table) and len(table) <= 8
    retrieval = next(line for line in table if "retrieval (%)" in line)
    assert "passage_recall@5" in retrieval and "100.0" in retrieval
    per_question = next(line for line in table if "per question" in line)
    assert "llm_calls" in per_question and "retrieval_calls" in "".join(table)
    assert any("pool" in line and "method" in line for line in table)
    column = table[0].index(" em ") + 1
    assert all(line[column - 1] == " " != line[column] for line in table)  # every first cell in one column


def test_a_closed_book_run_says_nothing_was_retrieved_and_many_method_figures_are_counted():
    metrics = {"n": 2, "em": 50.0, "f1": 62.25, "cost/mean/llm_calls": 1.0, "cost/total/llm_calls": 2.0,
               "cost/mean/prompt_tokens": 71.5, "cost/mean/truncated_prompts": 0.0,
               **{f"method/v{i}/hop1/k": float(i) for i in range(20)}}  # fmt: skip
    lines = metrics_table(metrics).splitlines()
    assert lines[0].split()[:6] == ["answer", "(%)", "em", "50.0", "f1", "62.2"]
    assert "retrieval (%)   n/a: nothing retrieved" in metrics_table(metrics)
    assert lines[-1].split()[1:] == ["20", "figures", "(method/...):", "see", "metrics.json"]
    assert "truncated_prompts" not in "\n".join(lines)  # a zero beyond the core costs is left out


def metrics_of(run_dir) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())["metrics"]


class FakeTrainer:
    def __init__(self, epoch: int, figures: dict[str, float]) -> None:
        import torch

        self.sanity_checking = False
        self.current_epoch = epoch
        self.callback_metrics = {k: torch.tensor(v) for k, v in figures.items()}


def test_the_training_summary_leads_with_the_exported_epoch_beside_the_untrained_start():
    history = EpochHistory()
    for epoch, (recall, gain) in enumerate([(50.0, 2.0), (62.5, 5.0), (55.0, 0.0)]):
        history.on_validation_end(FakeTrainer(epoch, {"val/recall": recall, "val/gain": gain}), None)
        history.on_train_epoch_end(FakeTrainer(epoch, {"train/loss": 1.0 / (epoch + 1), "train/loss_step": 9.0}), None)
    untrained = {"val/recall": 40.0, "val/gain": 0.0}
    best = Best("checkpoints/epoch_001.ckpt", 1, 62.5)
    text = training_summary(history, "val/recall", best, untrained, {"test/acc": 0.5})
    lines = text.splitlines()
    assert lines[0] == "exported: epoch 1, the best val/recall of 3 epochs"
    assert lines[1].split() == ["metric", "untrained", "exported", "(epoch", "1)", "last", "(epoch", "2)"]
    assert lines[2].split() == ["val/recall", "40.0000", "62.5000", "55.0000"]  # the monitored metric first
    assert lines[3].split() == ["val/gain", "0.0000", "5.0000", "0.0000"]
    assert lines[4].split() == ["train/loss", NA, "0.5000", "0.3333"] and "loss_step" not in text
    assert lines[-3] == "test (the exported weights):" and lines[-1].split() == ["test/acc", "0.5000"]
    assert "untrained" not in training_summary(history, "val/recall", best)


@pytest.fixture
def restored(monkeypatch):
    """Whatever `quiet.configure` touches, put back after the test."""
    for name in quiet.QUIET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    levels = {name: logging.getLogger(name).level for name in quiet.QUIET_LOGGERS}
    for name in quiet.QUIET_LOGGERS:  # as a fresh process has them (an earlier test may have quieted them)
        logging.getLogger(name).setLevel(logging.NOTSET)
    bars = "transformers" in sys.modules and sys.modules["transformers"].utils.logging.is_progress_bar_enabled()
    yield monkeypatch
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    if bars:
        sys.modules["transformers"].utils.logging.enable_progress_bar()


def test_library_chatter_is_off_unless_verbose(restored):
    quiet.configure(True)
    assert "WANDB_SILENT" not in os.environ and logging.getLogger("faiss.loader").level == logging.NOTSET
    restored.setenv("WANDB_SILENT", "false")  # the user's own choice stays
    quiet.configure(False)
    assert os.environ["WANDB_SILENT"] == "false" and os.environ["TRANSFORMERS_VERBOSITY"] == "error"
    assert all(logging.getLogger(name).level >= logging.WARNING for name in quiet.QUIET_LOGGERS)
    assert logging.getLogger("lightning.pytorch.utilities.rank_zero").getEffectiveLevel() == logging.WARNING


def test_a_step_that_never_ticks_still_prints_a_heartbeat_line_on_a_pipe(monkeypatch):
    monkeypatch.setattr(progress, "INTERVAL", 0.2)
    monkeypatch.setattr(progress, "HEARTBEAT_POLL", 0.05)
    monkeypatch.setattr(progress.LineBar, "last_line", -math.inf)
    log = io.StringIO()

    def beats() -> list[str]:
        return [line for line in log.getvalue().splitlines() if line.startswith("generating: 0/16 sample")]

    with (
        progress.bar(total=4, desc="outer", unit="q", file=log, show=True),
        progress.bar(total=16, desc="generating", unit="sample", leave=False, file=log, show=True),
    ):
        deadline = time.monotonic() + 10  # one batched call: no update at all (a running heartbeat may be asleep)
        while len(beats()) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(beats()) >= 2 and "\r" not in log.getvalue()  # the innermost bar, again and again
    open_now = [ref() for ref in progress.LineBar.open_bars]
    assert not [bar for bar in open_now if bar is not None and bar.fp is log]  # closed bars beat no more


def test_a_bar_dropped_without_closing_stops_beating():
    log = io.StringIO()
    bar = progress.LineBar(total=3, desc="abandoned", file=log)
    assert progress.innermost() is bar
    del bar  # a loop left early: nothing closes it, but nothing keeps it either
    import gc

    gc.collect()
    assert all(ref() is None or ref().desc != "abandoned" for ref in progress.LineBar.open_bars)


def test_batched_generation_ticks_as_samples_finish():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from hoprag.llm.hf_decode import Decoder
    from hoprag.llm.types import SamplingParams

    class Tokenizer:
        eos_token_id, pad_token_id, unk_token_id = 1, 0, None

        def decode(self, ids, skip_special_tokens=True):
            return " ".join(map(str, ids))

        def batch_decode(self, sequences):
            return [self.decode(s) for s in sequences]

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = 1
    finished: list[int] = []
    params = SamplingParams(max_new_tokens=6, n=2, temperature=1.0)
    with torch.inference_mode():
        out = Decoder(model, Tokenizer(), True).generate_batch(
            [[2, 3, 4], [5, 6], [7]], params, [torch.Generator().manual_seed(1)] * 3, finished=finished.append
        )
    assert sum(finished) == 6 == sum(len(samples) for samples in out) and all(k > 0 for k in finished)


def test_a_failed_command_leaves_no_run_folder_but_a_run_with_results_stays(tmp_path):
    def failing(cfg):
        directory = tmp_path / cfg.name
        (directory / ".hydra").mkdir(parents=True)
        (directory / "eval.log").write_text("")
        (directory / "run_fingerprint.json").write_text("{}")
        if cfg.name == "kept":
            (directory / "predictions.jsonl").write_text("{}\n")
        raise SystemExit("choose a method")

    task = leaves_no_empty_run(failing)
    for name in ("gone", "kept"):
        cfg = OmegaConf.create({"name": name, "paths": {"output_dir": str(tmp_path / name)}})
        with pytest.raises(SystemExit, match="choose a method"):
            task(cfg)
    assert not (tmp_path / "gone").exists()
    assert {p.name for p in (tmp_path / "kept").iterdir()} == {".hydra", "eval.log", "run_fingerprint.json",
                                                                "predictions.jsonl"}  # fmt: skip
    assert leaves_no_empty_run(lambda cfg: 7)(OmegaConf.create({})) == 7  # success: nothing looked at
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("a user's file")
    assert not remove_if_empty(tmp_path / "mine") and (tmp_path / "mine" / "notes.txt").exists()


def test_progress_and_verbose_name_no_run():
    from hoprag.utils.run_control import is_run_control

    assert is_run_control("verbose") and is_run_control("progress") and not is_run_control("limit")
