"""The method interface and its output record.

Hydra's `_target_` is the one registry: `conf/method/<name>.yaml` builds the class whose `name` is
`<name>` (a test checks they agree), and the runner records answers under that name. A method answers a
batch of questions at once (so LLM and retrieval calls are batched across questions) and charges what each
question cost to that question's `Cost` record. It is built with its components
as constructor arguments: the runner passes `llm=` (and `retriever=` when `needs_retriever`) to the
`_partial_` object Hydra makes from `conf/method/<name>.yaml`, and the method, in turn, finishes its own
`_partial_` engines with `hoprag.config.complete` (the wiring rule: conf/method/README.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from hoprag.config import check_given, complete
from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ContextPrompt, Prompt
from hoprag.methods.answer_extraction import AnswerExtractor
from hoprag.retrieval.retrievers import Retriever
from hoprag.search.steps import llm_step
from hoprag.utils.refusals import Refusal

T = TypeVar("T")


@dataclass
class MethodOutput:
    """One answered question: the extracted answer, every passage read (in reading order), the method's
    trace (JSON-serialisable: raw outputs, scores, tree nodes ...), whether extraction failed, and the
    method's own numeric per-question figures (`stats`, e.g. tree size, tokens selected), which the
    runner averages into `method/<key>` metrics."""

    prediction: str
    retrieved: list[Passage] = field(default_factory=list)
    trace: dict[str, Any] = field(default_factory=dict)
    parse_failed: bool = False
    stats: dict[str, float] = field(default_factory=dict)


def setting(owner: type, settings: Mapping[str, Any], name: str) -> Any:
    """The value `owner(**settings)` gives its parameter `name`: `settings[name]`, else the default of the
    nearest constructor in `owner`'s MRO that declares it. `check_settings` checks these values before any
    constructor runs, so that each default is still written once, in the signature."""
    if name in settings:
        return settings[name]
    for klass in owner.__mro__:
        declared = inspect.signature(klass.__init__).parameters.get(name)
        if declared is not None:
            return declared.default
    raise TypeError(f"{owner.__name__} has no setting {name!r}")


class MissingCapability(Refusal, RuntimeError):
    """The LLM cannot do what the method's settings need (e.g. a server without token log-probs)."""


class Method:
    """Base class. `answer` returns one `MethodOutput` per example, in order."""

    name: ClassVar[str] = "method"
    needs_retriever: ClassVar[bool] = True
    # False for a retrieval-only configuration (`generate=false`): its empty predictions are not answers, so
    # the runner records no answer scores for them (EM, F1 ... are then absent from metrics.json, not 0)
    generates: bool = True
    # the unfinished children the constructor completes (`complete_part`): each one's setting → the names the
    # method passes it, which its config must not set as well (`check_settings` checks this before anything
    # is built); `completed_as`: the key a child's refusal names, where it is not the setting's name
    completes: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    completed_as: ClassVar[Mapping[str, str]] = {}

    def __init__(
        self,
        llm: LLM,
        retriever: Retriever | None = None,
        extractor: AnswerExtractor | None = None,
        generation: Mapping[str, Any] | None = None,
    ) -> None:
        if self.needs_retriever and retriever is None:
            raise ValueError(f"method {self.name!r} needs a retriever")
        self.llm = llm
        self.retriever = retriever
        self.extractor = extractor or AnswerExtractor()
        self.generation = dict(generation or {})  # sampling overrides of the final-answer call

    @classmethod
    def reads_passages(cls, settings: Mapping[str, Any]) -> bool:
        """Whether a method with these settings (its config) searches a corpus, so that the runner builds a
        retriever (and its index) only then: `needs_retriever`, unless a setting turns retrieval off."""
        return cls.needs_retriever

    @classmethod
    def check_settings(cls, settings: Mapping[str, Any]) -> None:
        """Refuse what the settings (the method's config, data-dependent values resolved) rule out by
        themselves, e.g. a dataset without few-shot exemplars: the runner calls this before it loads a model or
        builds an index, so that such a refusal costs nothing. A method whose constructor refuses on its
        settings alone checks the same here, with the same function (values: `setting`); an override of a
        class with `completes` calls this too, which refuses a child config that sets what the method passes
        that child, as `complete_part` refuses it."""
        for name, given in cls.completes.items():
            child = settings.get(name)  # a `_partial_` child's config; a class or a default: no settings
            check_given(cls.completed_as.get(name, name), child if isinstance(child, Mapping) else None, given)

    def complete_part(self, name: str, engine: Callable[..., T], **given: Any) -> T:
        """The child of setting `name` finished with `given` (`hoprag.config.complete`), which must be the
        names `completes[name]` declares, so that `check_settings` checks the names the constructor passes."""
        declared = self.completes.get(name, ())
        if sorted(given) != sorted(declared):
            raise TypeError(f"{type(self).__name__} completes {name} with {sorted(given)}, but its `completes` "
                            f"declares {sorted(declared)}")  # fmt: skip
        return complete(engine, self.completed_as.get(name, name), **given)

    def answer(self, examples: Sequence[QAExample], costs: Sequence[Cost]) -> list[MethodOutput]:
        raise NotImplementedError

    def required_capabilities(self) -> dict[str, str]:
        """What these settings need of the LLM beyond plain generation ("logprobs", "prefill", "n"), each
        with the config switch that avoids needing it; none by default."""
        return {}

    def check_capabilities(self) -> None:
        """Raise `MissingCapability` before any work when the LLM lacks what `required_capabilities` names
        (a served model: what its server was probed to do, see hoprag/llm/openai_compat.py)."""
        needs = self.required_capabilities()
        missing = self.llm.missing_capabilities(needs)
        if missing:
            ways = "; ".join(f"{need}: {needs[need]}" for need in missing)
            raise MissingCapability(
                f"{self.name} needs {missing} from {self.llm.name}, which it does not provide "
                f"(capabilities: {getattr(self.llm, 'capabilities', None)}). Avoid it with {ways}"
            )

    def check_questions(self, examples: Sequence[QAExample]) -> None:
        """Refuse, before any answer is written or an old run removed, questions these settings must not be
        evaluated on (e.g. the training questions of a trained router); none by default."""

    def run_info(self) -> dict[str, Any]:
        """Settings that qualify every figure of a run (e.g. how tokens were counted, which verifier judged):
        the runner writes them into metrics.json's `run` section. JSON-serialisable values only."""
        info: dict[str, Any] = {"llm_max_input_tokens": self.llm.max_input_tokens}
        if self.llm.max_input_tokens is not None:
            info["llm_token_counting"] = self.llm.token_counting
        capabilities = getattr(self.llm, "capabilities", None)  # a served model's probed server
        if capabilities is not None:
            info["llm_capabilities"] = capabilities
        return info

    def _final_answers(
        self,
        prompts: Sequence[Prompt | ContextPrompt],
        costs: Sequence[Cost],
        retrieved: Sequence[list[Passage]],
        one_by_one: bool = False,
    ) -> list[MethodOutput]:
        """One batched LLM call for the final answers (`one_by_one`: one per prompt), then extraction; the raw
        output goes in the trace."""
        generations = llm_step(self.llm, prompts, costs, "answer", one_by_one, **self.generation)
        outputs = []
        for generation, passages in zip(generations, retrieved):
            extraction = self.extractor(generation.text)
            trace = {"output": generation.text, "mean_logprob": generation.mean_logprob}
            outputs.append(MethodOutput(extraction.answer, list(passages), trace, extraction.failed))
        return outputs
