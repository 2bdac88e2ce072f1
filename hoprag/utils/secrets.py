"""Secrets (API keys, tokens, passwords) never leave the process: one rule for which config keys hold one
(`is_secret`), and the redaction applied wherever a config or a command line is written or shown.

Redacted, a secret reads `***`: in `.hydra/` (eval.py and train.py write it through
`hoprag.evaluation.fingerprint.save_hydra_files`; `RedactSecrets` rewrites the files Hydra writes itself, and a
multirun's `multirun.yaml`), in the loggers' hyperparameters (CSV `hparams.yaml`, the wandb run config) and
wandb's record of the command line (`redacted_argv`), and in log lines (`RedactFilter`). Secrets are left out
of run fingerprints (`hoprag.config.select_settings`), run names (`hoprag.utils.run_control.is_run_control`)
and generation-cache keys, so a changed key neither refuses a resume nor misses the cache. Best of all, give
none on the command line: `llm.api_key: null` reads `OPENAI_API_KEY` (conf/llm/openai.yaml).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

REDACTED = "***"
HYDRA_FILES = ("config.yaml", "hydra.yaml", "overrides.yaml")  # what .hydra/ holds
# Key names (the last part of a dotted key, lower case, `-` read as `_`) that hold a secret. Token *counts*
# and tokenizer settings (`max_new_tokens`, `token_budget`, `timeout_per_token`, `pad_token`) are not secrets,
# so only the names of credentials match, not every name with "token" in it.
SECRET_NAMES = (
    "key", "*_key", "*apikey", "token", "*access_token", "*auth_token", "*api_token", "hf_token", "hub_token",
    "*bearer*", "*secret*", "*password*", "*passwd*", "*credential*", "*authorization*",
)  # fmt: skip
# `key=value` or `key:value` inside a text (an override, a dict in one `{api_key:sk-..}`, Hydra's
# `override_dirname`, a log line): the value is quoted whole, or runs to a space, bracket, quote or a comma that
# starts the next `key=` (a sweep's `key=a,b` stays one value); a dict's keys are matched one by one.
_VALUE = r"""'[^']*'|"[^"]*"|[^\s,'"{}\[\]]*(?:,(?![^\s,=:'"{}\[\]]*[=:])[^\s,'"{}\[\]]*)*"""
_ASSIGNMENT = re.compile(rf"(?P<key>[\w.+~/@-]+)(?P<sep>=|:)(?P<value>{_VALUE})")


def is_secret(key: Any) -> bool:
    """Whether the config key `key` (a name, or a dotted key with `+`/`~`: its last part decides) holds a secret."""
    name = str(key).lstrip("+~").rsplit(".", 1)[-1].lower().replace("-", "_")
    return any(fnmatch(name, pattern) for pattern in SECRET_NAMES)


def redact_text(text: str) -> str:
    """`text` with the value of every secret `key=value` in it replaced (`llm.api_key=sk-1 limit=2` →
    `llm.api_key=*** limit=2`)."""
    return _ASSIGNMENT.sub(lambda m: f"{m['key']}{m['sep']}{REDACTED}" if is_secret(m["key"]) else m[0], text)


def redact(node: Any) -> Any:
    """A config (an OmegaConf node, resolved or not, or plain containers) as plain containers, every secret
    key's value replaced by `***` and every string passed through `redact_text`. A null, empty or `${...}`
    value is kept: it holds no secret, and says where the secret comes from (`${oc.env:OPENAI_API_KEY}`)."""
    if OmegaConf.is_config(node):
        node = OmegaConf.to_container(node, resolve=False)
    if isinstance(node, Mapping):
        return {k: REDACTED if is_secret(k) and _holds_value(v) else redact(v) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [redact(v) for v in node]
    return redact_text(node) if isinstance(node, str) else node


def _holds_value(value: Any) -> bool:
    """A secret's own value: a non-empty scalar that is no interpolation (a mapping or list under a secret-like
    name is searched key by key instead)."""
    if isinstance(value, (Mapping, list, tuple)) or value in (None, ""):
        return False
    return not (isinstance(value, str) and value.startswith("${"))


def save_redacted(node: Any, path: str | os.PathLike) -> None:
    """Write a config as YAML with its secrets redacted (atomically: a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    OmegaConf.save(OmegaConf.create(redact(node)), tmp)
    os.replace(tmp, path)


@contextmanager
def redacted_argv() -> Iterator[None]:
    """`sys.argv` without secrets while a library records the command line (wandb's run metadata), then the
    real one again (Lightning's DDP launcher reruns it to start the other ranks, which need the values)."""
    argv = sys.argv[:]
    sys.argv[1:] = [redact_text(arg) for arg in argv[1:]]
    try:
        yield
    finally:
        sys.argv[:] = argv


class RedactFilter(logging.Filter):
    """Redacts every log record's message (conf/hydra/default.yaml: Hydra's launcher logs each job's overrides)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact_text(record.getMessage()), ()
        return True


class RedactSecrets(Callback):
    """A Hydra callback (conf/hydra/default.yaml) for the files Hydra writes itself before a job starts: a
    multirun's `<sweep dir>/multirun.yaml` and, where `hydra.output_subdir` is set (build_index,
    eval_retrieval), the job's `.hydra/` files are rewritten redacted before the job runs; a failed job's
    overrides, which Hydra prints, are redacted when it ends."""

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        hydra = config.hydra
        written = []
        if hydra.output_subdir is not None:
            written = [Path(hydra.runtime.output_dir, hydra.output_subdir, name) for name in HYDRA_FILES]
        if hydra.mode == RunMode.MULTIRUN:
            written.append(Path(hydra.sweep.dir, "multirun.yaml"))
        for path in written:
            if path.is_file():
                saved = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
                if redact(saved) != saved:
                    save_redacted(saved, path)

    def on_job_end(self, config: DictConfig, job_return: Any = None, **kwargs: Any) -> None:
        """Hydra prints a failed job's overrides ("Error executing job with overrides: [...]") from its return:
        redacted there first."""
        if job_return is not None and job_return.overrides:
            job_return.overrides = [redact_text(o) for o in job_return.overrides]
