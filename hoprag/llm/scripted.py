"""A scripted LLM: replies and log-probs come from rules a test sets up, so method logic is testable exactly.

    llm = ScriptedLLM(rules=[(r"capital of (\\w+)", r"Answer: the capital of \\1", -0.1),
                             (lambda p: "yes or no" in p, ["yes", "no"], [-0.2])],
                      default_reply="I don't know")

A prompt is rendered to text (chat messages as "role: content" lines) and the first matching rule answers
it (an assistant prefill is just the last line; the reply plays the continuation, without the prefix);
a regex pattern is searched (`re.search`) and its reply is a `Match.expand` template (`\\1`, `\\g<name>`).
Tokens are whitespace-split words everywhere: a prompt's
count (`prompt_tokens`, and the budget of `max_input_tokens`) and `count_tokens`. A reply is a string, a list of strings (sample j of a prompt gets item j, cycling) or a callable
of the rendered prompt returning either. Tokens are the whitespace-split words of a reply, each
with the rule's log-prob (one float for every token, or one per token). Stop strings and
`max_new_tokens` cut text and tokens as `HFLLM` does; nothing is random, so every run is identical. `delay` sleeps once per batched call (to measure framework overhead against a fixed
"model time").

`think` plays a reasoning model: every reply opens with a reasoning block, `<think>\n{think}\n</think>\n\n`
before the reply, whose words are generated tokens like any (the token limit included); `think_opened` plays a
chat template that opened the block in the prompt (the reply starts inside it, with the closing tag only);
`think_cut` ends every reply inside the unfinished block, as the token limit would (finish "length").

With `SamplingParams.candidates` the candidates are tokens of the scripted vocabulary: each is one token
wherever it occurs in a reply (as a real model's added reflection tokens are), and every position's
`candidate_logprobs` come from `candidate_scores(prompt text, token)` (a map of candidate log-probs; the
candidates it leaves out are unscored); without it, the emitted token, when a candidate, is the only one
scored, with its rule's log-prob.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Union

from hoprag.llm.base import LLM, Prompt, cut_at_stop
from hoprag.llm.types import Generation, SamplingParams

Pattern = Union[str, re.Pattern, Callable[[str], bool]]
Reply = Union[str, Sequence[str], Callable[[str], Union[str, Sequence[str]]]]
LogProb = Union[float, Sequence[float]]


def render(prompt: Prompt) -> str:
    """The text a scripted rule sees: a plain prompt as is, chat messages as "role: content" lines."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(f"{m['role']}: {m['content']}" for m in prompt)


@dataclass(frozen=True)
class Rule:
    pattern: Pattern
    reply: Reply
    logprob: LogProb

    def replies(self, text: str) -> list[str] | None:
        """The replies (one per sample, cycled) if this rule matches `text`, else None."""
        if callable(self.pattern):
            if not self.pattern(text):
                return None
            match = None
        elif (match := re.search(self.pattern, text)) is None:
            return None
        reply = self.reply(text) if callable(self.reply) else self.reply
        replies = [reply] if isinstance(reply, str) else list(reply)
        if not replies:
            raise ValueError(f"rule {self.pattern!r} gave no reply")
        if match is None or callable(self.reply):
            return replies
        return [match.expand(r) for r in replies]


@dataclass(frozen=True)
class Call:
    """One recorded `generate` call: the prompts as given and the resolved sampling parameters."""

    prompts: list[Prompt]
    params: SamplingParams
    seeds: list[int] | None = None  # per-prompt sampling seeds, when the caller gave them

    @property
    def texts(self) -> list[str]:
        return [render(p) for p in self.prompts]


