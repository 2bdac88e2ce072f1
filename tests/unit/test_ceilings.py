"""Issue 27 item 6: TreeRare, PruneRAG and MCTS have a declared per-question ceiling; a question that reaches it
stops growing in a defined way, counts in `method/capped` (1 for it, 0 for the others) and its trace says where.
Scripted LLMs, fake parsers and retrievers only."""

from __future__ import annotations

import json
import logging
from functools import partial

import pytest

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods.prunerag import PruneRAG
from hoprag.methods.sc_rag_search import SCRAGSearch
from hoprag.methods.treerare import TreeRare
from hoprag.search.mcts import AnswerSearch, MCTSConfig
from hoprag.search.sc_rag_answer import parse_answer, render_snippets
from hoprag.search.treerare import SyntaxNode, SyntaxTree, TreeRareSearch
from hoprag.verifiers import ScriptedVerifier
from hoprag.verifiers.reward import EvidenceExtractor, NLIReward
from tests.fakes import KeywordRetriever
from tests.unit.test_prunerag import prunerag as wired

CORPUS = [Passage(f"p{i}", f"Title {i}", f"word{i} text number {i}") for i in range(6)]
LONG = " ".join(f"w{i}" for i in range(300)) + " ?"  # a 300-word question
SHORT = "Who sang the theme music for the show Dear John ?"


class BinaryParser:
    """A balanced binary constituency tree over the question's words: a long question's parse is a big tree."""

    def parse(self, questions):
        return [SyntaxTree(q, self.node(q.split()), "ct") for q in questions]

    def node(self, words):
        if len(words) == 1:
            return SyntaxNode(words[0], "NN")
        mid = len(words) // 2
        return SyntaxNode(" ".join(words), "NP", [self.node(words[:mid]), self.node(words[mid:])])


def treerare(**search) -> TreeRare:
    rules = [
        (r"Phrase: ", "response: first query; second query"),
        (r"Questions: ", "Some evidence."),
        (r"Answer the question using", "Explanations: step by step.\nFINAL: Simply Red"),
    ]
    llm = ScriptedLLM(rules=rules)
    return TreeRare(llm, KeywordRetriever(CORPUS), {"ct": BinaryParser()}, partial(TreeRareSearch, k=2, **search),
                    tree="ct")  # fmt: skip


def test_a_300_word_question_stops_at_treerares_default_ceiling_and_says_so(tmp_path, caplog):
    examples = [QAExample("long", LONG, ["Simply Red"]), QAExample("short", SHORT, ["Simply Red"])]
    with caplog.at_level(logging.WARNING):
        metrics = run(treerare(), examples, tmp_path / "run")
    assert metrics["method/capped"] == 0.5  # one question of two
    long, short = (json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines())
    assert long["stats"]["capped"] == 1 and short["stats"]["capped"] == 0
    assert long["stats"]["processed_nodes"] == 64 and long["cost"]["llm_calls"] == 2 * 64 + 1
    record = long["trace"]["tree"]["capped"]
    assert (record["limit"], record["value"], record["skipped"]) == ("max_nodes", 64, record["kept_nodes"] - 64)
    assert record["kept_nodes"] > 64 and short["trace"]["tree"]["capped"] is None
    assert "max_nodes=64" in caplog.text
    nodes = long["trace"]["tree"]["nodes"]
    assert nodes[-1]["phrase"] == LONG  # the root is answered from; the deepest, shortest phrases were skipped
    for node in nodes:
        assert node["height"] == 1 + max((nodes[c]["height"] for c in node["children"]), default=0)
    # breadth first from the root: the top six levels of the binary tree (63 phrases of 9+ words), and one more
    assert sum(len(n["phrase"].split()) < 9 for n in nodes) == 1


def test_treerare_capping_keeps_the_nodes_nearest_the_root_and_a_bad_ceiling_is_refused():
    costs = [Cost()]
    (out,) = treerare(max_nodes=3).answer([QAExample("q", SHORT, ["x"])], costs)
    phrases = [n["phrase"] for n in out.trace["tree"]["nodes"]]
    words = SHORT.split()
    assert phrases == [" ".join(words[:5]), " ".join(words[5:]), SHORT]  # the root and its two children
    assert out.stats["capped"] == 1 and costs[0].llm_calls == 2 * 3 + 1
    with pytest.raises(ValueError, match="method.search.max_nodes"):
        treerare(max_nodes=0)


