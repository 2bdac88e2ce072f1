"""The oracle retriever (hoprag/retrieval/oracle.py): inject and withhold over a fake inner retriever, batched queries
mapped to their questions by cost record, refusals instead of guesses, what it counts, its place in the runner
(records, metrics) and its config overlay (`+oracle=`, composed as `--cfg job` shows it, and fingerprinted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from hoprag.cost import Cost
from hoprag.data.corpus import make_passage
from hoprag.data.types import Hop, QAExample
from hoprag.evaluation.fingerprint import EVAL_SECTIONS
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, StandardRAG
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval.oracle import OracleError, OracleRetriever, asking, oracle_metrics, parse_hops
from hoprag.retrieval.retrievers import Hit, Retriever

A1, A2 = make_passage("Alpha", "Alpha was born in Bravo."), make_passage("Bravo", "Bravo is in Charlie.")
B1, B2 = make_passage("Delta", "Delta wrote Echo."), make_passage("Echo", "Echo was published in 1999.")
NOISE = [make_passage(f"Noise {i}", f"Nothing about anything {i}.") for i in range(6)]
CORPUS = [*NOISE, A1, A2, B1, B2]


def example(qid: str, question: str, hops: list[tuple[str, str, str | None]], context) -> QAExample:
    return QAExample(qid, question, [hops[-1][1]], decomposition=[Hop(*h) for h in hops], context=list(context))


QA = example("a", "Where is Alpha's birthplace?",
             [("Alpha born in?", "Bravo", "Alpha"), ("#1 in?", "Charlie", "Bravo")], [A1, A2, NOISE[0]])
QB = example("b", "When was Delta's book published?",
             [("Delta wrote?", "Echo", "Delta"), ("#1 when?", "1999", "Echo")], [B1, B2, NOISE[1]])


class Fixed(Retriever):
    """Ranks the corpus in its own order for every query (noise first), recording each search's depth."""

    def __init__(self, corpus) -> None:
        super().__init__(corpus)
        self.depths: list[int] = []

    def _search(self, queries, k):
        self.depths.append(k)
        return [[Hit(p, 1.0 / (r + 1), r + 1) for r, p in enumerate(list(self.passages)[:k])] for _ in queries]


def titles(hits: list[Hit]) -> list[str]:
    return [h.passage.title for h in hits]


def test_inject_puts_the_hops_gold_on_top_per_question_of_a_batched_search():
    oracle = OracleRetriever(Fixed(CORPUS), mode="inject", hops=[1])
    costs = [Cost(), Cost()]
    with asking([QA, QB], costs) as asked:
        # three queries of two questions in one call: each mapped to its question by its cost record
        found = oracle.search(["sub a", "sub b", "another a"], 3, costs=[costs[0], costs[1], costs[0]])
    assert [titles(h) for h in found] == [["Alpha", "Noise 0", "Noise 1"], ["Delta", "Noise 0", "Noise 1"],
                                          ["Alpha", "Noise 0", "Noise 1"]]  # fmt: skip
    assert [h.rank for h in found[0]] == [1, 2, 3] and found[0][0].passage == A1
    assert asked.report() == [
        {"mode": "inject", "hops": [1], "searches": 2, "injected": 2, "withheld": 0, "unknown": [], "missing": []},
        {"mode": "inject", "hops": [1], "searches": 1, "injected": 1, "withheld": 0, "unknown": [], "missing": []},
    ]
    assert A1.id in costs[0].passage_ids and costs[0].retrieval_calls == 2  # charged what it returned


def test_inject_all_hops_deduplicates_and_keeps_k():
    inner = Fixed([A2, *NOISE])  # the inner retriever already ranks hop 2's gold first
    oracle = OracleRetriever(inner, mode="inject", hops="all")
    with asking([QA], [Cost()]) as asked:
        (hits,) = oracle.search([QA.question], 3)  # no cost record: the question's own text maps it
    assert titles(hits) == ["Alpha", "Bravo", "Noise 0"]  # in hop order, Bravo once
    assert asked.report()[0]["injected"] == 1  # Bravo was already among the inner top 3


def test_two_hops_on_one_passage_inject_it_once():
    same = example("s", "Q?", [("a?", "Bravo", "Alpha"), ("b?", "Bravo", "Alpha"), ("c?", "x", "Delta")], [A1, B1])
    with asking([same], [Cost()]) as asked:
        (hits,) = OracleRetriever(Fixed(NOISE), mode="inject", hops="all").search(["q"], 3)
    assert titles(hits) == ["Alpha", "Delta", "Noise 0"] and asked.report()[0]["injected"] == 2


def test_withhold_filters_the_gold_and_the_next_hits_fill_k():
    inner = Fixed([A1, NOISE[0], B1, A2, *NOISE[1:]])
    oracle = OracleRetriever(inner, mode="withhold", hops=[1])
    costs = [Cost(), Cost()]
    with asking([QA, QB], costs) as asked:
        found = oracle.search(["q a", "q b"], 3, costs=costs)
    assert [titles(h) for h in found] == [["Noise 0", "Delta", "Bravo"], ["Alpha", "Noise 0", "Bravo"]]
    assert inner.depths == [4]  # searched one deeper: the corpus holds one passage with each withheld title
    assert [r["withheld"] for r in asked.report()] == [1, 1]
    assert A1.id not in costs[0].passage_ids and B1.id not in costs[1].passage_ids


