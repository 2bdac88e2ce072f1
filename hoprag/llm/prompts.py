"""How every method writes passages into a prompt, and how a prompt that is too long is shortened.

A prompt holds instructions (system message, worked examples, the question, the output format) and a
*context* (retrieved passages, evidence, a tree of passages). Methods build a `ContextPrompt`: the
instructions around one `Context`, whose units are passages in priority order. `LLM.generate` fits every
`ContextPrompt` into the backend's `max_input_tokens` by one rule (`fit_prompt`):

1. the whole context when it fits;
2. else the lowest-ranked units are dropped (the last ones first), keeping as many as fit, at least one;
3. if the top unit alone is still too long, its text is cut from the end until the prompt fits;
4. if the instructions alone do not fit, `PromptTooLongError`: instructions are never cut. The evaluation
   runner leaves a question unanswered when the question alone makes them too long (`question_too_long`).

What was cut is charged to the question's cost record (`truncated_prompts`, `prompt_tokens_dropped`,
`context_units_dropped`) and so shows in `metrics.json`; the prompt tokens charged are those sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Union

from hoprag.data.types import Passage

Message = Mapping[str, str]
Prompt = Union[str, Sequence[Message]]


def continues_reply(prompt: Prompt) -> bool:
    """Whether `prompt` is an assistant prefill: chat messages whose last one has role "assistant". Backends
    then continue that message (the reply is forced to start with its content) instead of opening a new
    one, and the returned text is only the continuation, without the prefix."""
    return not isinstance(prompt, str) and bool(prompt) and prompt[-1].get("role") == "assistant"


def chat_template_flags(messages: Sequence[Message]) -> dict[str, bool]:
    """`apply_chat_template` arguments for `messages`: open the assistant's turn, or continue a prefill
    (`continue_final_message` is only passed when set, for templates or fakes that predate it)."""
    if continues_reply(messages):
        return {"add_generation_prompt": False, "continue_final_message": True}
    return {"add_generation_prompt": True}


class PromptTooLongError(ValueError):
    """A prompt does not fit the backend's input budget even without any context: `tokens` (those of the
    prompt without its context) over `limit`. The runner tells a question too long for the budget, that
    question's failure, from instructions too long whatever the question, the config's (`hoprag.evaluation.runner`)."""

    def __init__(self, message: str, tokens: int, limit: int) -> None:
        super().__init__(message)
        self.tokens = tokens
        self.limit = limit


@dataclass(frozen=True)
class PassageFormat:
    """The one way passages are written into prompts: each with `template` ({rank} from 1, {title},
    {text}), joined by `separator`."""

    template: str = "[{rank}] {title}\n{text}"
    separator: str = "\n\n"

    def unit(self, rank: int, passage: Passage) -> str:
        return self.template.format(rank=rank, title=passage.title, text=passage.text)

    def render(self, passages: Sequence[Passage]) -> str:
        return self.separator.join(self.unit(i, p) for i, p in enumerate(passages, 1))

    def context(self, passages: Sequence[Passage]) -> Context:
        """The passages as a shortenable context (in the given order, which is their priority)."""
        return Context(tuple(passages), self.render)


@dataclass(frozen=True)
class Context:
    """The shortenable part of a prompt: `units` in priority order and how a kept list of them is shown
    (a unit may come back with its text cut)."""

    units: tuple[Passage, ...]
    render: Callable[[Sequence[Passage]], str]

    def text(self, keep: int | None = None, chars: int | None = None) -> str:
        """The first `keep` units (all by default), the last one cut to `chars` characters of text."""
        units = list(self.units if keep is None else self.units[:keep])
        if chars is not None and units:
            units[-1] = replace(units[-1], text=units[-1].text[:chars])
        return self.render(units)


@dataclass(frozen=True)
class ContextPrompt:
    """Instructions around one context: `build(context text)` gives the prompt the LLM reads."""

    build: Callable[[str], Prompt]
    context: Context

    def render(self, keep: int | None = None, chars: int | None = None) -> Prompt:
        return self.build(self.context.text(keep, chars))


@dataclass(frozen=True)
class ChatPrompt:
    """A system message and a user-message template (`str.format` fields such as {question}).

    Called with plain fields it gives chat messages; `with_context(field, context, **fields)` gives a
    `ContextPrompt` whose `field` is the shortenable context. `prefill` appends an assistant message the
    model continues (an assistant prefill)."""

    system: str
    user: str

    def __call__(self, prefill: str | None = None, **fields: Any) -> list[Message]:
        messages = [{"role": "system", "content": self.system}, {"role": "user", "content": self.user.format(**fields)}]
        if prefill:
            messages.append({"role": "assistant", "content": prefill})
        return messages

    def with_context(
        self, field: str, context: Context, prefill: str | None = None, **fields: Any
    ) -> ContextPrompt:
        return ContextPrompt(lambda text: self(prefill=prefill, **{field: text}, **fields), context)


@dataclass
class Fit:
    """How one prompt was fitted: tokens of the whole prompt and of what is sent, context units dropped,
    and whether the last kept unit was cut."""

    tokens: int
    sent_tokens: int
    units_dropped: int = 0
    cut: bool = False
    prompt: Prompt = field(default="", repr=False)

    @property
    def truncated(self) -> bool:
        return self.sent_tokens < self.tokens


def fit_prompt(prompt: ContextPrompt, count: Callable[[Prompt], int], limit: int) -> Fit:
    """The longest version of `prompt` within `limit` tokens, by the module docstring's rule."""
    full = prompt.render()
    tokens = count(full)
    if tokens <= limit:
        return Fit(tokens, tokens, prompt=full)
    units = prompt.context.units
    fits = lambda keep, chars=None: count(prompt.render(keep, chars)) <= limit  # noqa: E731
    keep = _largest(1, len(units) - 1, fits)
    if keep:
        sent = prompt.render(keep)
        return Fit(tokens, count(sent), len(units) - keep, prompt=sent)
    if not fits(0):
        bare = count(prompt.render(0))
        raise PromptTooLongError(
            f"the prompt's instructions alone take {bare} tokens, more than the {limit} the LLM's "
            "max_input_tokens allows: shorten the prompt template or raise max_input_tokens", bare, limit
        )
    chars = _largest(0, len(units[0].text), lambda c: fits(1, c)) if units else 0
    sent = prompt.render(1, chars) if units else prompt.render(0)
    return Fit(tokens, count(sent), max(len(units) - 1, 0), cut=bool(units), prompt=sent)


def _largest(low: int, high: int, holds: Callable[[int], bool]) -> int:
    """The largest x in [low, high] for which `holds(x)` (monotone: true up to some point), else 0."""
    best = 0
    while low <= high:
        mid = (low + high) // 2
        if holds(mid):
            best, low = mid, mid + 1
        else:
            high = mid - 1
    return best


def render_plain(prompt: Prompt | ContextPrompt) -> Prompt:
    """The whole prompt, context included (for backends without an input budget)."""
    return prompt.render() if isinstance(prompt, ContextPrompt) else prompt


def is_prompt_batch(prompts: Any) -> bool:
    """False for a single prompt passed where a batch is expected (a string, or one message list)."""
    return not (isinstance(prompts, (str, ContextPrompt)) or (prompts and isinstance(prompts[0], Mapping)))
