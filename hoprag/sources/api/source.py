"""The `api` knowledge source: PruningRAG's fine-grained pruning of the CRAG mock API (spec/pruningrag.md §6.2).

For each question: domain → NER by the LLM (one batched generation for all questions) → entity matching
→ time periods from `query_time` → endpoint selection by rules → calls to the official mock API server →
Markdown passages (`origin="api"`, one per section, id `api:<endpoint>:<entity key>`; the text starts
with its own "## entity: section" heading, as prompts show passage texts only).

- Domain (`domain`, see `domain.py`): `gold`, the question's CRAG `domain` field, i.e. the *oracle*
  setting (the default; the official code's LoRA domain classifier is not published); `llm`, a zero-shot
  prompt to the answering LLM; `embedding`, a trained MiniLM + linear-head export (`domain_export`); or
  a classifier object.
- Open domain: no passages, no NER and no call, as in the official code (P16); `open_lookup=True` looks
  the NER entities up with `/open/search_entity_by_name` → `/open/get_entity`.
- Costs: each API request is one retrieval call of the question's `Cost` (stage "api"), NER tokens go to
  stage "api_ner", domain tokens (or seconds) to "api_domain".
- Stats: after each `fetch`, `question_stats` holds one dict of floats per question of the batch, in
  order (`STATS`: NER parse failure, no matched entity, no passages, API calls, oracle domain, domain
  parse failure, and `domain_correct` where the gold domain is known); `counts` keeps running totals
  (questions, API calls, NER and domain parse failures, unmatched and empty questions, oracle domains,
  correct domains of `domain_known`) and `traces` the last batch, question by question.
- A server that does not answer stops the run with an error naming the URL (checked once before the
  first request): an unreachable server would otherwise turn every question into an empty API context
  and the run would score a broken setup instead of the method.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm.base import LLM
from hoprag.paths import data_root
from hoprag.sources.api.client import DEFAULT_BASE_URL, MockAPIClient
from hoprag.sources.api.domain import DomainClassifier, DomainGuess, domain_classifier
from hoprag.sources.api.matching import Caller, CompanyTable, Matcher
from hoprag.sources.api.ner import DOMAINS, NERResult, extract_entities
from hoprag.sources.api.render import heading, render
from hoprag.sources.api.rules import select
from hoprag.sources.api.timeparse import parse_query_time, resolve_periods

COMPANY_TABLE = "crag/company_name.dict"  # under the data root; the mock API's mock_api/cragkg/finance/company_name.dict


@dataclass
class APITrace:
    """What the pipeline did for one question (`ner_parsed` is None when no NER ran; `gold_domain` is None
    where the question has none)."""

    id: str
    domain: str
    gold_domain: str | None = None
    domain_parsed: bool = True
    entities: dict[str, list[str]] = field(default_factory=dict)
    ner_parsed: bool | None = None
    matches: list[str] = field(default_factory=list)
    periods: list[str] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)


# the keys of `question_stats` (domain_correct only where the gold domain is known)
STATS = ("ner_parse_failed", "no_match", "empty", "api_calls", "domain_oracle", "domain_parse_failed", "domain_correct")
# question_stats keys whose running totals in `counts` keep their older names
COUNTED = {"ner_parse_failed": "ner_parse_failures", "domain_parse_failed": "domain_parse_failures"}


class APISource:
    """Fetches mock-API passages for a batch of CRAG questions; see the module docstring."""

    origin = "api"
    uses_domain = True  # PruningRAG's pruning gives it the question's domain classifier (`domain=`), shared

    def __init__(
        self,
        llm: LLM,
        base_url: str = DEFAULT_BASE_URL,
        company_names: str | os.PathLike | None = COMPANY_TABLE,
        domain: str | DomainClassifier = "gold",
        domain_field: str = "domain",
        domain_export: str | None = None,
        domain_max_new_tokens: int = 8,
        open_lookup: bool = False,
        query_time_field: str = "query_time",
        timeout: float = 30.0,
        retries: int = 2,
        cache_size: int = 1024,
        fuzzy_cutoff: float = 0.85,
        max_titles: int = 20,
        ner_max_new_tokens: int = 64,
        data_dir: str | None = None,
    ) -> None:
        """`company_names`: the official company table (relative paths are read under the data root); None
        resolves every company name through the server's search instead. `domain`: gold | llm | embedding
        (with `domain_export`), or a classifier object; `domain_field` holds the gold domain."""
        self.llm = llm
        self.client = MockAPIClient(base_url, timeout=timeout, retries=retries, cache_size=cache_size)
        self.companies = _load_companies(company_names, data_dir) if company_names is not None else None
        self.domain_field = domain_field
        self.domains = (domain_classifier(domain, llm, domain_field, domain_export, domain_max_new_tokens)
                        if isinstance(domain, str) else domain)  # fmt: skip
        self.open_lookup = open_lookup
        self.query_time_field = query_time_field
        self.fuzzy_cutoff = fuzzy_cutoff
        self.max_titles = max_titles
        self.ner_max_new_tokens = ner_max_new_tokens
        self.counts: Counter[str] = Counter()
        self.traces: list[APITrace] = []
        self.question_stats: list[dict[str, float]] = []
        self._server_checked = False

    def check_questions(self, examples: Sequence[QAExample]) -> None:
        """A trained domain classifier is never asked about a question it was trained on (PruningRAG's
        preflight calls this before the first batch; `classify` checks again per batch)."""
        check = getattr(self.domains, "check_unseen", None)
        if check is not None:
            check(examples)

    def fetch(self, examples: Sequence[QAExample], costs: Sequence[Cost | None] | None = None) -> list[list[Passage]]:
        """The API passages of each question, in question order (an empty list where the API has nothing)."""
        if costs is not None and len(costs) != len(examples):
            raise ValueError(f"{len(costs)} cost records for {len(examples)} questions")
        costs = list(costs) if costs is not None else [None] * len(examples)
        guesses = self._domains(examples, costs)
        domains = [g.domain for g in guesses]
        asked = [i for i, d in enumerate(domains) if d != "open" or self.open_lookup]
        if asked and not self._server_checked:
            self.client.ping()
            self._server_checked = True
        ner = extract_entities(self.llm, [examples[i].question for i in asked], [domains[i] for i in asked],
                               [costs[i] for i in asked], self.ner_max_new_tokens)
        by_question = dict(zip(asked, ner))
        self.traces, self.question_stats, fetched = [], [], []
        for i, example in enumerate(examples):
            gold = example.metadata.get(self.domain_field)
            trace = APITrace(example.id, domains[i], None if gold is None else str(gold), guesses[i].parsed)
            passages = self._question(example, domains[i], by_question.get(i), costs[i], trace)
            stats = self._stats(trace, passages)
            self.counts["questions"] += 1
            self.counts.update({COUNTED.get(k, k): int(v) for k, v in stats.items()})
            self.counts["domain_known"] += "domain_correct" in stats
            fetched.append(passages)
            self.traces.append(trace)
            self.question_stats.append(stats)
        return fetched

    def _stats(self, trace: APITrace, passages: list[Passage]) -> dict[str, float]:
        """One question's `STATS` (see the module docstring)."""
        stats = {
            "ner_parse_failed": float(trace.ner_parsed is False),
            "no_match": float(trace.ner_parsed is not None and not trace.matches),
            "empty": float(not passages),
            "api_calls": float(len(trace.calls)),
            "domain_oracle": float(self.domains.oracle),
            "domain_parse_failed": float(not trace.domain_parsed),
        }
        if trace.gold_domain is not None:
            stats["domain_correct"] = float(trace.domain == trace.gold_domain)
        return stats

    def _question(
        self, example: QAExample, domain: str, ner: NERResult | None, cost: Cost | None, trace: APITrace
    ) -> list[Passage]:
        if ner is None:
            return []
        trace.entities, trace.ner_parsed = ner.entities, ner.parsed
        call = self._caller(cost, trace)
        matches = Matcher(call, self.companies, self.fuzzy_cutoff).match(domain, ner.entities)
        trace.matches = [f"{m.kind}:{m.key}" for m in matches]
        today = parse_query_time(self._query_time(example)).date()
        periods = resolve_periods(example.question, today)
        trace.periods = [f"{p.label}={p.start.isoformat()}..{p.end.isoformat()}" for p in periods]
        passages: list[Passage] = []
        for selection in select(domain, example.question, matches, periods, today, self.open_lookup, self.max_titles):
            trace.sections.append(selection.section)
            body = render(selection, [call(endpoint, payload) for endpoint, payload in selection.requests])
            if body:
                pid = f"api:{selection.endpoint.strip('/')}:{selection.match.key}"
                if any(p.id == pid for p in passages):
                    pid += f"#{selection.section}"
                title = heading(selection)
                passages.append(Passage(id=pid, title=title, text=f"## {title}\n{body}", origin=self.origin))
        if cost is not None:
            cost.passage_ids.update(p.id for p in passages)
        return passages

    def _caller(self, cost: Cost | None, trace: APITrace) -> Caller:
        """The mock API as the question's pipeline sees it: every request charged to its cost record."""

        def call(endpoint: str, payload: Any) -> Any:
            started = time.perf_counter()
            result = self.client.call(endpoint, payload)
            trace.calls.append(endpoint)
            if cost is not None:
                cost.add_retrieval((), time.perf_counter() - started, stage="api")
            return result

        return call

    def _domains(self, examples: Sequence[QAExample], costs: Sequence[Cost | None]) -> list[DomainGuess]:
        guesses = list(self.domains.classify(examples, costs))
        if len(guesses) != len(examples):
            raise ValueError(f"the domain classifier gave {len(guesses)} domains for {len(examples)} questions")
        unknown = sorted({g.domain for g in guesses if g.domain not in DOMAINS})
        if unknown:
            raise ValueError(f"unknown CRAG domains {unknown}; expected {DOMAINS}")
        return guesses

    def _query_time(self, example: QAExample) -> str:
        if self.query_time_field not in example.metadata:
            raise ValueError(f"question {example.id} has no {self.query_time_field!r}: the API source resolves "
                             "dates against CRAG's query time")
        return str(example.metadata[self.query_time_field])


def _load_companies(path: str | os.PathLike, data_dir: str | None) -> CompanyTable:
    resolved = Path(path) if Path(path).is_absolute() else data_root(data_dir) / path
    if not resolved.is_file():
        raise FileNotFoundError(
            f"no company table at {resolved}: copy CRAG's mock_api/cragkg/finance/company_name.dict there, or set "
            "company_names=null to resolve company names through the server's search"
        )
    return CompanyTable.load(resolved)
