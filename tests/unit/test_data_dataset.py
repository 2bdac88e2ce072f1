"""QADataset (lazy loading, limit, corpus choice, Hydra instantiation) and the FlashRAG round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from hoprag.data import QADataset, load_questions, pool_corpus, to_flashrag, write_flashrag
from hoprag.data.flashrag import join_sentences
from hoprag.paths import PROJECT_ROOT, data_root

HOTPOT_DEV = "hotpotqa/hotpot_dev_distractor_185.json"


def test_qadataset_pooled_corpus_and_laziness():
    ds = QADataset(name="hotpotqa", questions=HOTPOT_DEV)
    assert ds.root == data_root()
    assert "examples" not in vars(ds)  # nothing read at construction
    assert len(ds) == 185 and next(iter(ds)).dataset == "hotpotqa"
    assert ds.examples is ds.examples
    corpus = ds.corpus()
    assert corpus is ds.corpus() and len(corpus) == 1828
    assert corpus == pool_corpus(ds.examples)


def test_qadataset_limit_keeps_file_order_and_the_whole_closed_corpus():
    full = QADataset(name="m", questions="musique/musique_ans_dev_200.jsonl")
    head = QADataset(name="m", questions="musique/musique_ans_dev_200.jsonl", limit=7)
    assert head.examples == full.examples[:7]
    # the closed corpus pools every question of the file: limit must not make retrieval easier
    assert head.corpus() == full.corpus() and len(head.corpus()) == 3141


def test_qadataset_explicit_corpus_and_absolute_path():
    ds = QADataset(
        name="bamboogle",
        questions=str(data_root() / "bamboogle/test.jsonl"),
        format="flashrag",
        corpus="bamboogle/wiki18_passages.jsonl",
    )
    assert len(ds) == 125 and len(ds.corpus()) == 1190
    assert ds.corpus()[0].title == "Citibank"


# configs read alone; those composing others (a `defaults` list: 2wiki_open) are composed in their own tests
DATA_CONFIGS = sorted(p for p in (PROJECT_ROOT / "conf" / "data").glob("*.yaml") if "defaults" not in OmegaConf.load(p))
# generic configs leave their files to the command line (data=flashrag): a bundled FlashRAG pair fills them
FLASHRAG_PAIR = {"questions": "bamboogle/test.jsonl", "corpus": "bamboogle/wiki18_passages.jsonl"}


@pytest.mark.skipif(not DATA_CONFIGS, reason="no conf/data configs in this checkout")
@pytest.mark.parametrize("config", DATA_CONFIGS, ids=lambda p: p.stem)
def test_hydra_data_configs_instantiate(config: Path):
    # MultiHop-RAG, ASQA, AmbigDocs and HippoRAG 2's NQ and PopQA are not among the bundled samples: their configs
    # read hand-written official-format fixtures (ASQA and AmbigDocs without their open wiki corpus)
    fixture = config.stem in ("multihop_rag", "asqa", "ambigdocs", "nq", "popqa")
    root, limit = (str(PROJECT_ROOT / "tests" / "fixtures"), 1) if fixture else (None, 5)
    cfg = OmegaConf.create({"paths": {"data_dir": root}, "limit": limit, "data": OmegaConf.load(config)})
    if config.stem in ("asqa", "ambigdocs"):
        cfg.data.corpus = None
        cfg.data.exclude_questions = []  # a fixture question is an exemplar's (tests/unit/test_ambiguous_exemplars.py)
    for key in OmegaConf.missing_keys(cfg):
        OmegaConf.update(cfg, key, FLASHRAG_PAIR[key.split(".")[-1]])
    ds = instantiate(cfg.data)
    assert isinstance(ds, QADataset)
    assert len(ds) == limit and {ex.dataset for ex in ds} == {ds.name}
    assert ds.corpus() or config.stem == "asqa"  # ASQA's records hold no passages: it needs its wiki corpus


def test_join_sentences():
    assert join_sentences(["A.", " B.", "C."]) == "A. B. C."
    assert join_sentences(["A.", "", "B."]) == "A. B."
    assert join_sentences(["only"]) == "only"


@pytest.mark.parametrize(
    "rel",
    [
        HOTPOT_DEV,
        "2wikimultihopqa/train_500.json",
        "musique/musique_ans_dev_200.jsonl",
        "bamboogle/test.jsonl",
        "crag/crag_task1_dev_10.jsonl.bz2",
    ],
)
def test_flashrag_round_trip(tmp_path, rel):
    original = load_questions(data_root() / rel)
    name = original[0].dataset
    path = write_flashrag(original, tmp_path / name / "dev.jsonl")
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    assert set(first) == {"id", "question", "golden_answers", "metadata"}
    assert first == json.loads(json.dumps(to_flashrag(original[0])))
    back = load_questions(path)
    assert {ex.dataset for ex in back} == {name}  # FlashRAG layout: <dataset>/<split>.jsonl
    assert back == original


def test_flashrag_native_metadata(tmp_path):
    """FlashRAG's own HotpotQA / 2Wiki records: dict-of-lists facts, context under sentences/content."""
    hotpot = {
        "id": "h", "question": "Q?", "golden_answers": ["A", "a"],
        "metadata": {
            "type": "bridge", "level": "hard",
            "supporting_facts": {"title": ["T1", "T2", "T1"], "sent_id": [0, 1, 2]},
            "context": {"title": ["T1", "T2"], "sentences": [["One.", " Two."], ["Three."]]},
        },
    }
    wiki = {
        "id": "w", "question": "Q?", "golden_answers": ["B"],
        "metadata": {
            "supporting_facts": [["X", 0], ["Y", 0]],
            "context": {"title": ["X", "Y"], "content": [["Four.", "Five."], ["Six."]]},
        },
    }
    path = tmp_path / "mixed" / "dev.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(hotpot) + "\n" + json.dumps(wiki) + "\n", encoding="utf-8")
    h, w = load_questions(path)
    assert h.dataset == "mixed" and h.answers == ["A", "a"] and h.type == "bridge"
    assert h.supporting_titles == ["T1", "T2"]
    assert h.supporting_facts == [("T1", 0), ("T2", 1), ("T1", 2)]
    assert [p.text for p in h.context] == ["One. Two.", "Three."]
    assert h.metadata == {"level": "hard"}
    assert w.type is None and w.supporting_titles == ["X", "Y"]
    assert [p.text for p in w.context] == ["Four. Five.", "Six."]