SPLIT = r"Query: ([^\n]*)\nOutput:$"  # any decision prompt: every node wants to split in two
FINAL = (r"### Inference Tree", r"\\boxed{June 1844}", -0.1)


def prunerag(**knobs) -> PruneRAG:
    rules = [FINAL, (r"Query: answer me\nOutput:$", '{"type": "answer", "answer": "June 1844"}', [-0.01] * 6),
             (SPLIT, '{"type": "decomposition", "subquery1": "\\1 a", "subquery2": "\\1 b"}')]  # fmt: skip
    return wired(ScriptedLLM(rules=rules, default_reply="no idea"), KeywordRetriever(CORPUS), **knobs)


def test_prunerag_stops_splitting_at_max_nodes_and_the_node_left_whole_is_traced():
    method = prunerag(max_depth=3, max_nodes=5)
    examples = [QAExample("q0", "split me", ["June 1844"]), QAExample("q1", "answer me", ["June 1844"])]
    capped, answered = method.answer(examples, [Cost(), Cost()])
    tree = capped.trace["tree"]
    assert tree["status"] == "decomposed"
    first, second = tree["children"]
    assert first["status"] == "decomposed" and len(first["children"]) == 2  # 3 + 2 = 5 nodes: fits
    assert second["status"] == "capped" and second["children"] == [] and second["passages"]  # 7 would not
    assert capped.stats["tree_nodes"] == 5 and capped.stats["capped"] == 1
    assert capped.trace["capped"] == {"limit": "max_nodes", "value": 5, "splits_not_made": ["split me b"]}
    assert answered.stats["capped"] == 0 and "capped" not in answered.trace


def test_prunerags_default_ceiling_never_touches_the_papers_full_tree():
    (out,) = prunerag(max_depth=3).answer([QAExample("q", "split me", ["x"])], [Cost()])
    assert out.stats["tree_nodes"] == 7 and out.stats["capped"] == 0
    with pytest.raises(ValueError, match="method.builder.max_nodes"):
        prunerag(max_nodes=0)


def mcts(**config) -> AnswerSearch:
    reply = json.dumps({"answer": "Paris", "evidence_doc_ids": [1], "reasoning": ""})
    return AnswerSearch(
        ScriptedLLM(default_reply=reply),
        prompt=lambda q, ctx: f"Question: {q}\n{render_snippets(ctx)}",
        parse=lambda raw: parse_answer(raw, str.strip),
        reward=NLIReward(ScriptedVerifier(rules=[], default=(0.6, 0.3, 0.1)), EvidenceExtractor()),
        retriever=KeywordRetriever(CORPUS),
        **{"simulations": 6, "branching": 2, "max_depth": 3, **config},
    )


def test_mcts_stops_simulating_a_question_at_max_llm_calls_and_traces_after_how_many():
    costs = [Cost(), Cost()]
    capped = mcts(max_llm_calls=4).run(["q1?", "q2?"], [CORPUS[:1], CORPUS[1:2]], costs)
    free = mcts().run(["q1?"], [CORPUS[:1]], [Cost()])
    for tree, cost in zip(capped, costs):
        assert tree.llm_calls == cost.llm_calls <= 4 and tree.simulations < 6
        assert tree.to_trace()["capped"] == {
            "limit": "max_llm_calls", "value": 4, "simulations_run": tree.simulations, "simulations": 6,
        }  # fmt: skip
        assert SCRAGSearch._stats(tree, tree.best())["capped"] == 1
    (tree,) = free
    assert tree.simulations == 6 and tree.to_trace()["capped"] is None
    assert SCRAGSearch._stats(tree, tree.best())["capped"] == 0
    with pytest.raises(ValueError, match="method.search.max_llm_calls"):
        MCTSConfig(max_llm_calls=1)  # not even one simulation (an expansion and a rollout)
