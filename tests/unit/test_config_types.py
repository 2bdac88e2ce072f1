"""check_config: a boolean of the config files stays a boolean, a setting of a few words is one of them, and a
renamed setting names its new key (hoprag/config.py)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from hoprag.config import ConfigError, _mistyped, check_config
from hoprag.utils.refusals import Refusal


def test_a_string_where_the_files_hold_a_boolean_is_named_at_any_depth():
    files = OmegaConf.create({"overwrite": False, "method": {"compare": True, "k": 5}, "hydra": {"x": True}})
    run = OmegaConf.create({"overwrite": "no", "method": {"compare": "maybe", "k": 5}, "hydra": {"x": "y"}})
    assert _mistyped(run, files) == ["overwrite='no' must be true or false",
                                     "method.compare='maybe' must be true or false"]
    assert _mistyped(OmegaConf.create({"overwrite": True, "method": {"compare": None}}), files) == []


def test_enumerated_and_renamed_settings_are_refused_as_a_refusal():
    with pytest.raises(ConfigError, match="progress='maybe' must be one of auto, true, false") as err:
        check_config(OmegaConf.create({"progress": "maybe"}))
    assert isinstance(err.value, Refusal)
    with pytest.raises(ConfigError, match="scale='huge' must be one of smoke, paper, rehearsal"):
        check_config(OmegaConf.create({"scale": "huge"}))
    with pytest.raises(ConfigError, match=r"method.ckpt is now method.search.ckpt: set method.search.ckpt="):
        check_config(OmegaConf.create({"method": {"ckpt": "logs/x/export"}}))
    check_config(OmegaConf.create({"progress": False, "scale": "paper", "method": {"search": {"ckpt": None}}}))
