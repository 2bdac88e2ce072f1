"""TreeRare's tree view (`hoprag.search.treerare.show`) and `scripts/runs/show_treerare.py` on a runner-written run,
in the mock world of test_treerare.py (scripted LLM, stub retriever, bracketed parses)."""

from __future__ import annotations

import json
import re
from functools import partial

import pytest

from hoprag.data.types import QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods.tree_retrieval import TreeRetrievalMethod
from hoprag.metrics import MetricSuite
from hoprag.retrieval.rerankers import NoReranker
from hoprag.search.treerare import TreeRetrieval
from hoprag.search.treerare.show import format_tree
from tests.scripts import load_script
from tests.unit.test_treerare import (
    ARTHUR,
    DEAR_JOHN,
    DEAR_JOHN_NODES,
    BracketParser,
    StubRetriever,
    ask,
    build,
    qg_reply,
    sag_reply,
    scripted,
)

NODE_LINE = re.compile(r"^(?P<indent>[│├└─ ]*)\[(?P<label>\S+) h(?P<height>\d+) #(?P<index>\d+)\] (?P<phrase>.*)$")


def script():
    return load_script("runs/show_treerare.py")


def depths(nodes) -> dict[int, int]:
    out = {len(nodes) - 1: 0}
    for index in range(len(nodes) - 1, -1, -1):  # parents come after their children in post-order
        for child in nodes[index]["children"]:
            out[child] = out[index] + 1
    return out


def node_blocks(text: str) -> dict[int, list[str]]:
    """Each node's own line and the detail lines under it, by node index."""
    blocks: dict[int, list[str]] = {}
    current = None
    for line in text.splitlines()[1:]:
        match = NODE_LINE.match(line)
        if match:
            current = int(match["index"])
            blocks[current] = [line]
        else:
            blocks[current].append(line)
    return blocks


def test_the_tree_is_drawn_from_the_root_down_with_every_nodes_phrase_queries_and_passages():
    (out,), _ = ask(build())
    tree = out.trace["tree"]
    nodes = tree["nodes"]
    text = format_tree(tree)
    lines = text.splitlines()
    assert lines[0] == "CT tree: 8 of 22 parse nodes processed, height 7"
    assert lines[1] == f"[ROOT h7 #7] {DEAR_JOHN}"  # the root (last in post-order) first, unindented
    matches = [m for m in map(NODE_LINE.match, lines) if m]
    assert sorted(int(m["index"]) for m in matches) == list(range(len(nodes)))
    level = depths(nodes)
    for match in matches:  # indentation grows by one step per level of depth
        assert len(match["indent"]) == 3 * level[int(match["index"])]
    assert [level[int(m["index"])] for m in matches][:3] == [0, 1, 2]
    blocks = node_blocks(text)
    for index, node in enumerate(nodes):
        block = "\n".join(blocks[index])
        assert NODE_LINE.match(blocks[index][0])["phrase"] == node["phrase"] == DEAR_JOHN_NODES[index]
        assert f"queries: {' | '.join(node['queries'])}" in block and len(node["queries"]) == 3
        assert f"docs (6): T1 {node['queries'][0]} | T2 {node['queries'][0]} | T1 {node['queries'][1]} | … +3" in block
        assert f"evidence: E[{node['phrase']}]" in block
        assert "fallbacks" not in block and "qg:" not in block
    # a node's children come right under it, left to right
    order = [int(m["index"]) for m in matches]
    for index, node in enumerate(nodes):
        children = [order.index(c) for c in node["children"]]
        assert children == sorted(children) and all(c > order.index(index) for c in children)


def test_brief_keeps_the_trees_shape_and_queries_without_passages_or_evidence():
    (out,), _ = ask(build())
    tree = out.trace["tree"]
    full, brief = format_tree(tree), format_tree(tree, brief=True)
    assert [m["index"] for m in map(NODE_LINE.match, brief.splitlines()) if m] == [
        m["index"] for m in map(NODE_LINE.match, full.splitlines()) if m
    ]
    for index, node in enumerate(tree["nodes"]):
        block = "\n".join(node_blocks(brief)[index])
        assert f"queries: {' | '.join(node['queries'])}" in block
        assert "docs (" not in block and "evidence" not in block
    assert len(brief.splitlines()) == 1 + 2 * len(tree["nodes"])  # head, then each node and its queries


