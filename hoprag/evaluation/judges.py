"""The judges that decide CRAG answers which are neither missing nor an exact match (`hoprag.metrics.crag`
scores their replies): `LLMJudge`, CRAG's judge prompt on any `hoprag.llm.LLM` (the paper's was GPT-3.5-Turbo
at temperature 0, since retired by OpenAI: the paper presets name a current model, and say so in
`provenance`), and `NormalizedMatchJudge`, an offline aid. Either goes in `metrics.crag_judge`, or in a
source router's outcome labeller. Each has a `name`, which CRAG's rates carry (`crag/acc@<name>`): `rule`
for the aid; for an LLM judge its model (`gpt-6-luna`), or `local-<name>` when the model runs here: in
process (HF, vLLM, scripted) or behind an OpenAI-compatible server on this machine or a private network
(localhost, a loopback, private or link-local address, a `.local` / `.localhost` / `.internal` name, or a
host name without a dot). `judge_info` is what a run's metrics.json records of its judge."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from hoprag.metrics.answer import normalize_answer
from hoprag.metrics.crag import RULE_MARK, JudgeItem

if TYPE_CHECKING:
    from hoprag.llm.base import LLM

# CRAG's judge prompt of the Meta KDD Cup 2024, as PruningRAG's evaluation sends it to GPT-3.5-Turbo (quoted,
# re-typed, trailing spaces included): `INSTRUCTIONS` and `IN_CONTEXT_EXAMPLES` of
# github.com/USTCAGI/PruningRAG prompts/templates.py at commit fad123fb3ccf12cece168b42205a91c748eaa0fe.
JUDGE_INSTRUCTIONS = (
    "\n# Task: \n"
    "You are given a Question, a model Prediction, and a list of Ground Truth answers, judge whether the model "
    "Prediction matches any answer from the list of Ground Truth answers. Follow the instructions step by step "
    "to make a judgement. \n"
    '1. If the model prediction matches any provided answers from the Ground Truth Answer list, "Accuracy" '
    'should be "True"; otherwise, "Accuracy" should be "False".\n'
    "2. If the model prediction says that it couldn't answer the question or it doesn't have enough "
    'information, "Accuracy" should always be "False".\n'
    '3. If the Ground Truth is "invalid question", "Accuracy" is "True" only if the model prediction is '
    'exactly "invalid question".\n'
    "# Output: \n"
    'Respond with only a single JSON string with an "Accuracy" field which is "True" or "False".\n'
)
JUDGE_EXAMPLES = (
    "\n# Examples:\n"
    "Question: how many seconds is 3 minutes 15 seconds?\n"
    'Ground truth: ["195 seconds"]\n'
    "Prediction: 3 minutes 15 seconds is 195 seconds.\n"
    "Accuracy: True\n"
    "\n"
    "Question: Who authored The Taming of the Shrew (published in 2002)?\n"
    'Ground truth: ["William Shakespeare", "Roma Gill"]\n'
    "Prediction: The author to The Taming of the Shrew is Roma Shakespeare.\n"
    "Accuracy: False\n"
    "\n"
    "Question: Who played Sheldon in Big Bang Theory?\n"
    'Ground truth: ["Jim Parsons", "Iain Armitage"]\n'
    "Prediction: I am sorry I don't know.\n"
    "Accuracy: False\n"
)
# the system message, the two joined as PruningRAG's evaluation joins them (CRAG's local_evaluation.py puts a
# "\n" between them); the user message, as both write it (spaces after the line breaks included)
JUDGE_SYSTEM = JUDGE_INSTRUCTIONS + JUDGE_EXAMPLES
JUDGE_QUERY = "Question: {question}\n Ground truth: {ground_truth}\n Prediction: {prediction}\n"
# what the LLM judge is sent (`LLMJudge.prompt_id`), for caches of judged outcomes (hoprag.routers.outcomes):
# a new prompt re-judges them
JUDGE_PROMPT_ID = hashlib.sha256((JUDGE_SYSTEM + JUDGE_QUERY).encode()).hexdigest()[:12]

LOCAL_SUFFIXES = (".local", ".localhost", ".internal")
# API keys an OpenAI-compatible backend holds when none was given (OpenAICompatLLM's "EMPTY")
NO_KEY = ("", "EMPTY")


def is_local(llm: LLM) -> bool:
    """Whether `llm` runs here: in process (no `base_url`), or served on this machine or a private network
    (see the module docstring); the paper's judge, OpenAI's API, is not."""
    base_url = getattr(llm, "base_url", None)
    if base_url is None:
        return True
    host = urlsplit(base_url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host == "localhost" or host.endswith(LOCAL_SUFFIXES) or "." not in host
    return address.is_loopback or address.is_private or address.is_link_local or address.is_unspecified


def _slug(text: str) -> str:
    """`text` as a judge name: lower-case, every run of other characters than a-z 0-9 . _ + - one "-", and
    starting and ending with a letter or digit."""
    return re.sub(r"[^a-z0-9._+-]+", "-", text.lower()).strip("-._+")


class NormalizedMatchJudge:
    """An offline aid, not CRAG's judge: correct when the prediction equals a gold after SQuAD normalisation
    (case, punctuation, articles, spaces), so "Universal Pictures." matches "universal pictures". No
    paraphrase, unit or format is recognised. Its rates are named `@rule`, and its replies carry
    `RULE_MARK`, so a run's `crag/rule_judged` says how many answers it decided."""

    name = "rule"
    provenance = "an offline aid (equality after SQuAD normalisation), not CRAG's LLM judge"

    def __call__(self, items: list[JudgeItem]) -> list[str]:
        replies = []
        for _, golds, prediction in items:
            match = normalize_answer(prediction) in {normalize_answer(g) for g in golds}
            replies.append(f'{{"accuracy": {json.dumps(match)}, {RULE_MARK}}}')
        return replies