def test_withhold_all_hops_and_hops_past_the_chain():
    oracle = OracleRetriever(Fixed([A1, A2, *NOISE]), mode="withhold", hops="all")
    with asking([QA], [Cost()]):
        (hits,) = oracle.search(["anything"], 2)  # one question in the batch: any query is its own
    assert titles(hits) == ["Noise 0", "Noise 1"]
    past = OracleRetriever(Fixed([A1, *NOISE]), mode="withhold", hops=[3])
    with asking([QA], [Cost()]) as asked:
        (hits,) = past.search(["anything"], 2)
    assert titles(hits) == ["Alpha", "Noise 0"] and asked.report()[0]["withheld"] == 0


def test_unknown_and_missing_gold_passages_are_counted_not_guessed():
    unknown = example("u", "Who?", [("x?", "y", None), ("z?", "w", "Nowhere")], [])
    oracle = OracleRetriever(Fixed(NOISE), mode="inject", hops="all")
    with asking([unknown], [Cost()]) as asked:
        (hits,) = oracle.search(["who"], 2)
    assert titles(hits) == ["Noise 0", "Noise 1"]  # nothing known to inject: the inner hits as they were
    assert asked.report()[0] | {} == {"mode": "inject", "hops": "all", "searches": 1, "injected": 0, "withheld": 0,
                                      "unknown": [1], "missing": [2]}  # fmt: skip


def test_the_gold_passage_is_the_context_one_holding_the_hops_answer():
    other = make_passage("Alpha", "Alpha is also a letter.")
    ex = example("c", "Where is Alpha's birthplace?", [("Alpha born in?", "Bravo", "Alpha")], [other, A1])
    with asking([ex], [Cost()]):
        (hits,) = OracleRetriever(Fixed(NOISE), hops=[1]).search(["q"], 1)
    assert hits[0].passage == A1
    corpus_only = example("d", "Q?", [("s?", "Charlie", "Bravo")], [])  # no context: the corpus's passage
    with asking([corpus_only], [Cost()]):
        (hits,) = OracleRetriever(Fixed(CORPUS), hops=[1]).search(["q"], 1)
    assert hits[0].passage == A2


def test_refusals_instead_of_guesses():
    oracle = OracleRetriever(Fixed(CORPUS), mode="inject")
    with pytest.raises(OracleError, match="inside the runner's `asking`"):
        oracle.search(["q"], 2)
    with asking([QA, QB], [Cost(), Cost()]), pytest.raises(OracleError, match="cannot tell which of 2 questions"):
        oracle.search(["a sub-question"], 2)  # no cost record, not a question's text, two questions
    with pytest.raises(OracleError, match="oracle.mode"):
        OracleRetriever(Fixed(CORPUS), mode="reveal")
    for bad in ("first", [0], [], [True]):
        with pytest.raises(OracleError, match="oracle.hops"):
            parse_hops(bad)
    assert parse_hops("all") is None and parse_hops(2) == [2] and parse_hops([2, 1, 2]) == [1, 2]


def test_other_attributes_are_the_inner_retrievers():
    inner = Fixed(CORPUS)
    inner.embedder = "the embedder"
    oracle = OracleRetriever(inner, mode="withhold")
    assert oracle.embedder == "the embedder" and oracle.corpus is inner.corpus
    with pytest.raises(AttributeError):
        oracle.index  # noqa: B018


def test_the_runner_records_what_the_oracle_did_and_the_gold_chain(tmp_path):
    prompt = ChatPrompt("Use the passages.", "{passages}\n\nQuestion: {question}\nAnswer:")
    llm = ScriptedLLM(rules=[(r"\[1\] ([^\n]*)", r"Answer: \1", -0.5)])
    method = StandardRAG(llm, OracleRetriever(Fixed(CORPUS), mode="inject", hops=[2]), prompt=prompt, k=2)
    metrics = run(method, [QA, QB], tmp_path, batch_size=2)
    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [r["prediction"] for r in records] == ["Bravo", "Echo"]  # hop 2's gold on top, the scripted reply
    assert [r["oracle"]["injected"] for r in records] == [1, 1] and "oracle" not in records[0]["trace"]
    assert records[0]["gold_hops"] == [{"question": "Alpha born in?", "answer": "Bravo", "title": "Alpha"},
                                       {"question": "#1 in?", "answer": "Charlie", "title": "Bravo"}]  # fmt: skip
    assert metrics["oracle/questions"] == 2 and metrics["oracle/injected"] == 2 and metrics["oracle/withheld"] == 0
    assert oracle_metrics([{"id": "x"}]) == {}  # a run without the oracle reports none


def test_the_overlay_composes_as_cfg_job_shows_it_and_enters_the_fingerprint(compose_cfg):
    cfg = compose_cfg("eval", ["+method=standard_rag", "data=musique", "+oracle=withhold", "oracle.hops=all"])
    assert cfg.oracle.mode == "withhold" and cfg.oracle.hops == "all" and cfg.retriever._target_.endswith("Retriever")
    assert "oracle" in EVAL_SECTIONS  # fingerprinted where set: an oracle run never resumes a normal one's directory
    shown = subprocess.run(
        [sys.executable, "eval.py", "+method=standard_rag", "data=musique", "+oracle=inject", "retriever=bm25",
         "--cfg", "job"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    job = yaml.safe_load(shown.stdout)
    assert job["oracle"] == {"_target_": "hoprag.retrieval.oracle.OracleRetriever", "_partial_": True,
                             "mode": "inject", "hops": [1]}  # fmt: skip
    assert job["retriever"]["_target_"] == "hoprag.retrieval.BM25Retriever"  # the inner retriever, as chosen
