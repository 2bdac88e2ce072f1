"""Reasoning models: the thinking is split off once in the LLM layer (hoprag/llm/reasoning.py), so every method
sees the answer content, log-probs cover it, and each question's cost counts the thinking tokens and the replies
cut inside an unfinished block; the chat template's own settings (`chat_template_kwargs`) reach every backend."""

from __future__ import annotations

import json
import sys
import types
from types import SimpleNamespace

import pytest
from hydra.utils import instantiate

from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import HFLLM, OpenAICompatLLM, ScriptedLLM, SamplingParams
from hoprag.llm import hf as hf_backend
from hoprag.llm import vllm as vllm_backend
from hoprag.llm.base import cut_at_stop
from hoprag.llm.hf_decode import Decoder
from hoprag.llm.openai_http import parse_response
from hoprag.llm.reasoning import split_reasoning
from hoprag.llm.tokenizer import prompt_ids
from hoprag.llm.types import Generation
from hoprag.methods import ChatPrompt, StandardRAG
from hoprag.paths import PROJECT_ROOT
from hoprag.retrieval import DenseRetriever, Retriever
from tests.fakes import HashEmbedder, KeywordRetriever
from tests.unit.test_methods import CORPUS, EXAMPLES

PARAMS = SamplingParams()


# -- the split, for each form a reply takes ---------------------------------------------------------------


def test_an_opened_and_closed_block_is_held_apart_with_its_tokens():
    tokens = ("<think>", "\n", "Lyon", "?", "\n", "</think>", "\n\n", "Paris", ".")
    g = Generation("".join(tokens), tokens, (-1.0,) * 7 + (-0.1, -0.2), completion_tokens=10,
                   candidate_logprobs=tuple({"x": -float(i)} for i in range(9)))  # fmt: skip
    split = split_reasoning(g)
    assert (split.text, split.tokens, split.logprobs) == ("Paris.", ("Paris", "."), (-0.1, -0.2))
    assert split.candidate_logprobs == ({"x": -7.0}, {"x": -8.0})
    assert (split.reasoning, split.reasoning_tokens, split.completion_tokens) == ("Lyon?", 7, 10)
    assert not split.reasoning_cut and split.mean_logprob == pytest.approx(-0.15)  # a confidence over the answer


def test_a_block_the_template_opened_ends_with_the_closing_tag_only():
    tokens = ("Lyon", "?", "</think>", "\n\n", "Paris")
    split = split_reasoning(Generation("".join(tokens), tokens, (-1.0, -1.0, -1.0, -1.0, -0.1), completion_tokens=5))
    assert (split.text, split.tokens, split.logprobs, split.reasoning, split.reasoning_tokens) == (
        "Paris", ("Paris",), (-0.1,), "Lyon?", 4)


def test_a_reply_cut_inside_an_unfinished_block_has_no_content_and_is_marked():
    for text, opened in (("<think>\nLyon or Paris, let me", False), ("Lyon or Paris, let me", True)):
        g = Generation(text, tuple(text.split(" ")), (-1.0,) * 5, completion_tokens=5, finish_reason="length")
        split = split_reasoning(g, opened=opened)
        assert (split.text, split.tokens, split.logprobs) == ("", (), ())
        assert split.reasoning == "Lyon or Paris, let me" and split.reasoning_tokens == 5 and split.reasoning_cut
    plain = Generation("Paris", ("Paris",), (-0.1,), completion_tokens=1)
    assert split_reasoning(plain) is plain


def test_stop_strings_are_looked_for_in_the_content_only():
    thought = "<think>\nstep 1\n</think>\n\n"
    assert cut_at_stop(thought + "Paris\nmore", ["\n"]) == (thought + "Paris", True)
    assert cut_at_stop("<think>\nstep 1\nstep 2", ["\n"]) == ("<think>\nstep 1\nstep 2", False)
    assert cut_at_stop("step 1\nstep 2", ["\n"], opened=True) == ("step 1\nstep 2", False)
    assert cut_at_stop("Paris\nmore", ["\n"]) == ("Paris", True)


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])  # vLLM's newer and older names
def test_a_servers_reasoning_field_is_held_apart_and_its_tokens_dropped_from_the_logprobs(field):
    items = [("<think>", -1.0), ("Lyon", -1.0), ("?", -1.0), ("</think>", -1.0), ("\n\n", -1.0), ("Paris", -0.1),
             ("\n", -0.5), ("more", -0.5)]  # fmt: skip
    answer = {"choices": [{"index": 0, "finish_reason": "stop",
                           "message": {"content": "Paris\nmore", field: "Lyon?"},
                           "logprobs": {"content": [{"token": t, "logprob": lp} for t, lp in items]}}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 8}}  # fmt: skip
    (g,) = parse_response(answer, SamplingParams(stop=("\n",)), "url")
    assert (g.text, g.tokens, g.logprobs) == ("Paris", ("Paris",), (-0.1,))
    assert (g.reasoning, g.reasoning_tokens, g.completion_tokens, g.reasoning_cut) == ("Lyon?", 5, 8, False)


