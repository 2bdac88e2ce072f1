"""LoRA SFT of the LLM source router: target tokens, batches with a shared prompt prefix, the data's split
discipline, checkpoints, the schedule, and an export that `HFLLM(adapter=...)` serves."""

from __future__ import annotations

import json
import math
import time
from types import SimpleNamespace

import lightning as L
import pytest
import torch
from hydra.utils import instantiate

from hoprag.data import QADataset
from hoprag.data.types import QAExample
from hoprag.llm import HFLLM
from hoprag.llm.hf import DEFAULT_MODEL
from hoprag.llm.tokenizer import load_tokenizer, prompt_ids
from hoprag.routers import training
from hoprag.routers.options import CRAG_SINGLE, TATQA
from hoprag.routers.outcomes import CACHE_FILE, OutcomeCache, OutcomeLabeller, label_by_outcomes
from hoprag.routers.router import LLMRouter
from hoprag.routers.training import (
    IGNORE,
    SourceRouterDataModule,
    SourceRouterModule,
    collate,
    letter_token_ids,
    prompt_version,
    router_split,
    sft_example,
)
from hoprag.training.exports import SETTINGS_FILE
from hoprag.training.splits import LeakError, split_by_context
from tests.unit.test_router_outcomes import FakeMethod

QUESTION = "What was the change in total sales between 2018 and 2019?"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(DEFAULT_MODEL)


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory, tokenizer) -> str:
    """A random two-layer Llama with SmolLM2's tokenizer and chat template: trains in milliseconds."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024, tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny_llama")
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def stand_in_data(n_contexts: int = 8) -> SimpleNamespace:
    """Two questions per context, labels cycling through table / text / table-text (a QADataset's `examples`)."""
    sources = ("table", "text", "table-text")
    examples = [
        QAExample(f"q{c}-{k}", f"Question {k} about report {c}: what was the revenue" + " in 2019" * k, ["1"],
                  metadata={"context_uid": f"ctx{c}", "answer_from": sources[(2 * c + k) % 3]})
        for c in range(n_contexts)
        for k in range(2)
    ]  # fmt: skip
    return SimpleNamespace(examples=examples)


def tiny_module(base: str, **kwargs) -> SourceRouterModule:
    return SourceRouterModule(
        base_model=base,
        lora={"r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "target_modules": ["q_proj", "v_proj", "down_proj"]},
        **kwargs,
    )


# -- targets and batches ------------------------------------------------------------------------------------


def test_loss_mask_covers_exactly_the_letter_and_the_end_of_turn_token(tokenizer):
    ids, labels = sft_example(tokenizer, TATQA, QUESTION, "b")
    prompt = prompt_ids(tokenizer, TATQA.messages(QUESTION))  # what HFLLM feeds the model at generation
    assert ids[: len(prompt)] == prompt
    assert labels[: len(prompt)] == [IGNORE] * len(prompt)
    target = ids[len(prompt) :]
    assert labels[len(prompt) :] == target
    assert tokenizer.decode(target) == "b<|im_end|>" and target[-1] == tokenizer.eos_token_id
    assert letter_token_ids(tokenizer, TATQA) == [tokenizer.convert_tokens_to_ids(x) for x in "abc"]


def test_collate_runs_the_shared_prefix_once_and_ends_every_target_in_the_last_column():
    items = [
        {"input_ids": [5, 6, 7, 8, 9, 1, 2], "labels": [IGNORE] * 5 + [1, 2], "letter": 0},
        {"input_ids": [5, 6, 7, 3, 3, 3, 9, 4, 2], "labels": [IGNORE] * 7 + [4, 2], "letter": 2},
    ]
    batch = collate(items, pad_id=0)
    assert batch["prefix"].tolist() == [5, 6, 7]
    assert batch["input_ids"].tolist() == [[0, 0, 8, 9, 1, 2], [3, 3, 3, 9, 4, 2]]
    assert batch["attention_mask"].tolist() == [[0, 0, 1, 1, 1, 1], [1] * 6]
    assert batch["labels"][:, -2:].tolist() == [[1, 2], [4, 2]] and (batch["labels"][:, :-2] == IGNORE).all()
    assert batch["letter"].tolist() == [0, 2]
    # the prefix stops before the last prompt token, whose logits predict the first target token
    alone = collate(items[:1], pad_id=0)
    assert alone["prefix"].tolist() == [5, 6, 7, 8] and alone["input_ids"].tolist() == [[9, 1, 2]]
    assert collate(items, pad_id=0, share_prefix=False)["prefix"].numel() == 0


# -- data ---------------------------------------------------------------------------------------------------


def test_datamodule_trains_and_selects_on_the_training_split_only(tokenizer):
    data = QADataset(name="tatqa", questions="tatqa/tatqa_dataset_dev.json", format="tatqa")
    dm = SourceRouterDataModule(data, val_fraction=0.2)
    dm.setup("fit")
    train, evaluation = split_by_context(data.examples, 0.5, 0)
    held_out = {ex.id for ex in evaluation}
    fit, val = ({item["id"] for item in dm.sets[name]} for name in ("fit", "val"))
    assert fit and val and not fit & val
    assert not (fit | val) & held_out
    assert fit | val == {ex.id for ex in train} == {ex.id for ex in dm.trained_on}
    letters = {ex.id: TATQA.letter_of({"table": ("table",), "text": ("text",), "table-text": ("table", "text")}[
        ex.metadata["answer_from"]]) for ex in train}  # fmt: skip
    assert all(TATQA.letters[item["letter"]] == letters[item["id"]] for item in dm.sets["fit"])


def test_datamodule_refuses_a_split_that_leaks_evaluation_questions(monkeypatch):
    data = stand_in_data()
    monkeypatch.setattr(training, "split_by_context", lambda examples, *a: (examples, examples[:2]))
    with pytest.raises(LeakError):
        SourceRouterDataModule(data).setup("fit")


def crag_questions() -> list[QAExample]:
    """Eight CRAG-like questions of the training portion (`split` 1, ids t*) and three of the validation
    portion (`split` 0, ids e*), one bucket."""
    return [QAExample(f"{'t' if split else 'e'}{i}", f"Question {i} of split {split}?", [f"gold {i}"], type="simple",
                      metadata={"domain": "movie", "static_or_dynamic": "static", "split": split})
            for split, n in ((1, 8), (0, 3)) for i in range(n)]  # fmt: skip


def test_router_split_evaluates_on_crags_validation_portion_and_drops_training_twins():
    examples = crag_questions()
    twin = QAExample("t8", "question 0 of split 0?", ["x"], metadata={"split": 1})  # e0's text, other case
    train, evaluation = router_split([*examples, twin], eval_split=0)
    assert [ex.id for ex in evaluation] == ["e0", "e1", "e2"]
    assert [ex.id for ex in train] == [f"t{i}" for i in range(8)]  # the twin is dropped, evaluation stays whole
    assert router_split(examples) == split_by_context(examples, 0.5, 0)  # no eval_split: by context, as before
    with pytest.raises(ValueError, match="no `split` field"):
        router_split([*examples, QAExample("q", "Where?", ["x"])], eval_split=0)


def test_outcome_labels_come_from_the_training_split_only_as_option_letters(tokenizer):
    replies = {**{(f"t{i}", ("web",)): f"gold {i}" for i in (0, 2, 4, 6)}, ("t1", ("api",)): "gold 1",
               **{(f"t{i}", ("llm",)): f"gold {i}" for i in (0, 3, 6)}}  # fmt: skip
    asked: list = []
    configs = [("web",), ("api",), ("llm",)]

    def labeller(train):
        return label_by_outcomes(train, configs, lambda c: FakeMethod(c, replies, asked), {c: "s" for c in configs},
                                 OutcomeCache(None))  # fmt: skip

    dm = SourceRouterDataModule(SimpleNamespace(examples=crag_questions()), options="crag_single", labels="outcome",
                                labeller=labeller, eval_split=0, val_fraction=0.25)  # fmt: skip
    dm.setup("fit")
    assert {qid for _, qid in asked} == {f"t{i}" for i in range(8)}  # the validation portion is never answered
    letters = {item["id"]: CRAG_SINGLE.letters[item["letter"]] for items in dm.sets.values() for item in items}
    # api > web > llm; t5 and t7, right nowhere, take their bucket's best source (web: 4 right, llm 3, api 1)
    assert letters == {"t0": "a", "t1": "b", "t2": "a", "t3": "c", "t4": "a", "t5": "a", "t6": "a", "t7": "a"}
    assert dm.sets["val"] and dm.label_summary["backoff"] == 2
    with pytest.raises(ValueError, match="needs a labeller"):
        SourceRouterDataModule(SimpleNamespace(examples=[]), labels="outcome")
    with pytest.raises(ValueError, match="labels must be one of"):
        SourceRouterDataModule(SimpleNamespace(examples=[]), labels="silver")


def test_datamodule_drops_examples_over_max_length(tiny_base):
    dm = SourceRouterDataModule(stand_in_data(), tokenizer=tiny_base, val_fraction=0.25)
    dm.setup("fit")
    longest = max(len(item["input_ids"]) for items in dm.sets.values() for item in items)
    short = SourceRouterDataModule(stand_in_data(), tokenizer=tiny_base, val_fraction=0.25, max_length=longest - 1)
    short.setup("fit")
    kept = [len(item["input_ids"]) for items in short.sets.values() for item in items]
    assert kept and max(kept) < longest and len(kept) < sum(len(items) for items in dm.sets.values())


# -- the module ---------------------------------------------------------------------------------------------


def test_the_shared_prefix_gives_the_loss_and_gradients_of_whole_sequences(tiny_base, capsys):
    module = tiny_module(tiny_base)
    total = sum(p.numel() for p in module.net.parameters())
    adapter = sum(p.numel() for p in module.net.parameters() if p.requires_grad)
    assert 0 < adapter < total  # the LoRA adapter trains, the base stays frozen: the start line says both
    assert f"source router: {total:,} parameters, {adapter:,} trainable; LoRA on" in capsys.readouterr().out
    dm = SourceRouterDataModule(stand_in_data(), tokenizer=tiny_base, val_fraction=0.25)
    dm.setup("fit")
    items, pad = dm.sets["fit"][:6], dm.tokenizer.pad_token_id
    torch.manual_seed(0)
    for p in module.net.parameters():  # LoRA B starts at 0: move it so every adapter weight gets a gradient
        if p.requires_grad:
            p.data.normal_(0, 0.1)
    results = []
    for share in (True, False):
        batch = collate(items, pad, share_prefix=share)
        assert (batch["prefix"].numel() > 0) == share
        module.zero_grad()
        loss, answer = module.loss(batch)
        loss.backward()
        grads = [p.grad.clone() for p in module.net.parameters() if p.requires_grad]
        results.append((loss.detach(), answer.detach(), grads))
    (l1, a1, g1), (l0, a0, g0) = results
    assert torch.allclose(l1, l0, atol=1e-5) and torch.allclose(a1, a0, atol=1e-4)
    assert all(torch.allclose(x, y, atol=1e-5) for x, y in zip(g1, g0))


def test_balanced_class_weights_weigh_each_question_by_its_gold_letter(tiny_base):
    dm = SourceRouterDataModule(stand_in_data(), tokenizer=tiny_base, val_fraction=0.25)
    dm.setup("fit")
    module = tiny_module(tiny_base, class_weights="balanced")
    module._trainer = SimpleNamespace(datamodule=dm)
    module.setup("fit")
    counts = torch.bincount(torch.tensor([item["letter"] for item in dm.sets["fit"]]), minlength=3).float()
    assert torch.allclose(module.weights, counts.sum() / (3 * counts))
    items, pad = dm.sets["fit"], dm.tokenizer.pad_token_id
    module.weights.copy_(torch.tensor([1.0, 0.0, 0.0]))  # only the "table" questions count
    with torch.no_grad():
        weighted, _ = module.loss(collate(items, pad), weighted=True)
        table_only, _ = module.loss(collate([i for i in items if i["letter"] == 0], pad))
        unweighted, _ = module.loss(collate(items, pad))
    assert torch.allclose(weighted, table_only, atol=1e-5) and not torch.allclose(weighted, unweighted)


def test_checkpoints_hold_the_adapter_only_and_load_back(tiny_base):
    module = tiny_module(tiny_base)
    checkpoint = {"state_dict": module.state_dict()}
    module.on_save_checkpoint(checkpoint)
    saved = checkpoint["state_dict"]
    assert saved and all("lora_" in key for key in saved)
    assert set(saved) == {f"net.{n}" for n, p in module.net.named_parameters() if p.requires_grad}
    other = tiny_module(tiny_base)
    other.load_state_dict({k: v + 1 for k, v in saved.items()})  # what train.py's export_best does
    assert all(torch.equal(other.state_dict()[k], v + 1) for k, v in saved.items())
    with pytest.raises(RuntimeError, match="missing"):
        other.load_state_dict(dict(list(saved.items())[1:]))


def test_schedule_warms_up_then_anneals_to_zero_by_steps_or_by_the_time_budget(tiny_base):
    module = tiny_module(tiny_base, lr=1.0, warmup_ratio=0.1, train_minutes=10)
    module._trainer = SimpleNamespace(estimated_stepping_batches=100, should_stop=False)
    factor = module.configure_optimizers()["lr_scheduler"]["scheduler"].lr_lambdas[0]
    assert factor(0) == pytest.approx(0.1) and factor(9) == pytest.approx(1.0)
    assert factor(55) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.5))) and factor(100) == pytest.approx(0.0)
    [budget] = module.configure_callbacks()  # hoprag.training.budget, given to the trainer
    budget.started = time.monotonic() - 5 * 60  # half the budget spent: half-way through the schedule at step 0
    assert factor(0) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.4 / 0.9)), abs=1e-3)
    budget.started = time.monotonic() - 10 * 60  # the budget is spent
    assert factor(20) == pytest.approx(0.0)