def test_a_seeded_sample_is_reproducible_in_file_order_over_the_whole_corpus():
    full = QADataset(name="m", questions="musique/musique_ans_dev_200.jsonl")
    drawn = QADataset(name="m", questions="musique/musique_ans_dev_200.jsonl", sample=20, seed=7)
    again = QADataset(name="m", questions="musique/musique_ans_dev_200.jsonl", sample=20, seed=7)
    other = QADataset(name="m", questions="musique/musique_ans_dev_200.jsonl", sample=20, seed=8)
    ids = [ex.id for ex in drawn.examples]
    assert ids == [ex.id for ex in again.examples] != [ex.id for ex in other.examples]
    position = {ex.id: i for i, ex in enumerate(full.examples)}
    assert [position[i] for i in ids] == sorted(position[i] for i in ids)  # file order
    assert ids != [ex.id for ex in full.examples[:20]]  # not the first 20
    assert drawn.corpus() == full.corpus()  # sampling must not make retrieval easier
    with pytest.raises(ValueError, match="data.sample=300"):
        QADataset(name="m", questions="musique/musique_ans_dev_200.jsonl", sample=300).examples


MULTIHOP_RAG = PROJECT_ROOT / "tests" / "fixtures" / "multihop_rag"


def test_multihop_rag_queries_and_articles_in_the_official_format():
    """Queries: gold passages are the evidence articles by title; articles: whole, TreeHop's template."""
    examples = load_questions(MULTIHOP_RAG / "MultiHopRAG.json")
    first = examples[0]
    assert [ex.dataset for ex in examples] == ["multihop_rag"] * 3
    assert first.answers == ["Nvidia"] and first.type == "inference_query"
    assert first.supporting_titles == ["Nvidia unveils its next AI chip", "Nvidia settles patent suit"]
    assert first.metadata["evidence_list"][0]["fact"].startswith("Nvidia announced")
    assert first.id == load_questions(MULTIHOP_RAG / "MultiHopRAG.json")[0].id != examples[1].id
    ds = QADataset("multihop_rag", str(MULTIHOP_RAG / "MultiHopRAG.json"), corpus=str(MULTIHOP_RAG / "corpus.json"),
                   types=["inference_query"])  # fmt: skip
    assert [ex.id for ex in ds.examples] == [first.id]
    article = ds.corpus()[0]
    assert article.title == "Nvidia unveils its next AI chip" and len(ds.corpus()) == 3
    rendered = "Title: {title}\n{text}".format(title=article.title, text=article.text)
    assert rendered == (
        "Title: Nvidia unveils its next AI chip\nSource: TechCrunch\nContext: Nvidia announced a new AI "
        "accelerator chip on Monday. The chip doubles memory bandwidth."
    )


def test_the_multihop_rag_config_composes(compose_cfg):
    cfg = compose_cfg("eval", ["data=multihop_rag"])
    assert cfg.data.format == "multihop_rag" and list(cfg.data.types) == ["inference_query"]


def test_extra_corpus_adds_other_corpora_deduplicated_by_id(tmp_path):
    bamboogle = "bamboogle/wiki18_passages.jsonl"
    own = QADataset(name="hotpotqa", questions=HOTPOT_DEV).corpus()
    extra = QADataset(name="hotpotqa", questions=HOTPOT_DEV, corpus=bamboogle).corpus()
    ds = QADataset(name="hotpotqa", questions=HOTPOT_DEV,
                   extra_corpus={"again": QADataset(name="h", questions=HOTPOT_DEV), "wiki": bamboogle})  # fmt: skip
    assert [p.id for p in ds.corpus()] == [p.id for p in own] + [p.id for p in extra if p.id not in {q.id for q in own}]
    assert len(ds.corpus()) == len(own) + len(extra)  # the repeated pool adds nothing
    left_out = QADataset(name="hotpotqa", questions=HOTPOT_DEV, extra_corpus={"wiki": bamboogle, "dev": None})
    assert len(left_out.corpus()) == len(ds.corpus())  # a null member is left out (a Hydra override can drop one)


def test_open_2wiki_is_the_dev_sample_over_every_bundled_passage(compose_cfg):
    data = instantiate(compose_cfg("eval", ["data=2wiki_open"]).data)
    corpus = data.corpus()
    assert data.name == "2wiki_open" and len(data.examples) == 159
    assert len(corpus) == 13145 and len({p.id for p in corpus}) == len(corpus)
    assert {p.id for p in pool_corpus(data.examples)} <= {p.id for p in corpus}
