"""Tokenizers without model weights, and the one way a prompt becomes the text a chat model reads.

Every backend counts tokens the same way (prompt budgeting, MMKP token costs): with the served model's
own tokenizer, loaded alone (a `.gguf` model's converted folder holds it, so no weights are read).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hoprag.llm.prompts import Prompt, chat_template_flags
from hoprag.utils.bundled import resolve_model_ref

_TOKENIZERS: dict[tuple[str, bool], Any] = {}
_LOCK = threading.Lock()


def load_tokenizer(
    model: str, cache_dir: str | None = None, convert_gguf: bool = True, trust_remote_code: bool = False
) -> Any:
    """The tokenizer of `model` (hub id, folder, `pkg://` reference or `.gguf` file), shared per process."""
    ref = resolve_model_ref(model)
    with _LOCK:
        key = (ref, trust_remote_code)
        if key not in _TOKENIZERS:
            from transformers import AutoTokenizer

            kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code}
            source = ref
            if ref.lower().endswith(".gguf"):
                if convert_gguf:
                    from hoprag.llm.gguf import converted_gguf

                    source = str(converted_gguf(ref, cache_dir))
                else:
                    source, kwargs["gguf_file"] = str(Path(ref).parent), Path(ref).name
            _TOKENIZERS[key] = AutoTokenizer.from_pretrained(source, **kwargs)
        return _TOKENIZERS[key]


def render_prompt(
    tokenizer: Any, prompt: Prompt, chat_template: bool = True, template_kwargs: Mapping[str, Any] | None = None
) -> tuple[str, bool]:
    """(text, templated): chat messages (and, with `chat_template`, plain strings as one user message)
    rendered with the tokenizer's chat template, a final assistant message left open (a prefill); a plain
    string is used as it is when `chat_template` is off or the tokenizer has none. A templated text already
    holds its special tokens, so it is tokenized without adding them. `template_kwargs` are the template's
    own settings (`llm.chat_template_kwargs`, e.g. Qwen3's `enable_thinking`)."""
    has_template = bool(getattr(tokenizer, "chat_template", True))  # transformers tokenizers always say
    if isinstance(prompt, str):
        if not chat_template or not has_template:
            return prompt, False
        messages = [{"role": "user", "content": prompt}]
    else:
        if not has_template:
            raise ValueError("this model's tokenizer has no chat template: pass plain-string prompts")
        messages = [dict(m) for m in prompt]
    flags = {**dict(template_kwargs or {}), **chat_template_flags(messages)}
    return tokenizer.apply_chat_template(messages, tokenize=False, **flags), True


def prompt_ids(
    tokenizer: Any, prompt: Prompt, chat_template: bool = True, template_kwargs: Mapping[str, Any] | None = None
) -> list[int]:
    """Token ids of the prompt as the model reads it (see `render_prompt`)."""
    text, templated = render_prompt(tokenizer, prompt, chat_template, template_kwargs)
    return list(tokenizer(text, add_special_tokens=not templated)["input_ids"])


def count_texts(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """Tokens of each text on its own, without special tokens (a passage inside a prompt adds none)."""
    if not texts:
        return []
    return [len(ids) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]