def test_two_training_steps_export_an_adapter_that_hfllm_serves(tiny_base, tmp_path):
    L.seed_everything(0)
    dm = SourceRouterDataModule(stand_in_data(), tokenizer=tiny_base, val_fraction=0.25, batch_size=4)
    module = tiny_module(tiny_base, lr=0.05)
    trainer = L.Trainer(max_steps=2, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, num_sanity_val_steps=0)  # fmt: skip
    trainer.fit(module, datamodule=dm)
    assert {"train/loss", "val/acc", "val/macro_f1", "val/letter_top1"} <= set(trainer.callback_metrics)
    module.export(tmp_path / "export")
    settings = json.loads((tmp_path / "export" / SETTINGS_FILE).read_text())
    assert settings["base_model"] == tiny_base and settings["options"] == "tatqa"
    assert settings["none_policy"] == "api" and settings["prompt_version"] == prompt_version(TATQA)
    assert {r["id"] for r in settings["trained_on"]} == {ex.id for ex in dm.trained_on}
    adapter_config = json.loads((tmp_path / "export" / "adapter_config.json").read_text())
    assert adapter_config["r"] == 4 and adapter_config["base_model_name_or_path"] == tiny_base
    router = LLMRouter(HFLLM(model=tiny_base, adapter=str(tmp_path / "export")), options="tatqa")  # its contract holds
    assert {ex.id for ex in router.trained_on} == {ex.id for ex in dm.trained_on}

    base = HFLLM(model=tiny_base, device="cpu", prefill="each")
    tuned = HFLLM(model=tiny_base, device="cpu", prefill="each", adapter=str(tmp_path / "export"))
    prompts = [TATQA.messages(QUESTION)]
    [[g_base]] = base.generate(prompts, max_new_tokens=3)
    [[g_tuned]] = tuned.generate(prompts, max_new_tokens=3)
    assert g_base.logprobs != pytest.approx(g_tuned.logprobs, abs=1e-3)  # the adapter changes the model
    assert tuned.name.endswith("+export") and "adapter=" in repr(tuned)
    assert "adapter_sha=" in tuned.identity() and tuned.identity() != base.identity()

    # merged into the float32 weights: the outputs of the unmerged adapter
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    unmerged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_base), tmp_path / "export").eval()
    ids = torch.tensor([tuned.prompt_ids(prompts[0])])
    with torch.no_grad():
        assert torch.allclose(tuned.hf_model(ids).logits, unmerged(ids).logits, atol=1e-5)


