"""LoRA SFT of an LLM source router: `python train.py +model=source_router_crag` (CRAG) or `+model=router_tatqa` (spec/pruningrag.md §5.3).

The router reads the option set's prompt (chat template, the question alone) and is taught to answer with
the target option letter and the end-of-turn token; the loss covers those target tokens only (prompt labels
-100). Examples come from the router-training split (`router_split`: `split_by_context`, or the dataset's own
split field, CRAG's `split`); their labels are TAT-QA's gold `answer_from` (`labels=gold`) or the paper's
judged outcomes (`labels=outcome`: `hoprag.routers.outcomes` answers every training question once per source
and labels it with the sources that answered correctly; run by `prepare_data`, which train.py calls before it
builds the base model, the labelling models released when it ends). A context-disjoint slice of that split selects the
checkpoint, and the router-evaluation split is never loaded, answered or labelled (`check_disjoint` guards
it). `val/acc` and `val/macro_f1` read the letter the model ranks first among the option letters' first tokens
at the answer position: one forward pass, the exact choice of greedy decoding restricted to the options
(`val/letter_top1` is how often the unrestricted argmax is an option letter at all, i.e. how often greedy
decoding would start with one).

Two exact savings make a CPU run fit its budget. Every prompt of a batch starts with the same tokens (system
message, instructions, options): that prefix is run once per batch and its key/value cache repeated over the
batch, with gradients flowing through it (`share_prefix`; the loss is the same as running every sequence whole,
tested). Logits are computed at the target positions only. A wall-clock budget (`train_minutes`,
`hoprag.training.budget`) ends training early, the cosine schedule annealed to it, as the NLI verifier's.
`class_weights="balanced"` weighs each question's target tokens by the inverse frequency of its gold letter
(our choice, as the classifier router's: without it a small model sits on the majority letter). Checkpoints
hold the adapter weights only.
`export(dir)` writes the peft adapter (`save_pretrained`) and `router.json` (base model, option set,
none policy, prompt version, the questions trained on); `HFLLM(model=base, adapter=dir)` serves it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import lightning as L
import torch
from torch.utils.data import DataLoader

from hoprag.data.dataset import QADataset
from hoprag.data.heldout import context_of, question_key
from hoprag.data.types import QAExample
from hoprag.llm.hf import DEFAULT_MODEL
from hoprag.llm.tokenizer import load_tokenizer, render_prompt
from hoprag.metrics.routing import accuracy, macro_f1
from hoprag.routers.labels import gold_labels
from hoprag.routers.options import OptionSet, prompt_version
from hoprag.routers.outcomes import OutcomeRun
from hoprag.routers.router import check_none_policy, option_set
from hoprag.training.budget import WallClockBudget
from hoprag.training.distributed import device_batch, from_rank_zero, report, whole_set
from hoprag.training.exports import SETTINGS_FILE, question_record
from hoprag.training.sampler import LengthGroupedSampler
from hoprag.training.splits import check_disjoint, split_by_context
from hoprag.training.summary import parameter_line

LABELS = ("gold", "outcome")
IGNORE = -100
# §5.3 (our choice; the paper gives none): r 16, alpha 32, dropout 0.05 on every attention and MLP projection
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05,
        "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}  # fmt: skip


def sft_example(tokenizer: Any, options: OptionSet, question: str, letter: str) -> tuple[list[int], list[int]]:
    """(input_ids, labels): the prompt exactly as `HFLLM` renders it for generation, then the assistant's
    reply as the chat template writes it (the letter) and the end-of-turn token; labels are -100 on the prompt."""
    messages = options.messages(question)
    prompt_text, templated = render_prompt(tokenizer, messages)
    prompt = list(tokenizer(prompt_text, add_special_tokens=not templated)["input_ids"])
    full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": letter}], tokenize=False)
    eos = tokenizer.eos_token
    if not full.startswith(prompt_text) or eos not in full[len(prompt_text) :]:
        raise ValueError(f"the chat template does not write the reply after the generation prompt and end it "
                         f"with {eos!r}: cannot tell the target tokens")  # fmt: skip
    reply = full[len(prompt_text) :].split(eos)[0]
    target = [*tokenizer(reply, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
    return prompt + target, [IGNORE] * len(prompt) + target


def letter_token_ids(tokenizer: Any, options: OptionSet) -> list[int]:
    """The first target token of each option letter, in `options.letters` order (they must differ)."""
    firsts = []
    for letter in options.letters:
        _, labels = sft_example(tokenizer, options, "?", letter)
        firsts.append(next(t for t in labels if t != IGNORE))
    if len(set(firsts)) != len(firsts):
        raise ValueError(f"the option letters {options.letters} share a first token: val/acc cannot tell them apart")
    return firsts


def collate(items: Sequence[Mapping[str, Any]], pad_id: int, share_prefix: bool = True) -> dict[str, torch.Tensor]:
    """One batch: the prompt prefix every item shares (`prefix`, empty without `share_prefix`), then each item's
    rest, left-padded so every target ends in the last column. The prefix stops before the first answer
    position, so every item keeps the logits that predict its target tokens."""
    seqs = [list(item["input_ids"]) for item in items]
    limit = min(next(i for i, t in enumerate(item["labels"]) if t != IGNORE) for item in items) - 1
    shared = 0
    if share_prefix:
        while shared < limit and all(s[shared] == seqs[0][shared] for s in seqs):
            shared += 1
    width = max(len(s) for s in seqs) - shared
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    labels = torch.full((len(seqs), width), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, (seq, item) in enumerate(zip(seqs, items)):
        rest = len(seq) - shared
        ids[row, width - rest :] = torch.tensor(seq[shared:])
        labels[row, width - rest :] = torch.tensor(item["labels"][shared:])
        mask[row, width - rest :] = 1
    return {
        "prefix": torch.tensor(seqs[0][:shared], dtype=torch.long),
        "input_ids": ids,
        "attention_mask": mask,
        "labels": labels,
        "letter": torch.tensor([item["letter"] for item in items], dtype=torch.long),
    }


def router_split(
    examples: Sequence[QAExample], eval_fraction: float = 0.5, seed: int = 0, eval_split: int | None = None
) -> tuple[list[QAExample], list[QAExample]]:
    """(router-training, router-evaluation) questions (P5). `eval_split` null: `split_by_context`. Else the
    dataset's own `split` field decides (CRAG: 0 = the validation portion, the evaluation set): evaluation is
    every question of that split, training the others less any that shares an id, context or question text
    with an evaluation question (dropped: the evaluation set stays whole). Either way `check_disjoint` runs."""
    if eval_split is None:
        return split_by_context(examples, eval_fraction, seed)
    unsplit = [ex.id for ex in examples if "split" not in ex.metadata]
    if unsplit:
        raise ValueError(f"eval_split={eval_split}: {len(unsplit)} questions have no `split` field (e.g. "
                         f"{unsplit[0]!r}); use eval_split=null to split by context")  # fmt: skip
    evaluation = [ex for ex in examples if ex.metadata["split"] == eval_split]
    held_out = set().union(*(_shared_keys(ex) for ex in evaluation))
    train = [ex for ex in examples if ex.metadata["split"] != eval_split and not _shared_keys(ex) & held_out]
    check_disjoint(train, evaluation)
    return train, evaluation


def _shared_keys(example: QAExample) -> set[tuple[str, str]]:
    """What `check_disjoint` refuses to see in both splits: the id, the context, the question text."""
    return {("id", example.id), ("context", context_of(example)), ("question", question_key(example))}


class SourceRouterDataModule(L.LightningDataModule):
    """(router prompt → target option letter) examples of the router-training split: `fit` trains, its
    context-disjoint `val_fraction` slice selects. The router-evaluation split is only split off, never kept.
    `labels`: `gold` (TAT-QA's `answer_from`) or `outcome` (`labeller(train questions)`, an `OutcomeLabeller`;
    its counts are kept in `label_summary`); `eval_split`: see `router_split`."""

    def __init__(
        self,
        data: QADataset,
        tokenizer: str = DEFAULT_MODEL,
        options: str = "tatqa",
        eval_fraction: float = 0.5,
        split_seed: int = 0,
        val_fraction: float = 0.2,
        batch_size: int = 16,
        eval_batch_size: int = 32,
        max_length: int = 512,
        share_prefix: bool = True,
        length_grouped: bool = True,
        cache_dir: str | None = None,
        seed: int = 0,
        labels: str = "gold",
        labeller: Callable[[Sequence[QAExample]], OutcomeRun] | None = None,
        eval_split: int | None = None,
    ) -> None:
        super().__init__()
        if labels not in LABELS:
            raise ValueError(f"labels must be one of {LABELS}, got {labels!r}")
        if labels == "outcome" and labeller is None:
            raise ValueError("labels=outcome needs a labeller (hoprag.routers.outcomes.OutcomeLabeller)")
        self.labels, self.labeller, self.eval_split = labels, labeller, eval_split
        self.label_summary: dict[str, Any] = {}
        # how the labels were made, written into the export: gold labels, or outcomes (judge, answering LLM)
        provenance = getattr(labeller, "provenance", None)  # OutcomeLabeller's; a bare callable says no more
        self.labelled_by: dict[str, Any] = (
            {"labels": labels} if labels == "gold" or provenance is None else provenance()
        )
        self.data = data
        self.tokenizer_ref = tokenizer
        self.cache_dir = cache_dir
        self.options = option_set(options)
        self.eval_fraction = eval_fraction
        self.split_seed = split_seed
        self.val_fraction = val_fraction
        self.batch_size = batch_size
        self.eval_batch_size = eval_batch_size
        self.max_length = max_length
        self.share_prefix = share_prefix
        self.length_grouped = length_grouped
        self.seed = seed
        self.sets: dict[str, list[dict[str, Any]]] = {}
        self.trained_on: list[QAExample] = []
        self.prepare_data_per_node = False  # the labels are read on global rank 0 alone (`setup`)

    @property
    def tokenizer(self) -> Any:
        return load_tokenizer(self.tokenizer_ref, self.cache_dir)

    def prepare_data(self) -> None:
        """The tokenizer (a GGUF's converted folder, cached) and, with `labels=outcome`, the labelling run over the
        training split (its answers and outcomes cached), once, then the labeller's models released: train.py calls
        this before it builds the router's base model and before DDP starts its other processes, so the labelling
        engine and the model being trained never share a GPU, and no process group is open while an engine runs."""
        load_tokenizer(self.tokenizer_ref, self.cache_dir)
        if self.labels == "outcome":
            self.labeller(router_split(self.data.examples, self.eval_fraction, self.split_seed, self.eval_split)[0])
            if release := getattr(self.labeller, "release", None):  # OutcomeLabeller's; a bare callable holds nothing
                release()

    def setup(self, stage: str | None = None) -> None:
        if self.sets:
            return
        examples = self.data.examples
        train, evaluation = router_split(examples, self.eval_fraction, self.split_seed, self.eval_split)
        fit, val = split_by_context(train, self.val_fraction, self.split_seed)
        check_disjoint([*fit, *val], evaluation)
        check_disjoint(fit, val)
        self.trained_on = train  # fit and selection questions both shape the exported adapter
        if leaked := len(examples) - len(train) - len(evaluation):
            report(f"router split: {leaked} training questions dropped as they share a context or text with "
                   f"an evaluation question")  # fmt: skip
        target = self._labels(train)  # the training split only: evaluation questions are never answered
        lengths = []
        for name, part in (("fit", fit), ("val", val)):
            items = []
            for ex in part:
                letter = self.options.letter_of(target[ex.id])
                ids, labels = sft_example(self.tokenizer, self.options, ex.question, letter)
                items.append({"id": ex.id, "input_ids": ids, "labels": labels,
                              "letter": self.options.letters.index(letter)})  # fmt: skip
            lengths += [len(item["input_ids"]) for item in items]
            self.sets[name] = [item for item in items if len(item["input_ids"]) <= self.max_length]
            if not self.sets[name]:
                raise ValueError(f"no {name} example fits max_length={self.max_length} (longest {max(lengths)})")
        counts = {name: len(items) for name, items in self.sets.items()}
        dropped = len(lengths) - sum(counts.values())
        report(f"router SFT data: {counts} questions (fit / select; {len(evaluation)} held out for evaluation), "
               f"options {self.options.name}, {min(lengths)}-{max(lengths)} tokens, "
               f"{dropped} dropped over max_length {self.max_length}")  # fmt: skip

    def _labels(self, train: Sequence[QAExample]) -> dict[str, tuple[str, ...]]:
        """Each training question's target sources, by id; outcome labels read on global rank 0 alone (from the
        labelling run of `prepare_data`) and handed to the other ranks."""
        if self.labels == "gold":
            return {ex.id: sources for ex, sources in zip(train, gold_labels(train))}
        run = from_rank_zero(self.trainer, lambda: self.labeller(train))
        self.label_summary = run.summary
        report(f"router labels from outcomes: {json.dumps(run.summary)}")
        return {ex.id: label for ex, label in zip(train, run.labels)}

    def _collate(self, items: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        tok = self.tokenizer
        return collate(items, tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id, self.share_prefix)

    def train_dataloader(self) -> DataLoader:
        """`batch_size` questions a step over all devices (Lightning shards them, or the length-grouped batches,
        under DDP)."""
        items = self.sets["fit"]
        batch_size = device_batch(self.batch_size, self.trainer, "questions")
        if self.length_grouped:  # less padding: the questions, not the shared prompt, set a batch's width
            lengths = [len(item["input_ids"]) for item in items]
            sampler = LengthGroupedSampler(lengths, batch_size, seed=self.seed)
            return DataLoader(items, batch_sampler=sampler, collate_fn=self._collate)
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(items, batch_size, shuffle=True, generator=generator, collate_fn=self._collate)

    def val_dataloader(self) -> DataLoader:
        val = self.sets["val"]
        return DataLoader(val, self.eval_batch_size, sampler=whole_set(val), collate_fn=self._collate)


class SourceRouterModule(L.LightningModule):
    """A causal LM with peft LoRA adapters, trained on the target tokens of router SFT batches (`collate`)."""

    def __init__(
        self,
        base_model: str = DEFAULT_MODEL,
        options: str = "tatqa",
        none_policy: str = "api",
        lora: Mapping[str, Any] | None = None,
        lr: float = 1e-4,
        weight_decay: float = 0.0,
        warmup_ratio: float = 0.03,
        train_minutes: float | None = None,
        class_weights: str | None = None,
        dtype: str = "float32",
        cache_dir: str | None = None,
    ) -> None:
        super().__init__()
        check_none_policy(none_policy)
        if class_weights not in (None, "balanced"):
            raise ValueError(f"class_weights must be 'balanced' or null, got {class_weights!r}")
        self.save_hyperparameters(logger=False)
        from peft import LoraConfig, TaskType, get_peft_model

        from hoprag.llm.hf_loading import load_causal_lm

        self.option_set = option_set(options)
        loaded = load_causal_lm(base_model, dtype, "cpu", cache_dir, shared=False)  # Lightning moves it
        self.tokenizer = loaded.tokenizer
        config = LoraConfig(task_type=TaskType.CAUSAL_LM, **dict(LORA if lora is None else lora))
        self.net = get_peft_model(loaded.model, config)
        self.net.train()  # from_pretrained returns eval mode, and Lightning keeps a submodule's mode
        report(parameter_line("source router", self.net, detail=f"; LoRA on {base_model}"))
        self.letter_ids = letter_token_ids(self.tokenizer, self.option_set)
        self.register_buffer("weights", torch.ones(len(self.option_set.letters)), persistent=False)
        self.strict_loading = False  # checkpoints hold the adapter only (on_save_checkpoint)
        self.trained_on: list[dict[str, str]] = []
        self.labelled_by: dict[str, Any] = {}
        self._seen: dict[str, list[list[int]]] = {}
        self.budget = WallClockBudget(train_minutes)

    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)  # set up before the module (Lightning's order)
        if datamodule is not None:
            self.trained_on = [question_record(ex) for ex in datamodule.trained_on]
            self.labelled_by = dict(datamodule.labelled_by)
            if self.hparams.class_weights == "balanced":
                letters = torch.tensor([item["letter"] for item in datamodule.sets["fit"]])
                counts = torch.bincount(letters, minlength=len(self.weights)).float()
                balanced = torch.where(counts > 0, counts.sum() / (len(counts) * counts.clamp(min=1)), 0.0)
                self.weights.copy_(balanced)

    def target_logits(self, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Logits at the positions that predict the last `T` columns (T = the batch's longest target), shape
        [batch, T, vocab]: the shared prefix once, its key/value cache repeated over the batch, then the rest."""
        ids, mask, prefix = batch["input_ids"], batch["attention_mask"], batch["prefix"]
        rows, shared = ids.shape[0], prefix.numel()
        width = int((batch["labels"] != IGNORE).sum(1).max())
        kwargs: dict[str, Any] = {}
        if shared:
            cache = self.net(input_ids=prefix[None], use_cache=True, logits_to_keep=1).past_key_values
            cache.batch_repeat_interleave(rows)
            kwargs["past_key_values"] = cache
            mask = torch.cat([mask.new_ones(rows, shared), mask], dim=1)
        positions = (batch["attention_mask"].cumsum(1) - 1).clamp(min=0) + shared
        out = self.net(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=bool(shared),
                       logits_to_keep=width + 1, **kwargs)  # fmt: skip
        return out.logits[:, :-1]

    def loss(self, batch: Mapping[str, torch.Tensor], weighted: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean cross-entropy over the target tokens, logits at each item's answer position); `weighted`: each
        item's tokens weigh its gold letter's class weight (all 1 unless `class_weights`)."""
        logits = self.target_logits(batch).float()
        labels = batch["labels"][:, -logits.shape[1] :]
        token_loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels, ignore_index=IGNORE,
                                                       reduction="none")  # fmt: skip
        weight = (labels != IGNORE).float()
        if weighted:
            weight = weight * self.weights[batch["letter"]][:, None]
        first = (labels != IGNORE).int().argmax(1)  # each item's first target column
        return (token_loss * weight).sum() / weight.sum(), logits[torch.arange(len(labels)), first]

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss, _ = self.loss(batch, weighted=True)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["letter"]))
        return loss

    def validation_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> None:
        loss, answer = self.loss(batch)
        self.log("val/loss", loss, batch_size=len(batch["letter"]))
        letters = torch.tensor(self.letter_ids, device=answer.device)
        gold, pred, top1 = self._seen.setdefault("val", [[], [], []])
        gold += batch["letter"].tolist()
        pred += answer[:, letters].argmax(-1).tolist()
        top1 += torch.isin(answer.argmax(-1), letters).int().tolist()

    def on_validation_epoch_end(self) -> None:
        gold, pred, top1 = self._seen.pop("val", [[], [], []])
        if gold:
            classes = range(len(self.option_set.letters))
            self.log("val/acc", accuracy(gold, pred), prog_bar=True)
            self.log("val/macro_f1", macro_f1(gold, pred, classes), prog_bar=True)
            self.log("val/letter_top1", sum(top1) / len(top1))

    def configure_callbacks(self) -> list[L.Callback]:
        return [self.budget]

    def configure_optimizers(self) -> dict[str, Any]:
        params = [p for p in self.net.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)
        total = max(1, int(self.trainer.estimated_stepping_batches))
        schedule = self.budget.schedule(optimizer, total, self.hparams.warmup_ratio, "cosine")
        return {"optimizer": optimizer, "lr_scheduler": schedule}

    def _trainable_keys(self) -> set[str]:
        return {f"net.{name}" for name, p in self.net.named_parameters() if p.requires_grad}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        keep = self._trainable_keys()
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in keep}
        checkpoint["trained_on"] = self.trained_on
        checkpoint["labelled_by"] = self.labelled_by

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.trained_on = checkpoint.get("trained_on", self.trained_on)
        self.labelled_by = checkpoint.get("labelled_by", self.labelled_by)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False) -> Any:
        """Load an adapter-only state dict (a checkpoint's) into the adapter; the frozen base stays as loaded.
        `strict` still refuses unknown keys and adapter weights that are missing."""
        missing = self._trainable_keys() - set(state_dict)
        result = super().load_state_dict(state_dict, strict=False, assign=assign)
        if strict and (missing or result.unexpected_keys):
            raise RuntimeError(f"adapter state dict: missing {sorted(missing)[:5]}, "
                               f"unexpected {sorted(result.unexpected_keys)[:5]}")  # fmt: skip
        return result

    def export(self, directory: str | Path) -> None:
        """The peft adapter (`adapter_config.json`, `adapter_model.safetensors`) and `router.json`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.net.peft_config["default"].base_model_name_or_path = self.hparams.base_model
        self.net.save_pretrained(directory, save_embedding_layers=False)  # the adapter only: no embedding is tuned
        settings = {
            "base_model": self.hparams.base_model,
            "options": self.option_set.name,
            "letters": list(self.option_set.letters),
            "none_policy": self.hparams.none_policy,
            "prompt_version": prompt_version(self.option_set),
            "trained_on": self.trained_on,
            "labelled_by": self.labelled_by,  # e.g. outcome labels judged by the offline rule aid: said by every run
        }
        (directory / SETTINGS_FILE).write_text(json.dumps(settings, indent=1, ensure_ascii=False), encoding="utf-8")