def test_fallbacks_are_shown_and_outputs_add_the_raw_replies_and_the_whole_evidence():
    long_evidence = "Simply Red sang it. " * 20  # 400 characters
    llm = ScriptedLLM(rules=[
        (r"Phrase: the theme music\n", "I cannot do that."),
        (r"Phrase: ", qg_reply),
        (r"Questions: the theme music\n", ""),
        (r"Questions: what is the television show Dear John 1\?", long_evidence),
        (r"Questions: ", sag_reply),
        (r"Answer the question using", "FINAL: Simply Red"),
    ])  # fmt: skip
    (out,), _ = ask(build(llm))
    tree = out.trace["tree"]
    short, full = node_blocks(format_tree(tree)), node_blocks(format_tree(tree, outputs=True))
    leaf = "\n".join(short[0])
    assert "queries: (the phrase)" in leaf and "fallbacks: qg_unparsed, sag_empty" in leaf
    assert "evidence (2 units): T1 the theme music text 1 of the theme music | T2 the theme music" in leaf
    shown = next(line for line in short[1] if "evidence: " in line)
    assert shown.endswith(" …") and len(shown.split("evidence: ")[1]) == 200
    evidence = tree["nodes"][1]["evidence"][0]
    assert len(evidence) > 250 and f"evidence: {evidence}" in "\n".join(full[1])
    leaf = "\n".join(full[0])
    assert "qg: I cannot do that." in leaf and "sag: (empty)" in leaf
    assert "evidence [1]: T1 the theme music text 1 of the theme music" in leaf and "evidence [2]: " in leaf
    root = "\n".join(full[7])
    assert "qg: response: what is" in root and "sag:" not in root  # the SAG reply is the evidence itself


def test_a_question_that_fell_back_has_no_tree_but_its_reason():
    outs, _ = ask(build(), (DEAR_JOHN, "An unparsable question?"))
    text = format_tree(outs[1].trace["tree"])
    assert text.startswith("CT tree: none (parse error: no parse for") and "\n" not in text


def test_the_script_prints_each_question_its_tree_and_the_runs_treerare_metrics(tmp_path, capsys):
    examples = [
        QAExample("0", DEAR_JOHN, ["Simply Red"], supporting_titles=["T1 what is the theme music 1?", "Missing"]),
        QAExample("1", ARTHUR, ["1844"]),
    ]
    run(build(), examples, tmp_path, suite=MetricSuite(ks=[15]), run_info={"dataset": "mock"})
    show = script()
    show.main([str(tmp_path), "-n", "0"])
    printed = capsys.readouterr().out
    assert printed.count("Q: ") == 2 and printed.index(DEAR_JOHN) < printed.index(ARTHUR)
    assert "predicted: 'Simply Red.'   cover-EM=1   EM=1" in printed
    assert "gold titles retrieved: 1 of 2 (" in printed
    assert f"CT tree: 8 of 22 parse nodes processed, height 7\n[ROOT h7 #7] {DEAR_JOHN}" in printed
    assert "processed_nodes=8" in printed and "qg_fallbacks=0" in printed
    metrics = json.loads((tmp_path / "metrics.json").read_text())["metrics"]
    for key in ("cover_em", "cost/mean/llm_calls", "method/processed_nodes", "method/tree_height",
                "method/qg_fallbacks", "retrieval/passage_recall@15"):  # fmt: skip
        assert re.search(rf"^  {re.escape(key)} +{re.escape(str(metrics[key]))}$", printed, re.MULTILINE), key
    assert "qg:" not in printed
    show.main([str(tmp_path), "--outputs"])
    printed = capsys.readouterr().out
    assert printed.count("Q: ") == 1 and "qg: response: " in printed
    assert "final output: Explanations: step by step. FINAL: The answer is Simply Red." in printed
    show.main([str(tmp_path), "--trees-only"])  # as make demo runs it, right after eval.py printed the metrics
    printed = capsys.readouterr().out
    assert "CT tree: 8 of 22" in printed and not re.search(r"^  cover_em ", printed, re.MULTILINE)


def test_a_retrieval_only_run_shows_its_trees_without_answer_scores(tmp_path, capsys):
    search = partial(TreeRetrieval, reranker=NoReranker())
    method = TreeRetrievalMethod(scripted(), StubRetriever(), {"ct": BracketParser()}, search, tree="ct")
    run(method, [QAExample("0", DEAR_JOHN, ["Simply Red"])], tmp_path, suite=MetricSuite(ks=[15]))
    script().main([str(tmp_path)])
    printed = capsys.readouterr().out
    assert "gold: ['Simply Red']   (retrieval only)\n" in printed and "EM=" not in printed
    assert "docs (15): " in printed and "queries: (the phrase)" in printed and "evidence" not in printed
    assert re.search(r"^  method/processed_nodes +8\.0$", printed, re.MULTILINE)


def test_the_script_refuses_a_directory_without_treerare_trees(tmp_path):
    show = script()
    with pytest.raises(SystemExit, match="not found"):
        show.main([str(tmp_path)])
    # a PruneRAG record: its trace tree is one nested root node, not TreeRare's node list
    (tmp_path / "predictions.jsonl").write_text(json.dumps({"id": "q1", "trace": {"tree": {"kind": "question"}}}) + "\n")
    with pytest.raises(SystemExit, match="no TreeRare trees"):
        show.main([str(tmp_path)])