class ScriptedLLM(LLM):
    """Deterministic replies from `rules` (`(pattern, reply)` or `(pattern, reply, logprob)`), else
    `default_reply` with `default_logprob`. `default` holds the sampling defaults, as for every backend."""

    name = "scripted"
    candidate_logprobs = True

    def __init__(
        self,
        rules: Sequence[Sequence[Any]] = (),
        default_reply: Reply = "",
        default_logprob: LogProb = -1.0,
        delay: float = 0.0,
        default: SamplingParams | Mapping[str, Any] | None = None,
        generation_cache: str | None = None,
        max_input_tokens: int | None = None,
        candidate_scores: Callable[[str, str], Mapping[str, float]] | None = None,
        think: str | None = None,
        think_opened: bool = False,
        think_cut: bool = False,
        reasoning_budget: int = 0,
    ) -> None:
        super().__init__(default, generation_cache, max_input_tokens, reasoning_budget=reasoning_budget)
        if (think_opened or think_cut) and think is None:
            raise ValueError("think_opened and think_cut play a reasoning model: set `think` too")
        self.think, self.think_opened, self.think_cut = think, think_opened, think_cut
        self.candidate_scores = candidate_scores
        self.rules = [Rule(r[0], r[1], r[2] if len(r) > 2 else default_logprob) for r in rules]
        self.fallback = Rule(lambda _: True, default_reply, default_logprob)
        self.delay = delay
        self.calls: list[Call] = []

    def _generate(
        self, prompts: list[Prompt], params: SamplingParams, seeds: list[int] | None = None
    ) -> list[list[Generation]]:
        self.calls.append(Call(prompts, params, seeds))
        if self.delay:
            time.sleep(self.delay)
        outputs = []
        for prompt in prompts:
            text = render(prompt)
            rule, replies = self._match(text)
            prompt_tokens = len(text.split())
            samples = [
                self._sample(replies[j % len(replies)], rule.logprob, prompt_tokens, params) for j in range(params.n)
            ]
            if params.candidates:
                samples = [replace(g, candidate_logprobs=self._scores(text, g, params.candidates)) for g in samples]
            outputs.append(samples)
        return outputs

    def _sample(self, reply: str, logprob: LogProb, prompt_tokens: int, params: SamplingParams) -> Generation:
        """One sample of `reply`, after its reasoning block when the LLM thinks (log-probs per reply token
        are the rule's; the block's tokens get the first one)."""
        if self.think is None:
            return _generation(reply, logprob, prompt_tokens, params)
        block = ("" if self.think_opened else "<think>\n") + self.think
        raw = block if self.think_cut else f"{block}\n</think>\n\n{reply}"
        if not isinstance(logprob, (int, float)):
            head = raw if self.think_cut else raw[: len(raw) - len(reply)]
            thinking = len(re.findall(_token_pattern(params.candidates), head))
            logprob = [float(logprob[0]) if len(logprob) else -1.0] * thinking + [float(x) for x in logprob]
        gen = _generation(raw, logprob, prompt_tokens, params, self.think_opened)
        return replace(gen, finish_reason="length") if self.think_cut else gen

    def reasoning_opened(self, prompt: Prompt) -> bool:
        return self.think_opened

    def _scores(self, text: str, generation: Generation, candidates: tuple[str, ...]) -> tuple[dict[str, float], ...]:
        """Each kept token's candidate log-probs (see the module docstring)."""
        if self.candidate_scores is None:
            pairs = zip(generation.tokens, generation.logprobs)
            return tuple({token: lp} if token in candidates else {} for token, lp in pairs)
        scores = [self.candidate_scores(text, token) or {} for token in generation.tokens]
        return tuple({c: float(v) for c, v in s.items() if c in candidates} for s in scores)

    @property
    def token_counting(self) -> str:
        return "words (scripted)"

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def prompt_token_count(self, prompt: Prompt) -> int:
        return len(render(prompt).split())

    def __repr__(self) -> str:
        rules = [(r.pattern, r.reply, r.logprob) for r in self.rules]
        think = f", think={self.think!r}, opened={self.think_opened}, cut={self.think_cut}" if self.think else ""
        return (
            f"ScriptedLLM(rules={rules!r}, default={self.fallback.reply!r}, logprob={self.fallback.logprob!r}{think})"
        )

    def _match(self, text: str) -> tuple[Rule, list[str]]:
        for rule in self.rules:
            replies = rule.replies(text)
            if replies is not None:
                return rule, replies
        return self.fallback, self.fallback.replies(text)


def _generation(
    reply: str, logprob: LogProb, prompt_tokens: int, params: SamplingParams, opened: bool = False
) -> Generation:
    """Decode `reply` as a backend would: at most `max_new_tokens` tokens, cut before a stop string.

    As for `HFLLM`, `tokens` cover the kept text (a token straddling the cut is kept) and
    `completion_tokens` counts every token generated, up to the one completing a stop string; a scripted
    reply has no end-of-sequence token, so nothing is left to leave out (the token rule of `Generation`).
    """
    spans = [m.span() for m in re.finditer(_token_pattern(params.candidates), reply)]
    if isinstance(logprob, (int, float)):
        logprobs = [float(logprob)] * len(spans)
    elif len(logprob) < len(spans):
        raise ValueError(f"{len(logprob)} log-probs for the {len(spans)} tokens of reply {reply!r}")
    else:
        logprobs = [float(x) for x in logprob]
    finish = "stop"
    if len(spans) > params.max_new_tokens:
        spans = spans[: params.max_new_tokens]
        reply, finish = reply[: spans[-1][1]], "length"
    text, stopped = cut_at_stop(reply, params.stop, opened)
    generated = len(spans)
    if stopped:
        finish = "stop"
        stop_end = len(text) + min(len(s) for s in params.stop if s and reply.startswith(s, len(text)))
        generated = sum(start < stop_end for start, _ in spans)
    kept = [(start, end) for start, end in spans if start < len(text)]
    return Generation(
        text=text,
        tokens=tuple(reply[start:end] for start, end in kept),
        logprobs=tuple(logprobs[: len(kept)]),
        prompt_tokens=prompt_tokens,
        completion_tokens=generated,
        finish_reason=finish,
    )


def _token_pattern(candidates: Sequence[str]) -> str:
    """Whitespace-split words, each candidate string a token of its own (also inside a word)."""
    if not candidates:
        return r"\S+"
    own = "|".join(re.escape(c) for c in sorted(candidates, key=len, reverse=True))
    return rf"{own}|(?:(?!{own})\S)+"