def test_a_servers_unfinished_reasoning_and_its_reported_reasoning_tokens():
    cut = {"choices": [{"message": {"content": None, "reasoning": "Lyon or"}, "finish_reason": "length"}],
           "usage": {"completion_tokens": 4, "completion_tokens_details": {"reasoning_tokens": 4}}}  # fmt: skip
    (g,) = parse_response(cut, PARAMS, "url")
    assert (g.text, g.reasoning, g.reasoning_tokens, g.reasoning_cut) == ("", "Lyon or", 4, True)
    assert g.finish_reason == "length"
    inline = {"choices": [{"message": {"content": "<think>\nLyon\n</think>\n\nParis"}}],
              "usage": {"completion_tokens": 6}}  # fmt: skip
    (raw,) = parse_response(inline, PARAMS, "url")  # no reasoning parser on the server: split by LLM.generate
    assert raw.reasoning is None and split_reasoning(raw).text == "Paris"


def test_a_served_reply_is_split_whichever_way_the_server_returns_the_thinking(monkeypatch):
    caps = {"logprobs": False, "n": True, "prefill": True}
    llm = OpenAICompatLLM(model="m", probe=False, capabilities=caps)
    messages = iter([{"content": "Paris", "reasoning": "Lyon?"}, {"content": "<think>\nLyon?\n</think>\n\nParis"}])
    monkeypatch.setattr(llm, "post", lambda url, body, timeout=None: {
        "choices": [{"message": next(messages)}], "usage": {"completion_tokens": 6}})  # fmt: skip
    costs = [Cost(), Cost()]
    apart, inline = (llm.generate(["q"], costs=[c])[0][0] for c in costs)
    assert (apart.text, apart.reasoning) == (inline.text, inline.reasoning) == ("Paris", "Lyon?")
    assert [c.reasoning_tokens for c in costs] == [apart.reasoning_tokens, inline.reasoning_tokens]
    assert 0 < inline.reasoning_tokens < 6  # no tokens returned: estimated from the characters


# -- through the LLM layer: the scripted LLM thinking first, the cache, the per-question counters ------------


def test_the_scripted_llm_thinks_first_and_every_token_is_charged():
    costs = [Cost(), Cost()]
    plain = ScriptedLLM(rules=[("France", "Answer: Paris\nmore")])
    thinking = ScriptedLLM(rules=[("France", "Answer: Paris\nmore")], think="Answer: Lyon\nno, wait")
    ((a,),) = plain.generate(["France?"], stop=["\n"])
    ((b,),) = thinking.generate(["France?"], stop=["\n"], costs=costs[:1])
    assert b.text == a.text == "Answer: Paris" and b.tokens == a.tokens and b.reasoning == "Answer: Lyon\nno, wait"
    assert b.reasoning_tokens == 6 and b.completion_tokens == a.completion_tokens + 6  # <think> 4 words </think>
    assert costs[0].reasoning_tokens == 6 and costs[0].completion_tokens == b.completion_tokens
    opened = ScriptedLLM(rules=[("France", "Paris")], think="Lyon?", think_opened=True)
    (c,) = opened.generate(["France?"], costs=costs[1:])[0]
    assert (c.text, c.reasoning, c.reasoning_tokens) == ("Paris", "Lyon?", 2)
    cut = ScriptedLLM(rules=[("France", "Paris")], think="Lyon or Paris", think_cut=True)
    (d,) = cut.generate(["France?"], costs=costs[1:])[0]
    assert (d.text, d.reasoning_cut, d.finish_reason) == ("", True, "length")
    assert costs[1].reasoning_cut == 1 and costs[1].reasoning_tokens == 2 + 4