class LLMJudge:
    """CRAG's judge on a `hoprag.llm.LLM`, laid out as CRAG's and PruningRAG's evaluation code sends it: the
    instructions and the three worked examples above as the system message, and per item one user message
    with the question, the ground truth and the prediction (`JUDGE_QUERY`). The ground truth is CRAG's
    `answer` as it is (the code passes that one string); with several golds (`metrics.crag_alt_answers`, our
    option) it is their JSON list, as the examples show lists. All items go in one batched `generate`;
    `generation` overrides the LLM's sampling (greedy and a short reply by default, as the paper's
    temperature-0 judge). Replies are read as that code reads them (`hoprag.metrics.crag.parse_judgement`).

    `name` is the model for a judge behind a remote API, `local-<llm name>` for one that runs here
    (`is_local`). A remote judge without an API key (none given, and OPENAI_API_KEY unset) is refused here,
    so that a run fails when its metrics are built, before its first question, not at its first judgement.
    `provenance` says how this judge stands to the paper's (e.g. that the paper's model is retired and which
    judge replaces it); metrics.json records it with the model (`judge_info`)."""

    prompt_id = JUDGE_PROMPT_ID

    def __init__(self, llm: LLM, generation: Mapping[str, Any] | None = None, provenance: str = "") -> None:
        if not is_local(llm) and getattr(llm, "api_key", "") in NO_KEY:
            where = f"{getattr(llm, 'model', llm.name)} at {getattr(llm, 'base_url', '?')}"
            raise ValueError(
                f"the CRAG judge {where} (a remote API) has no API key: set OPENAI_API_KEY in the environment "
                "(or the judge's llm.api_key, redacted in every file written)"
            )
        self.llm = llm
        self.generation = {"temperature": 0.0, "max_new_tokens": 32, **(generation or {})}
        self.provenance = provenance

    @property
    def name(self) -> str:
        return self.name_for(self.llm)

    @staticmethod
    def name_for(llm: LLM) -> str:
        """The name a judge on `llm` carries (see the class docstring), known without building the judge."""
        if is_local(llm):
            return f"local-{_slug(llm.name)}"
        return _slug(getattr(llm, "model", llm.name))

    def prompt(self, question: str, golds: Sequence[str], prediction: str) -> list[dict[str, str]]:
        ground_truth = golds[0] if len(golds) == 1 else json.dumps(list(golds), ensure_ascii=False)
        query = JUDGE_QUERY.format(question=question, ground_truth=ground_truth, prediction=prediction)
        return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": query}]

    def __call__(self, items: list[JudgeItem]) -> list[str]:
        prompts = [self.prompt(*item) for item in items]
        return [g[0].text for g in self.llm.generate(prompts, stage="judge", **self.generation)]


def judge_info(judge: Any) -> dict[str, Any]:
    """What a run's metrics.json records of the judge that scored its CRAG answers (its `run` section): the name
    its rates carry, the model behind it (None for the rule judge; the served model for an LLM judge) and its
    provenance. Nothing without a judge (the rates are then named `@exact`)."""
    if judge is None:
        return {}
    llm = getattr(judge, "llm", None)
    model = None if llm is None else getattr(llm, "model", llm.name)
    return {"crag_judge": {"name": judge.name, "model": model, "provenance": getattr(judge, "provenance", "")}}