def test_identity_follows_the_adapter_content(tiny_base, tmp_path):
    module = tiny_module(tiny_base)
    module.export(tmp_path / "a")
    before = HFLLM(model=tiny_base, adapter=str(tmp_path / "a")).identity()
    for p in module.net.parameters():
        if p.requires_grad:
            p.data.add_(0.01)
    module.export(tmp_path / "a")  # retrained in place: same path, new weights
    assert HFLLM(model=tiny_base, adapter=str(tmp_path / "a")).identity() != before


def test_a_bf16_model_keeps_the_adapter_unmerged(tiny_base, tmp_path):
    from peft import PeftModel

    tiny_module(tiny_base).export(tmp_path / "a")
    tuned = HFLLM(model=tiny_base, device="cpu", dtype="bfloat16", adapter=str(tmp_path / "a"))
    assert isinstance(tuned.hf_model, PeftModel)  # merging would round the update into bf16 weights
    [[g]] = tuned.generate([TATQA.messages(QUESTION)], max_new_tokens=2)
    assert g.completion_tokens >= 1
    merged = HFLLM(model=tiny_base, device="cpu", adapter=str(tmp_path / "a")).hf_model
    assert not isinstance(merged, PeftModel)


# -- configs ------------------------------------------------------------------------------------------------


