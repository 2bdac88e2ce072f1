"""The preflight: each kind of need a job's composed config implies, its state asked the way the job will ask
(a file on disk, the Hugging Face cache the environment names, an import spec, a real HTTP request), and the
command that provides it; a secret's value never shown; PruneRAG's paper table naming its wiki-18 index."""

from __future__ import annotations

import importlib.util
import json
import shlex
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import faiss
import numpy as np
import pytest
from omegaconf import OmegaConf

from hoprag.paths import PROJECT_ROOT
from hoprag.reproduce import Table, plan
from hoprag.reproduce.preflight import Host, Preflight, check, compose_jobs, refuse
from hoprag.reproduce.preflight.gpu import gpu_needs
from hoprag.reproduce.preflight.indexes import BM25, DENSE, build_command, index_dir, index_parts
from hoprag.reproduce.preflight.need import Need
from hoprag.reproduce.preflight.report import render
from hoprag.reproduce.preflight.view import JobView, objects
from hoprag.reproduce.runner import check as check_table
from tests.unit.test_faiss_placement import FakeGpus, faiss_cpu

BUNDLED = "hotpotqa/hotpot_dev_distractor_185.json"


def one_row_table(tmp_path: Path, *overrides: str, method: str = "standard_rag") -> Table:
    """A table of one row (`method` over BM25, the scripted LLM, the bundled HotpotQA sample) with `overrides` at
    both scales, its caches under `tmp_path`."""
    scale = {"label": "test", "overrides": ["llm=scripted", "retriever=bm25", f"paths.cache_dir={tmp_path / 'cache'}",
                                            *overrides]}  # fmt: skip
    return Table.parse({
        "name": "t", "title": "T", "digest": "spec/none.md", "baseline": "rag",
        "scales": {"smoke": scale, "paper": {**scale, "overrides": ["aids=none", *scale["overrides"]]}},
        "groups": {"hotpotqa": {"label": "HotpotQA", "overrides": ["data=hotpotqa"]}},
        "metrics": {"f1": {"label": "F1", "key": "f1"}},
        "rows": [{"id": "rag", "name": "RAG", "overrides": [f"+method={method}"]}],
    })  # fmt: skip


def preflight(tmp_path: Path, *overrides: str, scale: str = "smoke", method: str = "standard_rag",
              **host: object) -> Preflight:  # fmt: skip
    table = one_row_table(tmp_path, *overrides, method=method)
    jobs = plan(table, scale, tmp_path / "out")
    return check(table, scale, jobs, Host(**{"env": {}, "hub_cache": str(tmp_path / "hub"), "gpus": [], **host}))


def need(found: Preflight, kind: str, what: str) -> Need:
    return found.needs[(kind, what)]


def test_a_data_file_is_found_under_the_data_root_or_named_with_the_command_that_fetches_it(tmp_path):
    found = preflight(tmp_path)
    assert need(found, "file", BUNDLED).state == "ok" and not found.missing
    found = preflight(tmp_path, "data.questions=hotpotqa/hotpot_dev_distractor_v1.json")
    lacking = need(found, "file", "hotpotqa/hotpot_dev_distractor_v1.json")
    assert lacking.state == "missing" and found.lacking("rag/hotpotqa") == [lacking]
    assert lacking.command.startswith("mkdir -p ") and "curtis.ml.cmu.edu" in lacking.command  # fetch.SOURCES'


def hub_cache(root: Path, repo: str, files: dict[str, str]) -> None:
    """A Hugging Face cache holding `files` of `repo` at one snapshot (the layout huggingface_hub reads)."""
    folder = root / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text("0" * 40)
    snapshot = folder / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    for name, text in files.items():
        (snapshot / name).write_text(text)


