"""Shared test set-up: never reach a model hub; compose the real configs."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HOPRAG_OFFLINE", "1")
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
if os.environ.get("PYTEST_XDIST_WORKER"):  # one of `make test`'s workers: a thread a core, not every core each
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402
from hydra.core.global_hydra import GlobalHydra  # noqa: E402

from hoprag.config import register_resolvers  # noqa: E402
from hoprag.paths import PROJECT_ROOT  # noqa: E402

CONF_DIR = str(PROJECT_ROOT / "conf")


@pytest.fixture
def compose_cfg(tmp_path: Path):
    """compose_cfg("eval_retrieval", ["data=2wiki"]) → the real config, outputs under tmp_path."""
    register_resolvers()

    def _compose(config_name: str, overrides: list[str] = (), hydra: bool = False):
        """`hydra`: with the `hydra` node (callbacks, launcher), as a job sees it."""
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            return compose(
                config_name=config_name,
                overrides=[*overrides, f"paths.output_dir={tmp_path}", f"paths.cache_dir={tmp_path}/cache"],
                return_hydra_config=hydra,
            )

    yield _compose
    GlobalHydra.instance().clear()


@pytest.fixture(scope="module")
def eval_main():
    """eval.py's `main` without Hydra's decorator: called with a composed config (`compose_cfg("eval", ...)`)."""
    spec = importlib.util.spec_from_file_location("eval_entry", PROJECT_ROOT / "eval.py")
    entry = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(entry)
    return entry.main.__wrapped__
