"""The question explorer's data (`hoprag.compare.explorer`): each run's answer, verdict scores, passages read with
gold ones and their hops marked, cost and drawn trace per question; the plugged-in per-question fields and tags;
the cap on questions; JSON that cannot close its script element; and each method's trace drawn from the shape
its own code records (PruneRAG, ProbTree, TreeRare, MCTS, TreeHop) or, for any other shape, as a nested list.
The page itself is tested in a headless browser: tests/browser/test_explorer_page.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hoprag.compare import build, write
from hoprag.compare.explorer import embedded_json, explorer_data
from hoprag.compare.explorer_trees import drawings
from hoprag.data.types import Passage
from hoprag.search.mcts import Node as MctsNode
from hoprag.search.mcts import SearchTree
from hoprag.search.probtree.reasoning import Candidate
from hoprag.search.probtree.tree import Node as ProbNode
from hoprag.search.prunerag.tree import Node as PruneNode
from hoprag.search.sc_rag_answer import ParsedAnswer
from hoprag.search.treerare.traversal import NodeRecord, QuestionTree
from tests.unit.test_compare import record, retrieval_run

N = 6
BASE_RIGHT, TREE_RIGHT = {0, 1, 2}, {1, 2, 3, 4}  # q0: base right, tree wrong; q3, q4: the other way round


def prunerag_trace(i: int) -> dict:
    """A PruneRAG tree as the method records it: the question split into a sub-query and an entity."""
    root = PruneNode(f"q{i}?", "query", 1, passages=[Passage("p-A", "A", "")], status="decomposed")
    sub = root.add_child(f"Who founded A{i}?", "query")
    sub.status, sub.answer, sub.confidence, sub.passages = "answered", "Bob", 0.93, [Passage("p-B", "B", "")]
    root.add_child("B", "entity")
    return {"tree": root.to_dict(), "output": "raw reply", "aggregation": "tree"}


def explorer_runs(tmp_path: Path) -> list[str]:
    """Two run directories over N questions (gold titles A and B): `base` reads A and X, `tree` reads A and B
    and records a PruneRAG tree; each right (EM 1) on its own questions. Each question has a gold chain: A, then B."""
    runs = []
    for name, titles, right in (("base", ["A", "X"], BASE_RIGHT), ("tree", ["A", "B"], TREE_RIGHT)):
        records = []
        for i in range(N):
            r = record(i, ["A", "B"], titles, answer="yes")
            r["question"] = f"Is {i} a number, question {i}?"
            r["prediction"] = "yes" if i in right else "no"
            r["scores"] = {"em": float(i in right), "f1": float(i in right), "acc": float(i in right)}
            r["gold_hops"] = [{"question": f"Who founded A{i}?", "answer": "Bob", "title": "A"},
                              {"question": "Is Bob in B?", "answer": "yes", "title": "B"}]  # fmt: skip
            if name == "tree":
                r["trace"] = prunerag_trace(i)
            records.append(r)
        em = 100 * len(right) / N
        retrieval_run(tmp_path / name, records, {"em": em}, [f"+method={name}"])
        runs.append(str(tmp_path / name))
    return runs


def test_each_question_holds_every_runs_answer_passages_cost_and_tree(tmp_path):
    data = explorer_data(build(explorer_runs(tmp_path), resamples=20))
    assert [r["name"] for r in data["runs"]] == ["+method=base", "+method=tree"]
    assert [q["i"] for q in data["questions"]] == [f"q{i}" for i in range(N)] and data["total"] == N
    q0 = data["questions"][0]
    assert (q0["q"], q0["g"], q0["st"]) == ("Is 0 a number, question 0?", ["yes"], ["A", "B"])
    base, tree = q0["r"]
    assert (base["a"], base["s"]["em"], tree["a"], tree["s"]["em"]) == ("yes", 1.0, "no", 0.0)
    assert base["p"] == [["p-A", 1, "", 1], ["p-X", 0, "", 0]]  # in reading order, gold by title, its gold hop
    assert tree["p"] == [["p-A", 1, "depth 1", 1], ["p-B", 1, "depth 2", 2]]  # the tree node that retrieved each
    assert q0["gh"] == [["Who founded A0?", "Bob", "A"], ["Is Bob in B?", "yes", "B"]]
    assert data["passages"]["p-X"][0] == "X" and data["passages"]["p-X"][1].startswith("X X1")
    assert base["c"] == {"llm_calls": 1, "prompt_tokens": 10, "completion_tokens": 1, "retrieval_calls": 1,
                         "seconds": 0.1, "stages": {"answer": 0.1}}  # fmt: skip
    assert base["t"] == [] and [v["name"] for v in tree["t"]] == ["PruneRAG tree", "rest of the trace"]
    root = tree["t"][0]["root"]
    assert root["t"] == "q0?" and [c["t"] for c in root["c"]] == ["Who founded A0?", "B"]
    answered = root["c"][0]
    assert answered["x"] == 1 and ["answer", "Bob"] in answered["d"] and answered["b"] == "query · answered"
    assert [r["key"] for r in data["rules"]] == ["em", "acc", "f1"] and data["filters"] == [] and data["tags"] == []


def test_plugged_in_fields_and_tags_become_filters_and_the_page_keeps_at_most_the_limit(tmp_path):
    comparison = build(explorer_runs(tmp_path), resamples=20)
    extra = {
        "q0": {"+method=tree": {"failure": "missed hop 2", "hops_missed": [2]}, "base": {"shortcut": True}},
        "q3": {"+method=tree": {"failure": "none", "hops_missed": [], "recall": float("nan")}},
    }
    data = explorer_data(comparison, extra=extra, tags={"q1": ["bridge"], "q2": ["comparison", "bridge"]})
    base, tree = data["questions"][0]["r"]
    assert tree["x"] == {"failure": "missed hop 2", "hops_missed": [2]} and base["x"] == {"shortcut": True}  # by dir
    assert "x" not in data["questions"][1]["r"][1] and data["questions"][3]["r"][1]["x"]["recall"] is None  # JSON
    assert {f["key"]: f["values"] for f in data["filters"]} == {
        "failure": ["missed hop 2", "none"], "hops_missed": [2], "shortcut": [True], "recall": [None]}  # fmt: skip
    assert data["tags"] == ["bridge", "comparison"] and data["questions"][2]["tg"] == ["comparison", "bridge"]
    capped = explorer_data(comparison, limit=4)
    assert len(capped["questions"]) == 4 and (capped["total"], capped["limit"]) == (N, 4)


def test_the_embedded_json_cannot_close_its_script_and_the_page_is_self_contained(tmp_path):
    data = {"a": "</script><script>alert(1)</script><!--"}
    assert "<" not in embedded_json(data) and json.loads(embedded_json(data)) == data
    runs = explorer_runs(tmp_path)
    write(build(runs, resamples=20), tmp_path / "out")
    page = (tmp_path / "out" / "explorer.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.count("<script") == 2
    assert not re.search(r"(src|href)\s*=\s*[\"'](?!data:)", page) and "<link" not in page and "@import" not in page
    embedded = re.search(r'<script type="application/json" id="data">(.*?)</script>', page, re.S)[1]
    assert [q["i"] for q in json.loads(embedded)["questions"]] == [f"q{i}" for i in range(N)]


def test_probtree_treerare_mcts_and_treehop_traces_are_drawn_from_their_recorded_shapes():
    root = ProbNode("Who is older?", passages=[Passage("p1", "P1", "")])
    child = ProbNode("When was A born?", depth=2, parent=root, passages=[Passage("p2", "P2", "")])
    root.children = [child]
    root.candidates = [Candidate("closed_book", "A", -0.5, "..."), Candidate("child_aggregating", "B", -0.1, "...")]
    root.chosen = root.candidates[1]
    views, hops = drawings({"tree": root.to_dict(), "decomposition": "{...}"})
    view = views[0]
    assert view["name"] == "ProbTree tree" and view["root"]["t"] == "Who is older?" and view["root"]["b"] == "answer: B"
    assert ["child_aggregating (chosen)", "B (score -0.1)"] in view["root"]["d"]
    assert view["root"]["c"][0]["t"] == "When was A born?" and hops == {"p1": "depth 1", "p2": "depth 2"}

    leaf = NodeRecord("the director of Up", "pobj", 1, [], queries=["Up director"], passages=[Passage("p3", "Up", "")])
    top = NodeRecord("Who is the director of Up?", "ROOT", 2, [0], queries=["director of Up"])
    views, hops = drawings({"tree": QuestionTree("Who ...?", "dt", [leaf, top]).to_dict(), "output": "x"})
    assert views[0]["name"] == "syntax tree (dt)" and views[0]["root"]["t"] == "Who is the director of Up?"
    assert views[0]["root"]["c"][0]["t"] == "the director of Up" and views[0]["root"]["c"][0]["b"] == "pobj"
    assert hops == {"p3": "level 1"}

    search = SearchTree("q", MctsNode(0, "root", 0, ()))
    answer = search.new_node(kind="answer", depth=1, ctx=(), parent=search.root,
                             parsed=ParsedAnswer("Paris", "", (), "json", "raw"), reward=0.8)  # fmt: skip
    augment = search.new_node(kind="augment", depth=1, ctx=(Passage("p4", "T4", ""),), parent=search.root)
    search.root.children = [answer, augment]
    answer.visits, answer.value_sum = 2, 1.6
    views, hops = drawings({"tree": search.to_trace(), "output": "raw"})
    tree = views[0]["root"]
    assert views[0]["name"] == "MCTS search tree" and tree["d"][0] == ["chosen", "1"]
    root_node = tree["c"][0]
    assert root_node["x"] == 1 and [(c["t"], c["b"], c.get("x")) for c in root_node["c"]] == [
        ("#1: Paris", "answer", 1), ("#2", "augment", None)]  # fmt: skip
    assert hops == {"p4": "augment #2"}

    views, hops = drawings({"hops": [["p5", "p6"], ["p7"]], "scores": [[0.9, 0.5], [0.7]], "candidates": 3},
                           title=lambda pid: {"p5": "Five"}.get(pid, pid))  # fmt: skip
    assert [v["name"] for v in views] == ["hops", "rest of the trace"]
    assert [h["t"] for h in views[0]["root"]["c"]] == ["hop 1: 2 passages", "hop 2: 1 passages"]
    assert views[0]["root"]["c"][0]["c"][0]["t"] == "Five (0.9)"
    assert hops == {"p5": "hop 1", "p6": "hop 1", "p7": "hop 2"}


def test_an_unknown_trace_is_a_readable_nested_list_and_long_texts_are_cut():
    views, hops = drawings({"steps": [{"query": "a" * 1000, "answer": "b"}], "n": 2})
    (view,) = views
    assert view["name"] == "trace" and hops == {}
    steps = view["root"]["c"][0]
    assert steps["t"] == "steps (1 items)" and steps["c"][0]["c"][1]["t"] == "answer: b"
    assert "[607 more characters]" in steps["c"][0]["c"][0]["t"] and view["root"]["c"][1]["t"] == "n: 2"
    assert drawings(None) == ([], {}) and drawings(["x", "y"])[0][0]["root"]["t"] == "trace: [x, y]"
    broken = {"tree": {"query": "q", "children": [None]}}  # looks like PruneRAG's, is not: drawn as it is
    assert drawings(broken)[0][0]["name"] == "trace"
