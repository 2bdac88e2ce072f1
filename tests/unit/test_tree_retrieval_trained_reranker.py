"""scripts/components/tree_retrieval_trained_reranker.py on 4 real HotpotQA questions over the pooled corpus: the
three rows and their paired tests, and scores made elsewhere (`--dump-pairs`, `--scores`) reordering as a reranker
with those scores would (no model weights: the `none` reranker and hand-made scores)."""

from __future__ import annotations

import json

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def script():
    return load_script("components/tree_retrieval_trained_reranker.py")


def test_rows_pairs_and_precomputed_scores(script, tmp_path):
    index = [f"paths.index_dir={tmp_path}"]
    plain = script.run_dataset("hotpotqa", 4, ["none"], index)
    assert plain["n"] == 4 and list(plain["hits"]) == ["bm25", "tree:none", "pool:none"]
    assert all(0 <= h <= g for row in plain["hits"].values() for h, g in zip(row, plain["gold"]))
    assert plain["hits"]["pool:none"] == plain["hits"]["bm25"]  # BM25's own order: its top 15 again
    assert all(n >= 10 for n in plain["pool_sizes"])  # every kept node adds its phrase's BM25 top 10

    pairs = script.pairs_of("hotpotqa", 4, index)
    assert len(pairs) == len(set(pairs)) >= sum(plain["pool_sizes"])
    # every pair scored 0: ties keep the input order, so the rows are the `none` reranker's
    tied = script.ScoredPairs({pair: 0.0 for pair in pairs})
    assert script.run_dataset("hotpotqa", 4, ["none"], index, tied)["hits"] == plain["hits"]
    with pytest.raises(KeyError, match="pairs have no score"):
        script.run_dataset("hotpotqa", 4, ["none"], index, script.ScoredPairs(dict(list(tied.scores.items())[:3])))

    result = {"datasets": {"hotpotqa": plain}, "rows": ["bm25", "pool:none", "tree:none"]}
    result["paired"] = script.paired(result["datasets"], result["rows"])
    assert set(result["paired"]) == {"pool:none - bm25", "tree:none - bm25", "tree:none - pool:none"}
    test = result["paired"]["tree:none - bm25"]["hotpotqa"]
    assert test["diff"] == pytest.approx(script.recall(plain, "tree:none") - script.recall(plain, "bm25"))
    assert result["paired"]["tree:none - bm25"]["all"]["diff"] == pytest.approx(test["diff"])  # one dataset
    assert "tree:none - bm25: hotpotqa" in script.format_report(result)


def test_scores_files_round_trip(script, tmp_path):
    pairs = [["q", "Paris\nParis is the capital."], ["q", "Rome\nRome is in Italy."]]
    (tmp_path / "scores.json").write_text(json.dumps({"pairs": pairs, "scores": [0.9, 0.1]}))
    assert script.read_scores(tmp_path / "scores.json") == {tuple(pairs[0]): 0.9, tuple(pairs[1]): 0.1}
    (tmp_path / "bad.json").write_text(json.dumps({"pairs": pairs, "scores": [0.9]}))
    with pytest.raises(ValueError, match="2 pairs, 1 scores"):
        script.read_scores(tmp_path / "bad.json")
