"""Progress bars (issue 18 item 4): one shared decision (a terminal, not CI=true, or HOPRAG_PROGRESS forcing it),
and every minutes-long loop ticking through `hoprag.utils.progress.bar`: encoding (index building and TreeHop's
data), BM25 building, MCTS simulations and PruneRAG rounds. No model is loaded."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from hoprag.data.types import Passage
from hoprag.llm import ScriptedLLM
from hoprag.retrieval.dense import DenseIndex
from hoprag.retrieval.sparse import BM25Index
from hoprag.search.mcts import AnswerSearch, MCTSConfig
from hoprag.search.prunerag.builder import PruneTreeBuilder
from hoprag.search.sc_rag_answer import parse_answer, render_snippets
from hoprag.treehop.data import ENCODE_CHUNK, embed_cached
from hoprag.utils import progress
from hoprag.verifiers import ScriptedVerifier
from hoprag.verifiers.reward import EvidenceExtractor, NLIReward
from tests.fakes import HashEmbedder, KeywordRetriever


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def env(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(progress.OVERRIDE, raising=False)
    return monkeypatch


def test_bars_show_on_a_terminal_only(env):
    assert progress.enabled(Terminal())
    assert not progress.enabled(io.StringIO())  # a log file or a pipe


@pytest.mark.parametrize("ci", ["true", "TRUE", "1"])
def test_ci_quiets_bars_even_on_a_terminal(env, ci):
    env.setenv("CI", ci)
    assert not progress.enabled(Terminal())
    assert progress.bar(total=3, desc="x", unit="step").disable


def test_the_override_forces_either_way_and_a_typo_is_refused(env):
    env.setenv("CI", "true")
    env.setenv(progress.OVERRIDE, "1")
    assert progress.enabled(io.StringIO())
    env.delenv("CI")
    env.setenv(progress.OVERRIDE, "off")
    assert not progress.enabled(Terminal())
    env.setenv(progress.OVERRIDE, "maybe")
    with pytest.raises(ValueError, match=progress.OVERRIDE):
        progress.enabled()


def test_an_explicit_show_wins_over_the_decision(env):
    env.setenv("CI", "true")
    assert not progress.bar(total=1, desc="x", unit="step", show=True).disable


class Recorder:
    """Stands in for `progress.bar`: keeps every bar's arguments, ticks and postfixes."""

    def __init__(self) -> None:
        self.bars: list[Recorder.Bar] = []

    class Bar:
        def __init__(self, **kwargs) -> None:
            self.kwargs, self.ticks, self.postfixes = kwargs, [], []

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            pass

        def update(self, n: int = 1) -> None:
            self.ticks.append(n)

        def set_postfix(self, **values) -> None:
            self.postfixes.append(values)

    def __call__(self, **kwargs):
        self.bars.append(Recorder.Bar(**kwargs))
        return self.bars[-1]


@pytest.fixture
def bars(monkeypatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(progress, "bar", recorder)
    return recorder


def passages(n: int) -> list[Passage]:
    return [Passage(f"p{i}", f"Title {i}", f"word{i} text number {i}") for i in range(n)]


def test_index_building_ticks_per_chunk_under_the_shared_decision(bars):
    DenseIndex.build(passages(300), HashEmbedder(), chunk_size=64)
    (bar,) = bars.bars
    assert bar.kwargs["total"] == 300 and bar.kwargs["unit"] == "passage" and bar.kwargs["show"] is None
    assert bar.ticks == [64, 64, 64, 64, 44]


def test_bm25_building_asks_the_shared_decision(monkeypatch):
    asked = []
    monkeypatch.setattr(progress, "enabled", lambda: asked.append(True) or False)
    BM25Index.build(passages(5))
    assert asked == [True]


def test_treehop_data_encoding_shows_a_bar_over_its_passages(bars, tmp_path):
    n = 2 * ENCODE_CHUNK + 76
    embedded = embed_cached(["q one", "q two"], passages(n), HashEmbedder(), tmp_path)
    (bar,) = bars.bars
    assert bar.kwargs["total"] == n and bar.ticks == [ENCODE_CHUNK, ENCODE_CHUNK, 76]
    assert embedded.passages.shape == (n, 64) and embedded.questions.shape == (2, 64)
    assert np.allclose(embedded.passages, HashEmbedder().encode_passages(passages(n)))  # chunking changes nothing
    embed_cached(["q one", "q two"], passages(n), HashEmbedder(), tmp_path)
    assert len(bars.bars) == 1  # loaded from the cache: nothing encoded, no bar


def test_mcts_ticks_once_per_simulation_naming_its_question_count(bars):
    reply = json.dumps({"answer": "Paris", "evidence_doc_ids": [1], "reasoning": ""})
    verifier = ScriptedVerifier(rules=[], default=(0.6, 0.3, 0.1))
    search = AnswerSearch(
        ScriptedLLM(default_reply=reply),
        prompt=lambda q, ctx: f"Question: {q}\n{render_snippets(ctx)}",
        parse=lambda raw: parse_answer(raw, str.strip),
        reward=NLIReward(verifier, EvidenceExtractor()),
        config=MCTSConfig(simulations=5, branching=2, max_depth=3),
    )
    corpus = passages(3)
    search.run(["q1?", "q2?", "q3?"], [corpus[:1], corpus[1:2], corpus[2:]])
    (bar,) = bars.bars
    assert bar.kwargs["total"] == 5 and bar.kwargs["unit"] == "simulation" and "3 questions" in bar.kwargs["desc"]
    assert bar.ticks == [1] * 5


def test_prunerag_ticks_per_round_with_the_questions_still_open(bars):
    split = json.dumps({"type": "decomposition", "subquery1": "first part", "subquery2": "second part"})
    llm = ScriptedLLM(rules=[(r"Query: split me\nOutput:$", split)], default_reply="no idea")  # no idea: a leaf
    builder = PruneTreeBuilder(llm, KeywordRetriever(passages(4)), k=2, max_depth=4)
    builder.build(["split me", "answer me"], [None, None])
    (bar,) = bars.bars
    assert bar.kwargs["total"] == 3 and bar.kwargs["unit"] == "round"
    assert bar.ticks == [1, 1]  # round 2 left nothing pending: the third round never runs
    assert bar.postfixes == [{"questions": 2, "nodes": 2}, {"questions": 1, "nodes": 2}]


def test_the_evaluation_runner_asks_the_shared_decision(monkeypatch, tmp_path):
    from hoprag.data.types import QAExample
    from hoprag.evaluation.runner import run
    from hoprag.methods import ChatPrompt
    from hoprag.methods.no_retrieval import NoRetrieval

    calls = []
    real = progress.bar
    monkeypatch.setattr(progress, "bar", lambda **kw: calls.append(kw) or real(**{**kw, "show": False}))
    examples = [QAExample(f"q{i}", f"question {i}?", ["yes"]) for i in range(3)]
    method = NoRetrieval(ScriptedLLM(default_reply="yes"), prompt=ChatPrompt("Be brief.", "{question}"))
    run(method, examples, tmp_path / "run", batch_size=2)
    assert [(c["total"], c["unit"]) for c in calls] == [(3, "q")]
