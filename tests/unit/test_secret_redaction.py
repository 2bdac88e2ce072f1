"""Which config keys hold secrets, and their redaction wherever a config or command line is shown, named or
fingerprinted (issue 27, item 8; hoprag/utils/secrets.py). The files a run writes: tests/integration/test_secrets.py."""

from __future__ import annotations

import json
import sys

import pytest
from hydra.types import RunMode
from omegaconf import OmegaConf

from hoprag.config import select_settings
from hoprag.evaluation.fingerprint import eval_fingerprint
from hoprag.llm import OpenAICompatLLM
from hoprag.paths import PROJECT_ROOT
from hoprag.utils.loggers import override_label
from hoprag.utils.secrets import RedactSecrets, is_secret, redact, redact_text, redacted_argv

CONF = PROJECT_ROOT / "conf"


def judge(key: str) -> str:
    llm = f"{{_target_:hoprag.llm.OpenAICompatLLM,model:m,api_key:{key}}}"
    return f"+metrics.crag_judge={{_target_:hoprag.evaluation.judges.LLMJudge,llm:{llm}}}"


@pytest.mark.parametrize(
    "name", ["api_key", "llm.api_key", "+metrics.crag_judge.llm.api_key", "OPENAI_API_KEY", "x-api-key", "hf_token",
             "token", "access_token", "password", "client_secret", "credentials", "Authorization"],
)  # fmt: skip
def test_credentials_are_secret(name):
    assert is_secret(name)


@pytest.mark.parametrize(
    "name", ["max_new_tokens", "max_input_tokens", "min_tokens", "token_budget", "token_counter", "tokenizer",
             "timeout_per_token", "pad_token", "prompt_tokens", "monitor", "keys", "base_url"],
)  # fmt: skip
def test_token_counts_and_tokenizer_settings_are_not(name):
    assert not is_secret(name)


def test_the_only_secret_in_the_shipped_configs_is_the_api_key(compose_cfg):
    found = set()

    def walk(node, prefix=""):
        for key, value in node.items():
            if is_secret(key):
                found.add(f"{prefix}{key}")
            elif isinstance(value, dict):
                walk(value, f"{prefix}{key}.")

    runs = [("eval", [f"+method={p.stem}", f"llm={llm}"]) for p in (CONF / "method").glob("*.yaml")
            for llm in ("openai", "smollm2")]  # fmt: skip
    runs += [("train", [f"+model={p.stem}"]) for p in (CONF / "model").glob("*.yaml")]
    for root, overrides in runs:
        walk(OmegaConf.to_container(compose_cfg(root, overrides), resolve=False))
    assert found == {"llm.api_key"}


def test_a_config_is_redacted_keeping_where_a_secret_comes_from():
    cfg = OmegaConf.create({
        "llm": {"api_key": "sk-1", "model": "m", "extra_body": {"hf_token": "${oc.env:HF_TOKEN}"}},
        "judge": {"api_key": None, "password": ""},
        "overrides": ["llm.api_key=sk-1", "+judge={llm:{api_key:sk-2}}", "limit=2"],
        "override_dirname": "llm.api_key=sk-1,limit=2",
    })  # fmt: skip
    assert redact(cfg) == {
        "llm": {"api_key": "***", "model": "m", "extra_body": {"hf_token": "${oc.env:HF_TOKEN}"}},
        "judge": {"api_key": None, "password": ""},
        "overrides": ["llm.api_key=***", "+judge={llm:{api_key:***}}", "limit=2"],
        "override_dirname": "llm.api_key=***,limit=2",
    }  # fmt: skip