def test_the_token_limit_covers_the_thinking_unless_a_reasoning_budget_is_given():
    rules = [("France", "Answer: Paris is the capital")]
    (cut,) = ScriptedLLM(rules=rules, think="one two three").generate(["France?"], max_new_tokens=4)[0]
    assert cut.text == "" and cut.reasoning_cut
    budget = ScriptedLLM(rules=rules, think="one two three", reasoning_budget=5)
    (g,) = budget.generate(["France?"], max_new_tokens=2)[0]
    assert (g.text, g.tokens, g.finish_reason) == ("Answer: Paris", ("Answer:", "Paris"), "length")
    assert g.reasoning_tokens == 5 and g.completion_tokens == 2 + 5  # generated up to the limit plus the budget


def test_a_cached_reply_reads_back_split(tmp_path):
    def llm():
        return ScriptedLLM(rules=[("France", "Paris")], think="Lyon?", generation_cache=str(tmp_path))

    fresh = llm().generate(["France?"])[0][0]
    again = llm()
    costs = [Cost()]
    assert again.generate(["France?"], costs=costs)[0][0] == fresh and again.calls == []
    assert costs[0].llm_cache_hits == 1 and costs[0].reasoning_tokens == fresh.reasoning_tokens == 3


def test_hf_decoding_waits_for_the_thinking_before_stopping():
    """The in-process decoder's stop check and its Generation (a character tokenizer: ids are code points)."""
    tokenizer = SimpleNamespace(eos_token_id=0, decode=lambda ids, skip_special_tokens=True: "".join(map(chr, ids)),
                                batch_decode=lambda rows: ["".join(map(chr, r)) for r in rows])  # fmt: skip
    model = SimpleNamespace(generation_config=SimpleNamespace(eos_token_id=0))
    decoder = Decoder(model, tokenizer, prefill_each=True)
    reply = "<think>\na\nb\n</think>\n\nParis\nmore"
    g = decoder.finish([ord(c) for c in reply], [-0.5] * len(reply), ["\n"], 3)
    split = split_reasoning(g)
    assert (split.text, split.reasoning, split.completion_tokens) == ("Paris", "a\nb", reply.index("more"))
    opened = decoder.finish([ord(c) for c in "a\nb"], [-0.5] * 3, ["\n"], 3, opened=True)
    assert opened.text == "a\nb" and split_reasoning(opened, opened=True).reasoning_cut


def test_reasoning_counters_reach_metrics_json(tmp_path):
    corpus = [Passage("p1", "Paris", "Paris is the capital of France.")]
    examples = [QAExample("q1", "What is the capital of France?", ["Paris"]), QAExample("q2", "Capital?", ["Paris"])]
    llm = ScriptedLLM(rules=[(r"\[1\] ([^\n]*)", r"Answer: \1")], think="the first passage says")
    prompt = ChatPrompt(system="Use the passages.", user="{passages}\n\nQuestion: {question}\nAnswer:")
    metrics = run(StandardRAG(llm, KeywordRetriever(corpus), prompt=prompt, k=1), examples, tmp_path)
    written = json.loads((tmp_path / "metrics.json").read_text())["metrics"]
    assert written["cost/total/reasoning_tokens"] == metrics["cost/total/reasoning_tokens"] == 2 * 6
    assert written["cost/mean/reasoning_tokens"] == 6 and written["cost/total/reasoning_cut"] == 0
    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [r["prediction"] for r in records] == ["Paris", "Paris"] and records[0]["cost"]["reasoning_tokens"] == 6


# -- the chat template's settings ------------------------------------------------------------------------


class RecordingTokenizer:
    """A chat template that records the settings it was given."""

    chat_template = "recorded"

    def __init__(self) -> None:
        self.kwargs: list[dict] = []

    def apply_chat_template(self, messages, tokenize=False, **kwargs):
        self.kwargs.append(kwargs)
        thinking = kwargs.get("enable_thinking", True)
        return "".join(m["content"] for m in messages) + ("<think>\n" if thinking else "<think></think>")

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids):
        return "".join(map(chr, ids))


