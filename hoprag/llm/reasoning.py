"""Reasoning models: the thinking a reply opens with, held apart from the answer content.

Qwen3 (with its chat template's `enable_thinking`, on by default) and DeepSeek-R1 style models write
`<think>…</think>` before the reply; a chat template may open the block in the generation prompt itself
(DeepSeek-R1's), so the reply holds only the closing `</think>`. An OpenAI-compatible server with a
reasoning parser (`vllm serve --reasoning-parser ...`) returns the thinking apart, in the chat message's
`reasoning` field (vLLM since PR #27752) or `reasoning_content` (older vLLM, DeepSeek's API).

Every method's parser must see the content only, and log-prob confidences must cover the answer, so the
split is made once for every backend: `LLM.generate` applies `split_reasoning` to what a backend generated
(a server's separate field is read by `hoprag.llm.openai_http`), before the generation cache stores it. Stop
strings are looked for in the content only (`content_start`, used by `cut_at_stop`): thinking is free text,
and a stop such as "\\n" would otherwise end every reply on its first thought. A reply that ends inside an
unfinished block has no content and is marked `reasoning_cut`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from hoprag.llm.types import Generation

OPEN, CLOSE = "<think>", "</think>"
SERVER_FIELDS = ("reasoning", "reasoning_content")  # newer vLLM first, then older vLLM / DeepSeek


class Block(NamedTuple):
    """Character offsets of a reasoning block in a reply: its text is `reply[start:end]`; the content
    starts at `content` (after the closing tag and the whitespace that follows it), None while unfinished."""

    start: int
    end: int
    content: int | None


def find_block(text: str, opened: bool = False) -> Block | None:
    """The reasoning block `text` opens with, or None. `opened`: the prompt ended inside an opened block (the
    chat template wrote `<think>`), so the reply starts inside it; a reply holding a closing tag without an
    opening one is read the same way."""
    lead = len(text) - len(text.lstrip())
    if text.startswith(OPEN, lead):
        start = lead + len(OPEN)
    elif opened or CLOSE in text:
        start = 0
    else:
        return None
    close = text.find(CLOSE, start)
    if close < 0:
        return Block(start, len(text), None)
    after = close + len(CLOSE)
    return Block(start, close, len(text) - len(text[after:].lstrip()))


def content_start(text: str, opened: bool = False) -> int | None:
    """Where the content of a reply starts: 0 without a reasoning block, None while the block is open."""
    block = find_block(text, opened)
    return 0 if block is None else block.content


def opens_block(rendered_prompt: str) -> bool:
    """Whether a rendered prompt leaves a reasoning block open for the reply (the template wrote `<think>`
    last; Qwen3's template with thinking off writes an empty, closed block)."""
    return rendered_prompt.rfind(OPEN) > rendered_prompt.rfind(CLOSE)


def split_reasoning(generation: Generation, opened: bool = False) -> Generation:
    """`generation` with its reasoning block moved to `reasoning`: text, tokens, log-probs and candidate
    log-probs keep the content only. One already split (a server's reasoning field) is returned as it is.

    The block's tokens are those that end before the content starts, found by walking the token texts
    along the reply; a backend that returned no tokens (a server without log-probs) has them estimated
    from `completion_tokens` in proportion to characters."""
    if generation.reasoning is not None:
        return generation
    text = generation.text
    block = find_block(text, opened)
    if block is None:
        return generation
    thinking = text[block.start : block.end].strip()
    if block.content is None:  # everything generated was thinking
        return replace(
            generation, text="", tokens=(), logprobs=None if generation.logprobs is None else (),
            candidate_logprobs=None if generation.candidate_logprobs is None else (),
            reasoning=thinking, reasoning_tokens=generation.completion_tokens, reasoning_cut=True,
        )  # fmt: skip
    if generation.tokens:
        k = tokens_before(text, generation.tokens, block.content)
    else:
        k = round(generation.completion_tokens * block.content / len(text))
    return replace(
        generation,
        text=text[block.content :],
        tokens=generation.tokens[k:],
        logprobs=None if generation.logprobs is None else generation.logprobs[k:],
        candidate_logprobs=None if generation.candidate_logprobs is None else generation.candidate_logprobs[k:],
        reasoning=thinking,
        reasoning_tokens=k,
    )


def token_ends(text: str, tokens: Sequence[str]) -> list[int]:
    """Where each token ends in `text`: each is looked for where the previous one ended, past whitespace only
    (a scripted reply's tokens are its words); one that does not decode to that piece of the text advances
    by its length."""
    ends, position = [], 0
    for token in tokens:
        found = text.find(token, position) if token else -1
        if found >= 0 and not text[position:found].strip():
            position = found
        position += len(token)
        ends.append(position)
    return ends


def tokens_before(text: str, tokens: Sequence[str], offset: int) -> int:
    """How many leading tokens end at or before `offset` of `text`."""
    return sum(end <= offset for end in token_ends(text, tokens))


def limit_content(generation: Generation, max_tokens: int) -> Generation:
    """`generation` with its content cut to `max_tokens` tokens (finish "length"): with a reasoning budget
    (`llm.reasoning_budget`) a method's token limit applies to the content, the thinking having been given
    more. A content without tokens (a server without log-probs) cannot be counted and stays whole."""
    if len(generation.tokens) <= max_tokens:
        return generation
    end = token_ends(generation.text, generation.tokens)[max_tokens - 1]
    cut = slice(0, max_tokens)
    return replace(
        generation, text=generation.text[:end], tokens=generation.tokens[cut], finish_reason="length",
        logprobs=None if generation.logprobs is None else generation.logprobs[cut],
        candidate_logprobs=None if generation.candidate_logprobs is None else generation.candidate_logprobs[cut],
    )  # fmt: skip


def server_reasoning(message: Mapping[str, Any]) -> str | None:
    """The thinking an OpenAI-compatible server returned apart in a chat message (None when it returned none)."""
    for name in SERVER_FIELDS:
        value = message.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def server_reasoning_tokens(tokens: Sequence[str]) -> int | None:
    """How many of a server's returned tokens (which cover thinking and content alike) are the thinking: up
    to the closing tag and the whitespace after it; None when the tokens hold no closing tag."""
    joined = "".join(tokens)
    block = find_block(joined, opened=True)
    if block is None or block.content is None:
        return None
    return tokens_before(joined, tokens, block.content)