def test_source_router_config_composes_with_the_spec_settings(compose_cfg):
    cfg = compose_cfg("train", ["+model=router_tatqa"])
    module = cfg.model.module
    assert module._target_ == "hoprag.routers.training.SourceRouterModule"
    assert (module.lora.r, module.lora.lora_alpha, module.lora.lora_dropout) == (16, 32, 0.05)
    assert set(module.lora.target_modules) == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                               "down_proj"}  # fmt: skip
    assert module.warmup_ratio == 0.03 and cfg.model.datamodule.max_length == 512
    assert cfg.model.monitor == "val/macro_f1" and cfg.trainer.max_epochs == 3 and cfg.threads == 1
    dm = instantiate(cfg.model.datamodule)
    assert isinstance(dm, SourceRouterDataModule) and dm.options is TATQA and dm.batch_size == 16
    assert dm.labels == "gold" and dm.eval_split is None  # TAT-QA: gold labels, split by context


def test_crag_router_config_labels_from_outcomes_of_the_pruningrag_settings(compose_cfg, tmp_path):
    cfg = compose_cfg("train", ["+model=source_router_crag"])
    dm_cfg = cfg.model.datamodule
    assert cfg.model.module.options == "crag_single" and dm_cfg.labels == "outcome" and dm_cfg.eval_split is None
    labeller = dm_cfg.labeller
    assert labeller.method._target_ == "hoprag.methods.PruningRAG" and labeller.method.sources.api is None
    assert labeller.method.sources.web._target_ == "hoprag.sources.WebSource"
    assert labeller.llm.name == "smollm2-135m-instruct" and list(labeller.priority) == ["api", "web", "llm"]
    assert labeller.judge._target_ == "hoprag.evaluation.judges.NormalizedMatchJudge"
    assert cfg.model.monitor == "val/macro_f1" and cfg.model.module.lora.r == 16  # router_tatqa.yaml's recipe
    dm = instantiate(dm_cfg)
    cache = tmp_path / "cache" / "router_outcomes" / CACHE_FILE
    assert isinstance(dm.labeller, OutcomeLabeller) and dm.labeller.cache_path == cache
    assert not dm.labeller.available(("api",)) and dm.labeller.available(("web",))
    # end to end on the bundled sample (all `split` 1: half held out by context), the LLM-only answers of a
    # scripted LLM; the export's provenance names the stand-in judge
    cfg = compose_cfg("train", ["+model=source_router_crag", "llm@model.datamodule.labeller.llm=scripted",
                                "model.datamodule.labeller.configurations=[[llm],[api]]"])  # fmt: skip
    dm = instantiate(cfg.model.datamodule)
    dm.setup("fit")
    assert dm.label_summary["questions"] == 5 and dm.label_summary["unavailable"] == ["api"]
    assert {item["letter"] for items in dm.sets.values() for item in items} == {CRAG_SINGLE.letters.index("c")}
    assert len(cache.read_text().splitlines()) == 5
    assert dm.labelled_by == {"labels": "outcome", "judge": "rule", "answering_llm": "scripted",
                              "configurations": [["llm"], ["api"]]}  # fmt: skip


