"""Progress bars (issue 18 item 4, issue 27 item 7): one shared decision (a terminal: bars; a log or a pipe: plain
lines at most every `INTERVAL` seconds; CI=true: nothing; HOPRAG_PROGRESS or the entry points' `progress=` key
forcing it), and every minutes-long loop ticking through `hoprag.utils.progress.bar`: the runner's questions (with
LLM calls and tokens so far), encoding (index building and TreeHop's data), BM25 building, TreeRare levels, MCTS
simulations and PruneRAG rounds. No model is loaded."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage
from hoprag.llm import ScriptedLLM
from hoprag.retrieval.dense import DenseIndex
from hoprag.retrieval.sparse import BM25Index
from hoprag.search.mcts import AnswerSearch
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
    assert progress.enabled(Terminal())
    assert progress.style(io.StringIO()) == progress.LINES  # forced on a log: lines, not carriage returns
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
        simulations=5,
        branching=2,
        max_depth=3,
    )
    corpus = passages(3)
    search.run(["q1?", "q2?", "q3?"], [corpus[:1], corpus[1:2], corpus[2:]], [Cost(), Cost(), Cost()])
    (bar,) = bars.bars
    assert bar.kwargs["total"] == 5 and bar.kwargs["unit"] == "simulation" and "3 questions" in bar.kwargs["desc"]
    assert bar.ticks == [1] * 5
    assert [(p["questions"], p["nodes"], p["llm_calls"]) for p in bar.postfixes][:2] == [(3, 3, 0), (3, 3 * 3, 3)]
    assert bar.postfixes[0]["tokens"] == 0 < bar.postfixes[1]["tokens"]  # 3 roots, then 2 answers each: 9 nodes


def test_prunerag_ticks_per_round_with_the_questions_still_open(bars):
    split = json.dumps({"type": "decomposition", "subquery1": "first part", "subquery2": "second part"})
    llm = ScriptedLLM(rules=[(r"Query: split me\nOutput:$", split)], default_reply="no idea")  # no idea: a leaf
    builder = PruneTreeBuilder(llm, KeywordRetriever(passages(4)), k=2, max_depth=4)
    costs = [Cost(), Cost()]
    builder.build(["split me", "answer me"], costs)
    (bar,) = bars.bars
    assert bar.kwargs["total"] == 3 and bar.kwargs["unit"] == "round"
    assert bar.ticks == [1, 1]  # round 2 left nothing pending: the third round never runs
    assert [(p["questions"], p["nodes"], p["llm_calls"]) for p in bar.postfixes] == [(2, 2, 0), (1, 2, 2)]
    assert bar.postfixes[0]["tokens"] == 0 < bar.postfixes[1]["tokens"]  # the calls and tokens so far


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


def no_retrieval_run(tmp_path, n: int = 3, batch_size: int = 2) -> dict:
    from hoprag.data.types import QAExample
    from hoprag.evaluation.runner import run
    from hoprag.methods import ChatPrompt
    from hoprag.methods.no_retrieval import NoRetrieval

    examples = [QAExample(f"q{i}", f"question {i}?", ["yes"]) for i in range(n)]
    method = NoRetrieval(ScriptedLLM(default_reply="yes"), prompt=ChatPrompt("Be brief.", "{question}"))
    return run(method, examples, tmp_path / "run", batch_size=batch_size)


@pytest.fixture
def piped(env, capsys):
    """stderr is a pipe (pytest's capture), progress lines are not throttled, and no line was written yet."""
    env.setenv(progress.OVERRIDE, "auto")  # so that `configure` below is undone after the test
    env.setattr(progress, "INTERVAL", 0.0)
    env.setattr(progress.LineBar, "last_line", -math.inf)
    return capsys


def test_a_piped_run_with_progress_on_prints_plain_lines_with_llm_calls_and_tokens(piped, tmp_path):
    progress.configure(True)
    no_retrieval_run(tmp_path)
    err = piped.readouterr().err
    assert "\r" not in err  # lines, not a redrawn bar
    lines = err.splitlines()
    assert lines[0].startswith("no_retrieval: 0/3 q") and lines[-1].startswith("no_retrieval: 3/3 q")
    assert "llm_calls=3, tokens=" in lines[-1]


def test_progress_false_silences_every_bar_and_line(piped, tmp_path):
    progress.configure(False)
    no_retrieval_run(tmp_path)
    assert piped.readouterr().err == ""
    assert progress.style(Terminal()) == progress.OFF


def test_auto_prints_lines_on_a_pipe_unless_ci(env):
    assert progress.style(io.StringIO()) == progress.LINES  # a piped run is never silent
    assert progress.style(Terminal()) == progress.BAR
    env.setenv("CI", "true")
    assert progress.style(io.StringIO()) == progress.OFF


def test_the_progress_setting_takes_true_false_or_auto_and_names_a_bad_value(env):
    env.setenv(progress.OVERRIDE, "auto")
    progress.configure("auto")
    assert progress.style(io.StringIO()) == progress.LINES
    progress.configure(False)
    assert progress.style(Terminal()) == progress.OFF
    progress.configure(True)
    env.setenv("CI", "true")
    assert progress.style(io.StringIO()) == progress.LINES
    with pytest.raises(ValueError, match="progress must be true, false or auto, got 'maybe'"):
        progress.configure("maybe")


def test_lines_on_a_log_come_at_most_once_an_interval_plus_the_final_state(env):
    env.setattr(progress, "INTERVAL", 3600.0)
    env.setattr(progress.LineBar, "last_line", -math.inf)
    log = io.StringIO()
    with progress.bar(total=4, desc="outer", unit="q", file=log) as outer:
        for i in range(4):
            with progress.bar(total=2, desc="inner", unit="level", leave=False, file=log) as inner:
                inner.set_postfix(nodes=i)
                inner.update(2)
            outer.set_postfix(llm_calls=i)
            outer.update()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and lines[0] == "outer: 0/4 q [00:00<?, ?q/s]"  # the start; the inner bars: nothing
    assert lines[1].startswith("outer: 4/4 q") and "llm_calls=3" in lines[1]  # the final state of a bar that stays


def test_treerare_ticks_per_tree_level_with_its_nodes_and_the_calls_so_far(bars):
    from hoprag.data.types import QAExample
    from hoprag.methods.treerare import TreeRare
    from hoprag.search.treerare import SyntaxTree, from_bracketed

    tree = "(ROOT (S (NP (DT the) (NN theme) (NN music)) (VP (VBD was) (NP (JJ very) (JJ very) (NN loud)))))"

    class Parser:
        def parse(self, questions):
            return [SyntaxTree(q, from_bracketed(tree), "ct") for q in questions]

    llm = ScriptedLLM(rules=[(r"Phrase: ", "response: one; two"), (r"Answer the question", "FINAL: x")],
                      default_reply="evidence")  # fmt: skip
    # kept: the theme music, very very loud (height 1), was very very loud (2), S (3), ROOT (4): 5 nodes a question
    for batching, unit, ticks, first in (("level", "level", 4, 2 * 2), ("node", "node", 2 * 5, 1)):
        bars.bars.clear()
        method = TreeRare(llm, KeywordRetriever(passages(4)), {"ct": Parser()}, tree="ct", batching=batching)
        method.answer([QAExample("a", "q one", ["x"]), QAExample("b", "q two", ["x"])], [Cost(), Cost()])
        (bar,) = bars.bars
        assert bar.kwargs["unit"] == unit and bar.kwargs["total"] == ticks and bar.ticks == [1] * ticks
        assert "2 questions" in bar.kwargs["desc"]
        assert bar.postfixes[0] == {"nodes": first, "llm_calls": 0, "tokens": 0}
        assert bar.postfixes[-1]["llm_calls"] > 0 and bar.postfixes[-1]["tokens"] > 0


def test_a_final_state_already_written_is_not_written_twice(env):
    env.setattr(progress, "INTERVAL", 0.0)  # every update writes a line
    env.setattr(progress.LineBar, "last_line", -math.inf)
    log = io.StringIO()
    with progress.bar(total=2, desc="encoding", unit="passage", file=log) as bar:
        bar.update(2)
    lines = log.getvalue().splitlines()
    assert lines[-1].startswith("encoding: 2/2 passage") and not lines[-2].startswith("encoding: 2/2")
