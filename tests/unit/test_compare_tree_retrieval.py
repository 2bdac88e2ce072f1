"""scripts/components/compare_tree_retrieval.py's core on 5 real HotpotQA questions: BM25 over the pooled corpus, the
DT tree, no reranker (fast, no model weights)."""

from __future__ import annotations

from tests.scripts import load_script


def script():
    return load_script("components/compare_tree_retrieval.py")


def test_the_table_compares_bm25_and_tree_retrieval_on_the_runners_metrics(tmp_path):
    cmp = script()
    result = cmp.compare(["hotpotqa"], limit=5, reranker="none", overrides=[f"paths.index_dir={tmp_path}"])
    data = result["datasets"]["hotpotqa"]
    assert data["n"] == 5 and data["corpus"] > 1000  # the corpus pooled from every question, not the first 5
    assert list(data["rows"]) == list(cmp.RETRIEVERS) and list(result["mean"]) == list(cmp.RETRIEVERS)
    for key, row in data["rows"].items():
        assert set(row) == set(cmp.METRICS), key
        for metric in ("R@15", "AR@15", "all"):
            assert 0 <= row[metric] <= 100, (key, metric)
        assert 0 < row["psg"] <= 15 and row["ms/q"] > 0
        assert result["mean"][key] == {m: round(v, 2) for m, v in row.items()}  # one dataset: its own values
    rows = data["rows"]
    # without a reranker the "reranked" rows are the BM25 orders: the tree twice, BM25's top 15 once more
    assert {m: v for m, v in rows["tree"].items() if m != "ms/q"} == \
        {m: v for m, v in rows["tree_no_rerank"].items() if m != "ms/q"}  # fmt: skip
    assert {m: v for m, v in rows["bm25_rerank"].items() if m != "ms/q"} == \
        {m: v for m, v in rows["bm25"].items() if m != "ms/q"}  # fmt: skip
    tree = data["tree"]
    assert tree["processed_nodes"] > 1 and tree["bm25_queries"] == tree["processed_nodes"]
    assert 10 <= tree["pool_size"] <= 10 * tree["bm25_queries"] and tree["traversal_fallbacks"] == 0
    assert tree["pool_passage_recall"] >= rows["tree"]["R@15"]  # the root's 15 come from the pool
    assert sum(v["n"] for v in data["by_type"].values()) == 5
    moved = data["gold_vs_bm25"]
    assert moved["gained_by_subphrase"] <= moved["gained"]

    table = cmp.format_table(result).splitlines()
    assert table[0].split() == ["hotpotqa", "(5)", "mean"]
    assert table[1].split() == ["retriever", *list(cmp.METRICS) * 2]
    assert [line.startswith(result["labels"][key]) for line, key in zip(table[2:], cmp.RETRIEVERS)] == [True] * 4
    assert len(table) == 6
    assert cmp.format_details(result).startswith("hotpotqa: 5 questions, corpus ")
