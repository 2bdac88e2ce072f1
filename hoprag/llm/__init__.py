"""LLM backends behind one interface (`LLM.generate`: batched, with token log-probs and cost accounting).

Backends: `HFLLM` (transformers, GGUF files included), `OpenAICompatLLM` (any OpenAI-compatible server),
`VLLMLLM` (vLLM in-process, the optional `hoprag[vllm]` extra) and `ScriptedLLM` (rule-driven, for tests).
Prompts are built with `hoprag.llm.prompts` (passages written one way, a context shortened to the input
budget by one rule). Heavy libraries (torch, transformers, vllm) are imported only when a backend loads
its model.
"""

from hoprag.llm.base import LLM, Prompt, cut_at_stop
from hoprag.llm.hf import HFLLM
from hoprag.llm.openai_compat import OpenAICompatLLM
from hoprag.llm.openai_http import LLMConnectionError, LLMError, LLMRequestError
from hoprag.llm.prompts import ChatPrompt, Context, ContextPrompt, PassageFormat, PromptTooLongError
from hoprag.llm.scripted import ScriptedLLM
from hoprag.llm.types import Generation, SamplingParams, Usage
from hoprag.llm.vllm import VLLMLLM, release_engines

__all__ = [
    "ChatPrompt",
    "Context",
    "ContextPrompt",
    "HFLLM",
    "LLM",
    "VLLMLLM",
    "Generation",
    "LLMConnectionError",
    "LLMError",
    "LLMRequestError",
    "OpenAICompatLLM",
    "PassageFormat",
    "Prompt",
    "PromptTooLongError",
    "SamplingParams",
    "ScriptedLLM",
    "Usage",
    "cut_at_stop",
    "release_engines",
]
