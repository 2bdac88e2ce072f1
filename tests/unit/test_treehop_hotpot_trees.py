"""TreeHop trees from HotpotQA bridge questions (hop 1: the supporting paragraph the question names) and the
per-source tree counts the data module exposes."""

from __future__ import annotations

import pytest

from hoprag.data.dataset import QADataset
from hoprag.data.hotpotqa import parse_hotpotqa
from hoprag.treehop import build_tree, build_trees
from hoprag.treehop.data import TreeHopDataModule
from hoprag.treehop.trees import Tree
from tests.fakes import HashEmbedder

DISTRACTORS = ("Kevin Durant", "Golden State Warriors", "Honolulu", "NCAA Division I", "Stan Sheriff Center")


def hotpot(question, gold, qtype="bridge", distractors=DISTRACTORS):
    """An official-format HotpotQA record: gold paragraphs first, then distractors, one sentence each."""
    titles = [*gold, *distractors]
    return parse_hotpotqa({
        "_id": "5a8b57f25542995d1e6f1371", "type": qtype, "level": "medium", "question": question, "answer": "x",
        "context": [[t, [f"{t} is a paragraph.", " It has a second sentence."]] for t in titles],
        "supporting_facts": [[t, 0] for t in gold],
    })  # fmt: skip


def shape(example):
    tree = build_tree(example)
    assert isinstance(tree, Tree), tree
    title = {p.id: p.title for p in example.context}
    return [(title[n.passage_id], n.parent, n.depth) for n in tree.nodes]


def test_bridge_question_starts_at_the_paragraph_it_names_whatever_the_dataset_order():
    question = "Which team does the player named 2015 Diamond Head Classic's MVP play for?"
    for gold in (["2015 Diamond Head Classic", "Buddy Hield"], ["Buddy Hield", "2015 Diamond Head Classic"]):
        ex = hotpot(question, gold)
        assert shape(ex) == [("2015 Diamond Head Classic", -1, 1), ("Buddy Hield", 0, 2)]


def test_bridge_tree_negatives_are_the_questions_own_other_paragraphs():
    ex = hotpot("Which team does the player named 2015 Diamond Head Classic's MVP play for?",
                ["2015 Diamond Head Classic", "Buddy Hield"])  # fmt: skip
    ids = {p.title: p.id for p in ex.context}
    hop1, hop2 = build_tree(ex).nodes
    assert set(hop1.negatives) == {ids[t] for t in DISTRACTORS}
    assert set(hop2.negatives) == {ids[t] for t in DISTRACTORS} | {ids["2015 Diamond Head Classic"]}


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("Arthur’s Magazine was started by which publisher's founder?", "Arthur's Magazine"),  # curly apostrophe
        ("who directed the film rebecca?", "Rebecca (1940 film)"),  # case, disambiguation suffix
        ("Simon & Simon starred which actor?", "Simon &amp; Simon"),  # HTML entity in the title
        ("Scott Andrew Buchholz was chief of staff to which senator?", "Scott Buchholz"),  # word subset
        ("The first tornado of the Late-May 1998 tornado outbreak hit which state?",
         "Late-May 1998 tornado outbreak and derecho"),  # close match of as many words
    ],
)  # fmt: skip
def test_fuzzy_title_mentions_still_name_hop_one(question, named):
    ex = hotpot(question, ["Other Paragraph", named])
    assert shape(ex) == [(named, -1, 1), ("Other Paragraph", 0, 2)]


def test_a_phrase_mention_outranks_a_fuzzy_one():
    # both words of "Queensland Senate" occur, but only "Scott Buchholz" is named as a phrase: fuzzy is not needed
    ex = hotpot("Scott Buchholz was chief of staff to which senator, the Senate leader from Queensland?",
                ["Queensland Senate", "Scott Buchholz"])  # fmt: skip
    assert shape(ex) == [("Scott Buchholz", -1, 1), ("Queensland Senate", 0, 2)]


def test_unusable_hotpot_records_are_skipped_by_reason():
    neither = hotpot("Who produced the single the Jamaican reggae singer was known for?",
                     ["Dawn Penn", "You Don't Love Me (No, No, No)"])  # fmt: skip
    both = hotpot("How is Tampa Bay Buccaneers draft history connected to Lee Roy Selmon?",
                  ["Tampa Bay Buccaneers draft history", "Lee Roy Selmon"])  # fmt: skip
    comparison = hotpot("Are Christopher Nolan and Sathish Kalathil both film directors?",
                        ["Christopher Nolan", "Sathish Kalathil"], qtype="comparison")  # fmt: skip
    single = hotpot("Who is Kevin Durant?", ["Kevin Durant"], distractors=("Honolulu",))
    trees, skipped = build_trees([neither, both, comparison, single])
    assert trees == []
    assert skipped == {"neither_named": 1, "both_named": 1, "comparison": 1, "integrity": 1}


def bundled(name, questions, fmt):
    return QADataset(name=name, questions=questions, format=fmt)


def test_bundled_hotpotqa_train_sample_gives_bridge_trees():
    data = bundled("hotpotqa_train", "hotpotqa/hotpot_train_99.json", "hotpotqa")
    trees, skipped = build_trees(data.examples)
    n_bridge = sum(ex.type == "bridge" for ex in data.examples)
    print(f"hotpotqa_train: {len(trees)} trees, skipped {dict(skipped)}")
    assert len(trees) >= n_bridge // 2 and all(t.type == "bridge" and t.depth == 2 for t in trees)
    assert skipped["comparison"] == len(data) - n_bridge
    assert sum(skipped.values()) + len(trees) == len(data)


def test_datamodule_exposes_tree_counts_per_source(tmp_path):
    main = bundled("2wiki_train", "2wikimultihopqa/train_500.json", "2wikimultihopqa")
    hotpotqa = bundled("hotpotqa_train", "hotpotqa/hotpot_train_99.json", "hotpotqa")
    dm = TreeHopDataModule(main, HashEmbedder(), extra=[hotpotqa], cache_dir=str(tmp_path))
    dm.setup("fit")
    print(dm.tree_counts)
    assert list(dm.tree_counts) == ["2wiki_train", "hotpotqa_train"]
    for name, dataset in (("2wiki_train", main), ("hotpotqa_train", hotpotqa)):
        counts = dm.tree_counts[name]
        assert counts["questions"] == len(dataset)
        assert counts["trees"] + sum(counts["skipped"].values()) == len(dataset)
    assert dm.tree_counts["hotpotqa_train"]["trees"] == len(build_trees(hotpotqa.examples)[0])