def test_a_hub_model_is_ok_only_when_the_cache_the_environment_names_holds_its_weights(tmp_path):
    model = "embedder.model=BAAI/bge-small-en-v1.5"
    lacking = need(preflight(tmp_path, "retriever=dense", model), "model", "BAAI/bge-small-en-v1.5")
    assert (lacking.state, lacking.command) == ("missing", "hf download BAAI/bge-small-en-v1.5")
    assert str(tmp_path / "hub") in lacking.note
    hub_cache(tmp_path / "hub", "BAAI/bge-small-en-v1.5", {"config.json": "{}"})
    found = need(preflight(tmp_path, "retriever=dense", model), "model", "BAAI/bge-small-en-v1.5")
    assert found.state == "missing" and found.note.startswith("no weight file in ")
    (next((tmp_path / "hub").glob("models--*/snapshots/*")) / "model.safetensors").write_bytes(b"0" * 8)
    assert need(preflight(tmp_path, "retriever=dense", model), "model", "BAAI/bge-small-en-v1.5").state == "ok"
    # the cache the jobs' environment names: HF_HOME/hub
    (tmp_path / "home").mkdir()
    (tmp_path / "hub").rename(tmp_path / "home" / "hub")
    found = preflight(tmp_path, "retriever=dense", model, hub_cache=None, env={"HF_HOME": str(tmp_path / "home")})
    assert need(found, "model", "BAAI/bge-small-en-v1.5").state == "ok"


