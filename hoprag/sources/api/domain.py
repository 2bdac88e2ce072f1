"""The API source's domain classification (spec/pruningrag.md §6.2 step 1, §14 DomainClassifier).

The official code classifies with a LoRA sequence classifier on Llama-3.1-8B whose weights are not
published, so the API source picks one of three classifiers by its `domain` setting:

- `gold`: the question's CRAG `domain` field, the oracle ablation; every question it classifies says so
  (`domain_oracle` = 1 in the source's per-question stats).
- `llm`: a zero-shot prompt to the answering LLM, one batched greedy generation for the batch, its tokens
  charged to each question's cost (stage "api_domain"). The first domain named in the reply wins (a
  plural "movies" / "sports" counts); a reply naming none is a parse failure and falls back to `open`,
  which makes no API call, as the official code does for the open domain.
- `embedding`: a frozen sentence embedder and a linear head (`hoprag.training.classifier`) trained on any
  question file with CRAG `domain` metadata by `python train.py +model=domain_classifier`, loaded from its
  export; it refuses questions it was trained on. Its seconds are charged to stage "api_domain".
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from hoprag.cost import Cost, charge_evenly
from hoprag.data.heldout import SETTINGS_FILE
from hoprag.data.types import QAExample
from hoprag.llm.base import LLM
from hoprag.llm.prompts import ChatPrompt, Message
from hoprag.sources.api.ner import DOMAINS

if TYPE_CHECKING:
    from hoprag.training.classifier import LabelClassifier

MODES = ("gold", "llm", "embedding")
FALLBACK = "open"
STAGE = "api_domain"
DOMAIN_PROMPT = ChatPrompt(
    "You are a helpful assistant.",
    "Classify the question into exactly one domain:\n"
    "- finance: companies, stocks and their prices, dividends, market capitalisation, earnings\n"
    "- music: artists, bands, songs, albums, Grammy awards, Billboard charts\n"
    "- movie: films, actors, directors, Oscars, box office\n"
    "- sports: NBA and soccer teams, players, games and scores\n"
    "- open: anything else\n"
    "Reply with the domain name only.\n\n"
    "### Question\n{question}\n### Domain\n",
)
_NAMED = re.compile(r"\b(finance|music|movie|sport|open)s?\b", re.IGNORECASE)


@dataclass(frozen=True)
class DomainGuess:
    """A question's domain; `parsed` is False when an LLM reply named none and `domain` is the fallback."""

    domain: str
    parsed: bool = True
    reply: str = ""


class DomainClassifier(Protocol):
    oracle: bool  # whether the domains are the gold labels (the oracle ablation)

    def classify(self, examples: Sequence[QAExample], costs: Sequence[Cost | None]) -> list[DomainGuess]: ...


class GoldDomains:
    """The oracle: each question's gold CRAG `field`."""

    oracle = True

    def __init__(self, field: str = "domain") -> None:
        self.field = field

    def classify(self, examples: Sequence[QAExample], costs: Sequence[Cost | None]) -> list[DomainGuess]:
        missing = [e.id for e in examples if self.field not in e.metadata]
        if missing:
            raise ValueError(f"questions {missing[:5]} have no {self.field!r} field: load CRAG questions "
                             "(hoprag.data.crag) or predict the domain (domain=llm or domain=embedding)")
        return [DomainGuess(str(e.metadata[self.field])) for e in examples]


def domain_messages(question: str) -> list[Message]:
    return DOMAIN_PROMPT(question=question)


def parse_domain(reply: str) -> DomainGuess:
    """The first domain the reply names, else the fallback (`open`) as a parse failure."""
    found = _NAMED.search(reply)
    if found is None:
        return DomainGuess(FALLBACK, parsed=False, reply=reply)
    name = found.group(1).lower()
    return DomainGuess("sports" if name == "sport" else name, reply=reply)


class LLMDomains:
    """Zero-shot domain classification by an LLM (the answering LLM, in the API source)."""

    oracle = False

    def __init__(self, llm: LLM, max_new_tokens: int = 8) -> None:
        self.llm = llm
        self.max_new_tokens = max_new_tokens

    def classify(self, examples: Sequence[QAExample], costs: Sequence[Cost | None]) -> list[DomainGuess]:
        if not examples:
            return []
        prompts = [domain_messages(e.question) for e in examples]
        outputs = self.llm.generate(prompts, costs=costs, stage=STAGE, max_new_tokens=self.max_new_tokens,
                                    temperature=0.0, n=1)  # fmt: skip
        return [parse_domain(samples[0].text) for samples in outputs]


class EmbeddingDomains:
    """A trained embedding + linear-head classifier (`train.py +model=domain_classifier`'s export)."""

    oracle = False

    def __init__(self, export: str | Path | LabelClassifier) -> None:
        from hoprag.training.classifier import LabelClassifier  # torch, only when this mode is used

        self.model = export if isinstance(export, LabelClassifier) else LabelClassifier.load(export)
        unknown = sorted(set(self.model.labels) - set(DOMAINS))
        if unknown:
            raise ValueError(f"the domain classifier's labels {unknown} are not CRAG domains {DOMAINS}")

    def check_unseen(self, examples: Sequence[QAExample]) -> None:
        self.model.check_unseen(examples)

    def classify(self, examples: Sequence[QAExample], costs: Sequence[Cost | None]) -> list[DomainGuess]:
        self.check_unseen(examples)
        started = time.perf_counter()
        domains = self.model.predict([e.question for e in examples])
        share = charge_evenly(costs, time.perf_counter() - started)
        for cost in costs:
            if cost is not None:
                cost.seconds[STAGE] += share
        return [DomainGuess(d) for d in domains]


def domain_classifier(
    mode: str, llm: LLM, field: str = "domain", export: str | None = None, max_new_tokens: int = 8
) -> DomainClassifier:
    """The classifier a mode names (see the module docstring)."""
    check_domain(mode, export)
    if mode == "gold":
        return GoldDomains(field)
    if mode == "llm":
        return LLMDomains(llm, max_new_tokens)
    return EmbeddingDomains(export)


def check_domain(mode: str, export: str | Path | LabelClassifier | None = None) -> None:
    """Refuse a `domain` / `domain_export` pair no classifier can be built from, as far as the settings and
    the files on disk decide: an unknown mode, or `embedding` without an export folder (one without the
    export's settings file). `domain_classifier` calls this, and so do the methods' `check_settings`
    (through `SourcePruning.check_settings`), before any model loads."""
    if mode not in MODES:
        raise ValueError(f"domain must be one of {MODES} or a classifier object, got {mode!r}")
    if mode != "embedding":
        return
    if export is None:
        raise ValueError("domain=embedding needs domain_export: the export folder of "
                         "`python train.py +model=domain_classifier` (its publish_dir by default)")
    if isinstance(export, (str, PathLike)) and not (Path(export) / SETTINGS_FILE).is_file():
        raise FileNotFoundError(f"domain_export={str(export)!r} is not a domain classifier export: it has no "
                                f"{SETTINGS_FILE} (`python train.py +model=domain_classifier` writes the export, "
                                "to its publish_dir by default)")  # fmt: skip