def test_a_section_under_a_secret_like_name_is_searched_not_blanked():
    """`secrets_manager: {region: x, api_key: k}` keeps its settings; only the credential inside goes."""
    cfg = {"secrets_manager": {"region": "eu", "api_key": "sk-1"}, "tokens": [1, 2]}
    assert redact(cfg) == {"secrets_manager": {"region": "eu", "api_key": "***"}, "tokens": [1, 2]}


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("[HYDRA] \t#0 : +method=x llm.api_key=sk-1 limit=2", "[HYDRA] \t#0 : +method=x llm.api_key=*** limit=2"),
        ("llm.api_key=sk-1,sk-2", "llm.api_key=***"),  # a sweep's values, all of them
        ("llm.api_key='sk 1' seed=3", "llm.api_key=*** seed=3"),
        ("['llm.api_key=sk-1', 'x=1']", "['llm.api_key=***', 'x=1']"),
        ("url=http://host:80/v1 ${oc.env:OPENAI_API_KEY,null}", "url=http://host:80/v1 ${oc.env:OPENAI_API_KEY,null}"),
    ],
)  # fmt: skip
def test_a_text_is_redacted(text, redacted):
    assert redact_text(text) == redacted


def test_the_command_line_is_redacted_while_a_library_records_it_then_restored(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["eval.py", "+method=x", "llm.api_key=sk-1"])
    with redacted_argv():
        assert sys.argv == ["eval.py", "+method=x", "llm.api_key=***"]
    assert sys.argv == ["eval.py", "+method=x", "llm.api_key=sk-1"]  # Lightning's DDP launcher reruns it


def test_a_changed_key_changes_no_fingerprint_and_none_is_written(compose_cfg):
    first, second = (eval_fingerprint(compose_cfg("eval", ["+method=no_retrieval", judge(k)])) for k in ("a", "b"))
    assert first == second and "api_key" not in json.dumps(first)
    assert select_settings({"llm": {"hf_token": "t", "model": "m"}}, ["llm"], ()) == {"llm": {"model": "m"}}


def test_a_run_is_named_without_its_secrets():
    job = ["+method=prunerag", "llm.api_key=sk-1", judge("sk-2"), "limit=2"]
    label = override_label(job)
    assert "sk-" not in label and "llm.api_key" not in label
    assert label.startswith("method=prunerag,metrics.crag_judge=") and "api_key:***" in label


def test_a_secret_in_extra_body_is_not_part_of_the_generation_cache_key():
    def served(token: str) -> OpenAICompatLLM:
        return OpenAICompatLLM("m", api_key=token, extra_body={"top_k": 20, "api_key": token}, probe=False,
                               capabilities={"logprobs": True, "n": True, "prefill": False})  # fmt: skip

    assert served("sk-1").identity() == served("sk-2").identity()
    assert "sk-1" not in served("sk-1").identity() and '"top_k": 20' in served("sk-1").identity()


def test_the_files_hydra_writes_itself_are_rewritten_redacted_before_the_job_runs(tmp_path):
    hydra_dir = tmp_path / "sweep" / "0" / ".hydra"  # build_index and eval_retrieval let Hydra write .hydra/
    hydra_dir.mkdir(parents=True)
    (hydra_dir / "overrides.yaml").write_text("- llm.api_key=sk-1\n- limit=2\n")
    (hydra_dir / "config.yaml").write_text("llm:\n  api_key: sk-1\nlimit: 2\n")
    (tmp_path / "sweep" / "multirun.yaml").write_text("hydra:\n  overrides:\n    task: [llm.api_key=sk-1]\nlimit: 2\n")
    hydra = {"output_subdir": ".hydra", "runtime": {"output_dir": str(hydra_dir.parent)}, "mode": RunMode.MULTIRUN,
             "sweep": {"dir": str(tmp_path / "sweep")}}  # fmt: skip
    RedactSecrets().on_job_start(OmegaConf.create({"hydra": hydra}))
    assert OmegaConf.load(hydra_dir / "overrides.yaml") == ["llm.api_key=***", "limit=2"]
    assert OmegaConf.load(hydra_dir / "config.yaml") == {"llm": {"api_key": "***"}, "limit": 2}
    assert OmegaConf.load(tmp_path / "sweep" / "multirun.yaml").hydra.overrides.task == ["llm.api_key=***"]
