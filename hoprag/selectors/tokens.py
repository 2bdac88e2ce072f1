"""Token cost of a passage: the generator's tokenizer (default) or the official 1.3 × words heuristic."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from hoprag.data.types import Passage

log = logging.getLogger(__name__)

MODES = ("tokenizer", "words")


def words_x13(text: str) -> int:
    """The official code's length: max(1, int(1.3 · whitespace words))."""
    return max(1, int(1.3 * len(text.split())))


def llm_tokenizer(llm: Any) -> Any | None:
    """The tokenizer of an LLM backend without loading its weights where possible (a GGUF model's
    converted folder holds the tokenizer); None for backends without one (scripted, OpenAI)."""
    from hoprag.llm.hf import HFLLM

    if isinstance(llm, HFLLM):
        from transformers import AutoTokenizer

        from hoprag.llm.gguf import converted_gguf
        from hoprag.utils.bundled import resolve_model_ref

        ref = resolve_model_ref(llm.model)
        if ref.lower().endswith(".gguf"):
            if not llm.convert_gguf:
                return llm.tokenizer
            ref = str(converted_gguf(ref, llm.cache_dir))
        return AutoTokenizer.from_pretrained(ref, trust_remote_code=llm.trust_remote_code)
    return getattr(llm, "tokenizer", None)


class TokenCounter:
    """Counts each passage once (cached by id) as `template` renders it ({title}, {text}).

    mode `tokenizer` uses `tokenizer` (or the one `bind(llm)` finds); when none can be had it falls back
    to the words heuristic, logs it once, and says so in `effective_mode`. mode `words` is the official
    option (text only, titles not counted, as the code does).
    """

    def __init__(self, mode: str = "tokenizer", template: str = "{title}\n{text}", tokenizer: Any = None) -> None:
        if mode not in MODES:
            raise ValueError(f"token length mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.template = template
        self.tokenizer = tokenizer
        self._bound = tokenizer is not None
        self._cache: dict[str, int] = {}

    def bind(self, llm: Any) -> None:
        """Take the generator's tokenizer (loaded on first count) unless one was given."""
        if self.mode == "tokenizer" and not self._bound:
            self._llm = llm
            self._cache.clear()

    @property
    def effective_mode(self) -> str:
        if self.mode == "words":
            return "words"
        return "tokenizer" if self._tokenizer() is not None else "words"

    def _tokenizer(self) -> Any | None:
        if not self._bound:
            llm = getattr(self, "_llm", None)
            self.tokenizer = llm_tokenizer(llm) if llm is not None else None
            self._bound = True
            if self.tokenizer is None:
                log.warning("no tokenizer (LLM %s): token costs use the 1.3 x words heuristic", llm)
        return self.tokenizer

    def count(self, passage: Passage) -> int:
        if passage.id not in self._cache:
            tokenizer = self._tokenizer() if self.mode == "tokenizer" else None
            if tokenizer is None:
                self._cache[passage.id] = words_x13(passage.text)
            else:
                text = self.template.format(title=passage.title, text=passage.text)
                self._cache[passage.id] = max(1, len(tokenizer(text, add_special_tokens=False)["input_ids"]))
        return self._cache[passage.id]

    def __call__(self, passages: Sequence[Passage]) -> np.ndarray:
        return np.array([self.count(p) for p in passages], dtype=np.int64)