def test_a_gated_model_that_is_not_cached_needs_a_token_whose_value_is_never_shown(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_TOKEN_PATH", str(tmp_path / "no-token"))
    gated = "metrics.qa_reader=meta-llama/Llama-3.1-8B-Instruct"
    assert need(preflight(tmp_path, gated), "credential", "HF_TOKEN").state == "missing"
    found = preflight(tmp_path, gated, env={"HF_TOKEN": "hf_very_secret_value"})
    assert need(found, "credential", "HF_TOKEN").state == "ok"
    assert "hf_very_secret_value" not in render(found)


def free_port() -> int:
    """A port on 127.0.0.1 that nobody listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server() -> Iterator[str]:
    """A local OpenAI-compatible endpoint listing one model, `served-model`, at /v1/models."""

    class Models(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = json.dumps({"object": "list", "data": [{"id": "served-model", "object": "model"}]}).encode()
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()


def openai(base_url: str, model: str) -> tuple[str, ...]:
    return ("llm=openai", f"llm.base_url={base_url}", f"llm.model={model}", "llm.probe=false")


def test_a_server_is_asked_for_its_models_and_must_serve_the_configured_one(tmp_path, server):
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    down = need(preflight(tmp_path, *openai(nobody, "served-model")), "server", f"{nobody} serving served-model")
    assert down.state == "missing" and "GET " in down.note
    assert down.command == f"vllm serve served-model --port {nobody.split(':')[2].split('/')[0]}"
    found = preflight(tmp_path, *openai(server, "served-model"))
    assert need(found, "server", f"{server} serving served-model").state == "ok"
    assert ("credential", "OPENAI_API_KEY") not in found.needs  # a server on this machine asks for no key
    other = need(preflight(tmp_path, *openai(server, "other-model")), "server", f"{server} serving other-model")
    assert (other.state, other.note) == ("missing", "it serves served-model")


def test_openais_url_is_the_one_openai_base_url_names_where_it_is_set(tmp_path, server):
    env = {"OPENAI_BASE_URL": server, "OPENAI_API_KEY": "sk-stand-in"}
    found = preflight(tmp_path, *openai("https://api.openai.com/v1", "served-model"), env=env)
    assert need(found, "server", f"{server} serving served-model").state == "ok" and not found.missing


def test_a_hosted_api_needs_its_key_named_never_shown(tmp_path):
    hosted = openai("https://api.example.invalid/v1", "gpt-4o-mini")
    assert need(preflight(tmp_path, *hosted, timeout=1), "credential", "OPENAI_API_KEY").state == "missing"
    found = preflight(tmp_path, *hosted, timeout=1, env={"OPENAI_API_KEY": "sk-never-printed-42"})
    assert need(found, "credential", "OPENAI_API_KEY").state == "ok"
    assert "sk-never-printed-42" not in render(found) + repr(found.needs)


def test_an_optional_extra_is_found_by_import_so_a_stand_in_module_on_the_jobs_pythonpath_passes(tmp_path):
    vllm = ("llm=vllm", "llm.model=Qwen/Qwen2.5-7B-Instruct")
    if importlib.util.find_spec("vllm") is None:  # a GPU machine with vLLM installed has it
        lacking = need(preflight(tmp_path, *vllm), "extra", "vllm (Python package)")
        assert (lacking.state, lacking.command) == ("missing", "pip install -e '.[vllm]'")
    (tmp_path / "fake" / "vllm").mkdir(parents=True)
    (tmp_path / "fake" / "vllm" / "__init__.py").write_text("")
    found = preflight(tmp_path, *vllm, env={"PYTHONPATH": str(tmp_path / "fake")})
    assert need(found, "extra", "vllm (Python package)").state == "ok"


def test_treerares_ct_parser_needs_stanzas_model_where_stanza_keeps_it_and_the_dt_rows_do_not(tmp_path):
    ct = ("method.tree=ct",)
    env = {"STANZA_RESOURCES_DIR": str(tmp_path / "stanza")}
    what = "Stanza's 'en' constituency model"
    lacking = need(preflight(tmp_path, *ct, method="treerare", env=env), "extra", what)
    assert lacking.state == "missing" and "stanza.download('en'" in lacking.command
    (tmp_path / "stanza" / "en" / "constituency").mkdir(parents=True)
    (tmp_path / "stanza" / "en" / "constituency" / "ptb3-revised_charlm.pt").write_bytes(b"0")
    (tmp_path / "stanza" / "resources.json").write_text("{}")
    assert need(preflight(tmp_path, *ct, method="treerare", env=env), "extra", what).state == "ok"
    assert ("extra", what) not in preflight(tmp_path, "method.tree=dt", method="treerare", env=env).needs


def test_an_engine_is_sized_against_the_gpus_present_and_missing_only_where_it_does_not_fit(tmp_path):
    vllm = ("llm=vllm", "llm.model=Qwen/Qwen2.5-7B-Instruct", "llm.max_model_len=8192")
    what = "vLLM Qwen/Qwen2.5-7B-Instruct (8192 tokens, 0.9 of 1 GPU)"
    none = need(preflight(tmp_path, *vllm), "gpu", what)
    assert none.state == "unknown" and none.note.endswith("no GPU here")
    assert need(preflight(tmp_path, *vllm, gpus=[80 * 2**30]), "gpu", what).state == "ok"  # ≈15 GiB of 72
    assert need(preflight(tmp_path, *vllm, gpus=[12 * 2**30]), "gpu", what).state == "missing"
    # sized from the cache when it holds the model: its weights' bytes, KV cache from config.json
    config = {"torch_dtype": "bfloat16", "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
              "hidden_size": 3584}  # fmt: skip
    hub_cache(tmp_path / "hub", "Qwen/Qwen2.5-7B-Instruct", {"config.json": json.dumps(config), "model.safetensors": "0"})
    sized = need(preflight(tmp_path, *vllm, gpus=[3 * 2**30]), "gpu", what)  # 2 GiB + 448 MiB of KV ≤ 0.9 × 3 GiB
    assert sized.state == "ok" and "from the cached weights" in sized.note


def test_engines_of_one_process_share_the_gpu_and_those_with_the_same_arguments_are_one():
    llm = {"_target_": "hoprag.llm.VLLMLLM", "model": "org/m-1b", "gpu_memory_utilization": 0.5}
    host = Host(env={}, hub_cache="/nonexistent", gpus=[80 * 2**30])
    assert [n.kind for n in gpu_needs([llm, dict(llm)], host)] == ["gpu"]  # one engine
    needs = list(gpu_needs([llm, {**llm, "model": "org/other-1b", "gpu_memory_utilization": 0.6}], host))
    assert needs[-1].what == "2 vLLM engines in one process (0.5 + 0.6 of the GPU)" and needs[-1].state == "missing"


def test_at_a_scale_that_builds_no_index_in_its_jobs_the_exact_build_command_makes_the_index_needed(tmp_path):
    found = preflight(tmp_path, scale="paper")
    what = f"BM25 index of hotpotqa's questions ({BUNDLED})"
    lacking = need(found, "index", what)
    assert lacking.state == "missing" and "no index in" in lacking.note
    assert lacking.command == f"python build_index.py data=hotpotqa retriever=bm25 paths.cache_dir={tmp_path / 'cache'}"
    assert refuse(plan(one_row_table(tmp_path), "paper", tmp_path / "out"), found)[0].skip == lacking.reason
    assert ("index", what) not in preflight(tmp_path).needs  # smoke: the job builds its own
    built = subprocess.run([sys.executable, *lacking.command.split()[1:]], cwd=PROJECT_ROOT, capture_output=True,
                           text=True, check=False)  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    assert need(preflight(tmp_path, scale="paper"), "index", what).state == "ok"


def test_prunerag_t1_at_paper_scale_lists_its_needs_with_the_wiki18_index_and_its_build_command(
    compose_cfg, tmp_path
):
    cfg = compose_cfg("reproduce", ["table=prunerag_t1", "scale=paper"])
    table = Table.parse(OmegaConf.to_container(cfg.table, resolve=True))
    found = check_table(table, "paper", tmp_path, host=Host(env={}, hub_cache=str(tmp_path / "hub"), gpus=[]))
    command = ("python build_index.py corpus=retrieval-corpus/wiki18_100w.jsonl retriever=dense embedder=bge_large_en "
               "index=flat")
    wiki18 = need(found, "index", "dense bge-large-en-v1.5 Flat index of retrieval-corpus/wiki18_100w.jsonl")
    assert wiki18.command == command and wiki18.state == "missing"
    assert {"Qwen/Qwen3-8B", "selfrag/selfrag_llama2_7b", "BAAI/bge-large-en-v1.5"} <= {
        what for kind, what in found.needs if kind == "model"}  # fmt: skip
    assert {("file", "retrieval-corpus/wiki18_100w.jsonl"), ("extra", "vllm (Python package)")} <= set(found.needs)
    assert "vanilla/hotpotqa" not in found.users[wiki18.key]  # closed book: no index
    text = render(found)
    assert f"`{command}`" in text and "| index | dense bge-large-en-v1.5 Flat index of" in text



DENSE_HASHING = ("retriever=dense", "embedder=hashing")


def dense_need(found: Preflight) -> Need:
    return need(found, "index", f"dense hashing Flat index of hotpotqa's questions ({BUNDLED})")


def test_a_dense_index_says_where_it_will_search_and_the_memory_that_takes(tmp_path, monkeypatch):
    faiss_cpu(monkeypatch)
    on_cpu = dense_need(preflight(tmp_path, *DENSE_HASHING, scale="paper"))
    assert on_cpu.state == "missing" and "searches on the CPU (the installed FAISS has no GPU support" in on_cpu.note
    assert "read whole: 0.0 GiB of memory" in on_cpu.note
    mapped = dense_need(preflight(tmp_path, *DENSE_HASHING, "index.mmap=true", "index.use_gpu=cpu", scale="paper"))
    assert "on the CPU, memory-mapped: 0.0 GiB on disk" in mapped.note


def test_an_index_placed_on_a_gpu_is_sized_against_what_the_jobs_vllm_engine_leaves_of_it(tmp_path, monkeypatch):
    FakeGpus(monkeypatch, n=1)
    alone = preflight(tmp_path, *DENSE_HASHING, "index.use_gpu=gpu", scale="paper", gpus=[2_000_000])
    assert "searches on GPU 0: 0.0 GiB of GPU memory" in dense_need(alone).note
    [placed] = [n for n in alone.needs.values() if n.kind == "gpu"]
    assert placed.state == "ok" and placed.what.startswith("0.0 GiB on each of GPU 0 for the dense hashing Flat")
    vllm = ("llm=vllm", "llm.model=org/m-1b")  # 0.9 of GPU 0 to the engine: 0.2 MB left, the index is ~0.5 MB
    shared = preflight(tmp_path, *DENSE_HASHING, "index.use_gpu=gpu", *vllm, scale="paper", gpus=[2_000_000])
    crowded = shared.needs[placed.key]
    assert crowded.state == "missing" and "after the job's vLLM engines' share" in crowded.note
    assert "index=wiki18" in crowded.command and "index.use_gpu=auto:shard" in crowded.command
    faiss_cpu(monkeypatch)
    refused = preflight(tmp_path, *DENSE_HASHING, "index.use_gpu=gpu", scale="paper")
    assert need(refused, "gpu", "FAISS placement index.use_gpu=gpu").state == "missing"


def test_flashrags_prebuilt_file_is_a_file_need_and_its_conversion_an_index_need(tmp_path):
    flat = faiss.IndexFlatIP(64)
    flat.add(np.eye(64, dtype=np.float32)[:8])
    faiss.write_index(flat, str(tmp_path / "e5_Flat.index"))
    prebuilt = ("retriever=flashrag_dense", f"retriever.index_path={tmp_path / 'e5_Flat.index'}")
    as_is = need(preflight(tmp_path, *prebuilt, scale="paper"), "file", str(tmp_path / "e5_Flat.index"))
    assert as_is.state == "ok" and as_is.note.startswith("searched as it is: searches on the CPU")
    converted = preflight(tmp_path, *prebuilt, "index=ivfpq", scale="paper")
    conversion = need(converted, "index", f"IVF4096,PQ64 conversion of {tmp_path / 'e5_Flat.index'}")
    assert conversion.state == "missing" and "no index in" in conversion.note and "searches on the CPU" in conversion.note
    assert conversion.command.startswith("python build_index.py data=hotpotqa retriever=flashrag_dense")
    absent = preflight(tmp_path, "retriever=flashrag_dense", "retriever.index_path=wiki18/e5_Flat.index", scale="paper")
    lacking = need(absent, "file", "wiki18/e5_Flat.index")
    assert lacking.state == "missing" and lacking.command.startswith("put FlashRAG's FAISS file at")


TABLES = sorted(p.stem for p in (PROJECT_ROOT / "conf" / "table").glob("*.yaml"))
FINGERPRINT = "f" * 64


@pytest.mark.parametrize("name", TABLES)
def test_every_index_command_builds_the_index_where_its_job_reads_it(compose_cfg, tmp_path, name):
    """build_index.yaml composed with the command: the same corpus, the same index directories."""
    cfg = compose_cfg("reproduce", [f"table={name}", "scale=paper"])
    table = Table.parse(OmegaConf.to_container(cfg.table, resolve=True))
    jobs = [j for j in plan(table, "paper", tmp_path) if not j.skip]
    built: dict[str, object] = {}
    cache = f"paths.cache_dir={tmp_path}/cache"  # as compose_cfg composes build_index.yaml
    for job, eval_cfg in compose_jobs(jobs, [cache], with_choices=True):
        view = JobView.of(eval_cfg, job.overrides)
        parts = index_parts(view) if view.searches else []
        if not parts:
            continue
        command = build_command(view, any(p["_target_"] == DENSE for p in parts))
        if command not in built:
            built[command] = compose_cfg("build_index", shlex.split(command)[2:])
        index = built[command]
        assert [index_dir(p, FINGERPRINT) for p in parts] == [
            index_dir(p, FINGERPRINT) for p in objects(OmegaConf.to_container(index.retriever, resolve=True))
            if p["_target_"] in (DENSE, BM25)], f"{job.name}: {command}"  # fmt: skip
        data = view.sections["data"]
        if index.corpus is not None:
            assert index.corpus == data["corpus"], f"{job.name}: {command}"
        else:
            assert corpus_settings(OmegaConf.to_container(index.data, resolve=True)) == corpus_settings(data)


def corpus_settings(data: dict) -> dict:
    """A dataset config without what picks its questions (limit, sample, seed): what decides its pooled corpus."""
    return {k: v for k, v in data.items() if k not in ("limit", "sample", "seed")}
