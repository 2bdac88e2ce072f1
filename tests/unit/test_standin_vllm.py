"""hoprag's vLLM backend end to end against the rehearsal's stand-ins (tests/standins/): the stand-in `vllm` engine
running the bundled SmolLM2 under the paper's hub id `Qwen/Qwen3-8B`, read from a local Hugging Face cache laid
out by tests/standins/hub.py. What runs is hoprag's real code: engine arguments, chat template (with Qwen3's
`enable_thinking`), sampling parameters, output conversion, log-probs, the reasoning split, Self-RAG's top
log-probs and the GPU memory a second engine finds."""

from __future__ import annotations

import gc
import sys

import huggingface_hub.constants
import pytest

from hoprag.cost import Cost
from hoprag.llm import vllm as vllm_backend
from hoprag.llm.vllm import VLLMLLM, release_engines
from hoprag.paths import PROJECT_ROOT
from tests.standins import hub

pytestmark = pytest.mark.real
QWEN3 = "Qwen/Qwen3-8B"


@pytest.fixture(scope="module")
def standin_hub(tmp_path_factory):
    """The stand-in `vllm` importable and Qwen3-8B's stand-in in a hub cache, for this module only."""
    cache = tmp_path_factory.mktemp("hub")
    hub.lay_out(cache, tuple(s for s in hub.STAND_INS if s.hub_id == QWEN3))
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_CACHE", str(cache))
    mp.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))  # read once, when the hub library loaded
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.syspath_prepend(str(PROJECT_ROOT / "tests" / "standins"))
    sys.modules.pop("vllm", None)
    yield cache
    vllm_backend._ENGINES.clear()
    sys.modules.pop("vllm", None)
    mp.undo()
    gc.collect()


def qwen3(**kwargs) -> VLLMLLM:
    return VLLMLLM(model=QWEN3, max_model_len=40960, default={"max_new_tokens": 24}, **kwargs)


def test_a_thinking_model_reasons_first_and_hoprag_reads_past_it(standin_hub):
    import vllm

    assert vllm.__version__.endswith("hoprag.standin")  # the stand-in, never a real vLLM
    cost = Cost()
    [[thinking]] = qwen3().generate(["Which city is the capital of France?"], costs=[cost])
    assert thinking.reasoning and thinking.reasoning_tokens > 0 and "<think>" not in thinking.text
    assert thinking.completion_tokens >= thinking.reasoning_tokens + len(thinking.tokens)
    assert cost.reasoning_tokens == thinking.reasoning_tokens and cost.completion_tokens == thinking.completion_tokens
    assert thinking.logprobs is not None and len(thinking.logprobs) == len(thinking.tokens)  # the answer's only
    [[plain]] = qwen3(chat_template_kwargs={"enable_thinking": False}).generate(["Which city is the capital of France?"])
    assert plain.reasoning is None and plain.reasoning_tokens == 0  # the template's empty block: no thinking


def test_a_reply_cut_inside_its_thinking_is_counted(standin_hub):
    cost = Cost()
    [[cut]] = qwen3().generate(["Which city is the capital of France?"], costs=[cost], max_new_tokens=4)
    assert cut.text == "" and cut.reasoning_cut and cut.finish_reason == "length" and cost.reasoning_cut == 1


def test_the_engine_starts_with_the_top_logprobs_self_rag_needs(standin_hub):
    vllm_backend._ENGINES.clear()  # the engines of earlier tests hold 20; Self-RAG's starts with what it needs
    gc.collect()
    llm = qwen3()
    llm.require_top_logprobs(5000)  # Self-RAG's official 5,000 (conf/method/self_rag.yaml)
    [[g]] = llm.generate(["Is Paris in France?"], candidates=("Yes", "No"), max_new_tokens=2)
    assert llm.engine.max_logprobs >= 5000 and g.candidate_logprobs and "Yes" in g.candidate_logprobs[0]


def test_a_max_model_len_beyond_the_model_is_refused_as_vllm_does(standin_hub):
    with pytest.raises(ValueError, match="max_model_len"):
        VLLMLLM(model=QWEN3, max_model_len=100_000).engine


def test_an_engine_is_released_when_its_job_ends_so_the_next_model_finds_the_gpu_free(standin_hub):
    """Issue 43 item 1: vLLM refuses a second engine while the first holds 0.9 of the GPU; eval.py releases its
    engines when its job ends (hoprag.llm.release_engines), as a multirun's next job needs."""
    release_engines()
    qwen3().generate(["Hi"], max_new_tokens=1)
    other = VLLMLLM(model=QWEN3, max_model_len=8192)  # other engine arguments: another engine
    with pytest.raises(ValueError, match="Free memory on device"):
        other.generate(["Hi"], max_new_tokens=1)
    assert release_engines() == [QWEN3]
    [[g]] = other.generate(["Hi"], max_new_tokens=1)
    assert g.completion_tokens <= 1 and release_engines() == [QWEN3]