def test_chat_template_kwargs_reach_apply_chat_template_in_every_backend(monkeypatch):
    tokenizer = RecordingTokenizer()
    prompt_ids(tokenizer, "q", True, {"enable_thinking": False})
    assert tokenizer.kwargs[-1] == {"enable_thinking": False, "add_generation_prompt": True}

    monkeypatch.setattr(hf_backend, "load_tokenizer", lambda *a, **k: tokenizer)
    hf = HFLLM(model="some/model", chat_template_kwargs={"enable_thinking": False})
    assert hf.prompt_token_count("q") == len("q<think></think>") and tokenizer.kwargs[-1]["enable_thinking"] is False
    assert not hf.reasoning_opened("q") and HFLLM(model="some/model").reasoning_opened("q")  # the template's default
    assert "enable_thinking" in hf.identity() and "enable_thinking" not in HFLLM(model="some/model").identity()

    engine = SimpleNamespace(get_tokenizer=lambda: tokenizer)
    module = types.ModuleType("vllm")
    module.LLM = lambda **kwargs: engine
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setattr(vllm_backend, "_ENGINES", {})
    served = vllm_backend.VLLMLLM(model="some/model", chat_template_kwargs={"enable_thinking": False})
    assert served.engine_prompt("q")["prompt_token_ids"] == [ord(c) for c in "q<think></think>"]
    assert tokenizer.kwargs[-1]["enable_thinking"] is False and "enable_thinking" in served.identity()


def test_chat_template_kwargs_are_sent_to_an_openai_compatible_server():
    caps = {"logprobs": True, "n": True, "prefill": True}
    llm = OpenAICompatLLM(model="m", probe=False, capabilities=caps, chat_template_kwargs={"enable_thinking": False})
    url, body = llm.request("q", PARAMS)
    assert url.endswith("/chat/completions") and body["chat_template_kwargs"] == {"enable_thinking": False}
    default = OpenAICompatLLM(model="m", probe=False, capabilities=caps)
    assert "chat_template_kwargs" not in default.request("q", PARAMS)[1]
    assert "enable_thinking" in llm.identity()


# -- the acceptance test: every method answers the same when its LLM thinks first ---------------------------

# what every method's parser would take for an answer, a decision or an action if it read the thinking
BAIT = ('Answer: Berlin.\nSo the answer is Berlin.\nFollow up: Berlin?\nAction 1: Finish[Berlin]\n'
        '{"type": "answer", "answer": "Berlin"} \\boxed{Berlin} [Retrieval] [Relevant] b')  # fmt: skip
METHODS = sorted(p.stem for p in (PROJECT_ROOT / "conf" / "method").glob("*.yaml"))



def retriever_for(name: str) -> Retriever:
    """TreeHop searches embedding vectors; the others search words."""
    if name == "treehop":
        return DenseRetriever(CORPUS, HashEmbedder(), index={"use_gpu": False})
    return KeywordRetriever(CORPUS)


@pytest.mark.parametrize("name", METHODS)
def test_every_method_answers_the_same_when_its_llm_thinks_first(compose_cfg, tmp_path, name):
    overrides = ["verifier@method.verifier=scripted"] if name.startswith("sc_rag") and name != "sc_rag_select" else []
    if name in ("treehop", "tree_retrieval"):  # retrieval only by default: let them answer too
        overrides.append("method.generate=true")
    cfg = compose_cfg("eval", [f"+method={name}", "llm=scripted", *overrides])
    factory = instantiate(cfg.method)
    results = {}
    for think in (None, BAIT):
        llm = instantiate(cfg.llm, think=think, reasoning_budget=64)  # the methods' token limits hold for the answer
        retriever = {"retriever": retriever_for(name)} if factory.func.needs_retriever else {}
        method = factory(llm=llm, **retriever)
        metrics = run(method, EXAMPLES, tmp_path / str(think is None))
        lines = (tmp_path / str(think is None) / "predictions.jsonl").read_text().splitlines()
        results[think] = ([json.loads(line)["prediction"] for line in lines], metrics, llm.calls)
    (plain, plain_metrics, calls), (thought, metrics, _) = results[None], results[BAIT]
    assert thought == plain
    assert calls and metrics["cost/total/reasoning_cut"] == 0
    assert metrics["cost/total/reasoning_tokens"] > 0 and plain_metrics["cost/total/reasoning_tokens"] == 0
    assert metrics["cost/total/completion_tokens"] == (
        plain_metrics["cost/total/completion_tokens"] + metrics["cost/total/reasoning_tokens"])