def test_the_papers_router_recipe_labels_crag_outcomes_with_the_papers_models_and_judge(compose_cfg):
    """§5.1, §5.3, P5: outcome labels on CRAG's router-training portion (split 0 held out) answered by PruningRAG with
    the paper's settings and judged by CRAG's prompt on gpt-6-luna (the paper's GPT-3.5-Turbo is retired), then §5.3's
    LoRA of Llama-3.1-8B-Instruct on crag_single."""
    cfg = compose_cfg("train", ["+experiment=pruningrag_router_paper"])
    module, dm = cfg.model.module, cfg.model.datamodule
    assert module.base_model == "meta-llama/Llama-3.1-8B-Instruct" and module.options == "crag_single"
    assert module.lr == 1e-4 and module.class_weights is None and module.train_minutes is None and module.lora.r == 16
    assert dm.data.questions == "crag/crag_task_1_and_2_dev_v4.jsonl.bz2" and dm.eval_split == 0
    assert dm.labels == "outcome" and dm.labeller.llm._target_ == "hoprag.llm.VLLMLLM"
    assert dm.labeller.llm.model == module.base_model and dm.labeller.method.generation.max_new_tokens == 500
    assert dm.labeller.method.sources.web.embedder.model == "BAAI/bge-m3"
    assert dm.labeller.method.sources.api._target_ == "hoprag.sources.APISource" and dm.labeller.method.domain == "llm"
    assert dm.labeller.judge.llm.model == "gpt-6-luna" and cfg.trainer.accelerator == "gpu"
    assert dm.batch_size * cfg.trainer.accumulate_grad_batches == 16 and cfg.trainer.max_epochs == 3
    assert cfg.model.publish_dir.endswith("routers/llama8b-crag-lora")


def test_llama8b_experiment_is_the_spec_recipe_on_a_gpu(compose_cfg):
    cfg = compose_cfg("train", ["+experiment=router_tatqa_llama8b"])
    module = cfg.model.module
    assert module.base_model == "meta-llama/Llama-3.1-8B-Instruct" and module.dtype == "bfloat16"
    assert module.lr == 1e-4 and module.class_weights is None and module.train_minutes is None and module.lora.r == 16
    assert cfg.trainer.accelerator == "gpu" and cfg.trainer.precision == "bf16-mixed" and cfg.trainer.max_epochs == 3
    assert cfg.model.datamodule.batch_size * cfg.trainer.accumulate_grad_batches == 16
