"""PruneRAG's small-model aids (assistant prefills, chat examples, free-text and lenient-JSON fallbacks,
one-item splits, paper-literal retries), driven by the scripted LLM: each is exact, counted, and off in the
faithful setting."""

from __future__ import annotations

import json
import math
import re

import pytest
from hydra.utils import instantiate

from hoprag.config import apply_aids
from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.llm import ScriptedLLM
from hoprag.methods import PruneRAG
from hoprag.retrieval import Hit, Retriever
from hoprag.search.prunerag import format_tree, parse_decision
from hoprag.search.prunerag.parsing import free_text_answer
from hoprag.search.prunerag.prompts import EXAMPLES, REFLECTION, decision_prompt, final_prompt
from tests.unit.test_prunerag import prunerag

Q = "When was Arthur's Magazine first published?"


class StubRetriever(Retriever):
    """k passages per query, made from the query string; records every batch."""

    def __init__(self) -> None:
        super().__init__([])
        self.batches: list[list[str]] = []

    def _search(self, queries, k):
        self.batches.append(list(queries))
        return [[Hit(Passage(f"{q}#{i}", f"Title {i} of {q}", f"passage {i} about {q}"), 1.0 / i, i)
                 for i in range(1, k + 1)] for q in queries]  # fmt: skip


def ask(method: PruneRAG):
    costs = [Cost()]
    return method.answer([QAExample("q0", Q, ["June 1844"])], costs), costs


def decision_texts(llm: ScriptedLLM) -> list[str]:
    return [t for call in llm.calls for t in call.texts if "### Inference Tree" not in t]


def final_texts(llm: ScriptedLLM) -> list[str]:
    return [t for call in llm.calls for t in call.texts if "### Inference Tree" in t]

PREFIX = '{"type": "'
OPEN = re.escape(f"Query: {Q}\nOutput:") + f"(?:{re.escape(REFLECTION)})?" + re.escape(f"\nassistant: {PREFIX}") + "$"
FIRST = re.escape(f"Query: {Q}\nOutput:\nassistant: {PREFIX}") + "$"  # not a retry
BOXED_FINAL = (r"### Inference Tree[\s\S]*assistant: \\boxed\{$", "June 1844}", -0.1)


def make(rules, final=BOXED_FINAL, **knobs):
    llm = ScriptedLLM(rules=[final, *rules], default_reply="no idea")
    retriever = StubRetriever()
    return prunerag(llm, retriever, **knobs), llm, retriever


def test_a_decision_prefix_is_continued_and_reattached_and_only_answer_tokens_set_the_confidence():
    reply = 'answer", "answer": "June 1844"}'  # tokens: answer", "answer": "June 1844"}
    rule = (FIRST, reply, [-3.0, -3.0, -0.01, -0.03])
    method, llm, _ = make([rule], decision_prefix=PREFIX)
    (out,), _ = ask(method)
    tree = out.trace["tree"]
    assert tree["status"] == "answered" and tree["answer"] == "June 1844"
    assert tree["confidence"] == pytest.approx(math.exp(-0.02), abs=1e-4)  # "June 1844"} only
    assert tree["outputs"] == [PREFIX + reply]  # the whole reply, as the model's turn reads
    assert llm.calls[0].prompts[0][-1] == {"role": "assistant", "content": PREFIX}


def test_the_answer_span_is_given_in_the_continuations_coordinates():
    text = 'answer", "answer": "Rush"}'
    decision = parse_decision(text, prefix=PREFIX)
    assert decision.answer == "Rush" and text[slice(*decision.span)] == "Rush"
    start, end = parse_decision(PREFIX + text).span
    assert decision.span == (start - len(PREFIX), end - len(PREFIX))
    inside = parse_decision('"}', prefix='{"type": "answer", "answer": "Rush')  # the answer is all prefix
    assert inside.action == "answer" and inside.span is None


def test_free_text_fallback_reads_a_short_reply_as_an_answer_attempt_counted_apart():
    assert free_text_answer(' "Answer: June 1844."').answer == "June 1844"
    for text in ("", "{broken", "one\ntwo", " ".join(["word"] * 13)):
        assert free_text_answer(text).action is None
    confident = (FIRST.replace(re.escape(f"\nassistant: {PREFIX}"), ""), "June 1844", [-0.01, -0.01])
    method, _, _ = make([confident], free_text_fallback=True)
    (out,), _ = ask(method)
    assert out.trace["tree"]["status"] == "answered" and out.trace["tree"]["answer"] == "June 1844"
    assert out.stats["decision_fallbacks"] == 1 and out.stats["decision_parse_errors"] == 0
    assert format_tree(out.trace["tree"]).startswith("[Q1 answered, 1 free-text] ")
    strict, _, _ = make([confident])
    (out,), _ = ask(strict)
    assert out.trace["tree"]["status"] == "parse_error" and out.stats["decision_fallbacks"] == 0


def test_a_rejected_free_text_answer_is_retried_with_decomposition_or_entity_only():
    rules = [
        (re.escape(REFLECTION) + "$", json.dumps({"type": "decomposition", "subquery1": "Who founded it?"})),
        (re.escape(f"Query: {Q}\nOutput:") + "$", "June 1844", [-0.7, -0.7]),  # confidence 0.50 < 0.95
    ]
    method, llm, retriever = make(
        rules, free_text_fallback=True, min_children=1, retry_actions=["decomposition", "entity"]
    )
    (out,), _ = ask(method)
    tree = out.trace["tree"]
    assert tree["rejected"] == 1 and tree["status"] == "decomposed"
    assert [c["query"] for c in tree["children"]] == ["Who founded it?"]
    retry = decision_texts(llm)[1]
    assert '- "answer"' not in retry and '- "decomposition"' in retry and '- "entity"' in retry
    assert retriever.batches == [[Q], ["Who founded it?"]]
    assert out.stats["expanded"] == 1.0 and out.stats["tree_nodes"] == 2


def test_lenient_json_salvages_a_cut_off_decision_and_counts_it():
    cut = 'decomposition", "subquery1": "Who founded it?", "subquery2": "When?", "subquery3": "Who fou'
    assert parse_decision(cut, prefix=PREFIX).action is None
    repaired = parse_decision(cut, prefix=PREFIX, lenient=True)
    assert repaired.repaired and repaired.items == ("Who founded it?", "When?")
    method, _, retriever = make([(FIRST, cut)], decision_prefix=PREFIX, lenient_json=True, max_depth=2)
    (out,), _ = ask(method)
    assert out.stats["decision_repairs"] == 1 and out.stats["decision_parse_errors"] == 0
    assert retriever.batches[1] == ["Who founded it?", "When?"]


def test_min_children_accepts_a_one_item_split_which_the_paper_setting_refuses():
    one = json.dumps({"type": "entity", "entity1": "Arthur's Magazine"})
    assert parse_decision(one).error.startswith("entity needs non-empty entity1..entity2")
    assert parse_decision(one, min_items=1).items == ("Arthur's Magazine",)
    assert parse_decision(json.dumps({"type": "entity", "entity1": "A", "entity2": "A"}), min_items=1).items == ("A",)
    with pytest.raises(ValueError, match="min_children"):
        prunerag(ScriptedLLM(), StubRetriever(), min_children=3)


def test_retry_actions_stay_within_an_ablations_actions():
    method = prunerag(ScriptedLLM(), StubRetriever(), actions=["answer", "decomposition"],
                      retry_actions=["decomposition", "entity"])  # fmt: skip
    assert method.builder.retry_actions == ("decomposition",)


def test_an_answer_prefix_opens_the_box_and_the_prompt_drops_the_copied_example():
    method, llm, _ = make([], aggregator={"answer_prefix": "\\boxed{"})
    (out,), _ = ask(method)
    assert out.prediction == "June 1844" and not out.parse_failed
    assert out.trace["output"] == "\\boxed{June 1844}"
    assert "Paris" not in final_texts(llm)[0]
    assert "Paris" in final_prompt("{}", Q)[0]["content"]  # unchanged without a prefix
    unclosed, _, _ = make([], (r"### Inference Tree", "June 1844", -0.1), aggregator={"answer_prefix": "\\boxed{"})
    (out,), _ = ask(unclosed)
    assert out.parse_failed and out.prediction == "June 1844"  # no closed box: the extractor's reading


def test_decision_examples_inline_chat_or_none():
    inline = decision_prompt("ctx", "ROOT", Q, ["answer", "decomposition"])
    assert len(inline) == 1 and "Examples:" in inline[0]["content"]
    chat = decision_prompt("ctx", "ROOT", Q, ["answer", "decomposition"], prefix=PREFIX, examples="chat")
    assert [m["role"] for m in chat] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert json.loads(chat[1]["content"]) == EXAMPLES["answer"][-1]
    assert chat[0]["content"].startswith("You are building") and "Examples:" not in chat[0]["content"]
    assert chat[4]["content"].endswith(f"Query: {Q}\nOutput:") and chat[5]["content"] == PREFIX
    none = decision_prompt("ctx", "ROOT", Q, ["answer"], examples="none")
    assert len(none) == 1 and "Eiffel" not in none[0]["content"]
    with pytest.raises(ValueError, match="decision_examples"):
        prunerag(ScriptedLLM(), StubRetriever(), decision_examples="appendix")


def build(cfg) -> PruneRAG:
    return instantiate(cfg.method)(llm=ScriptedLLM(), retriever=Retriever([]))


def test_the_aids_are_on_with_the_small_model_overlay_and_off_in_the_faithful_and_paper_settings(compose_cfg):
    cfg = compose_cfg("eval", ["+method=prunerag", "llm=scripted", "aids=small_model"])
    assert apply_aids(cfg) == "small_model"  # conf/aids/small_model.yaml (the default with the bundled SmolLM2)
    method = build(cfg)
    b = method.builder
    assert (b.prefix, b.free_text_fallback, b.lenient, b.min_children) == (PREFIX, True, True, 1)
    assert b.retry_actions == b.actions and method.aggregator.prefix == "The answer is \\boxed{"
    for experiment in ("prunerag_faithful", "prunerag_paper"):
        cfg = compose_cfg("eval", [f"+experiment={experiment}"])
        b = build(cfg).builder if experiment == "prunerag_faithful" else None
        if b is not None:
            assert (b.prefix, b.free_text_fallback, b.lenient, b.min_children) == ("", False, False, None)
            assert b.retry_actions == b.actions
        m = cfg.method.builder
        assert m.decision_prefix is None and cfg.method.aggregator.answer_prefix is None and m.retry_actions is None
        assert not m.free_text_fallback and not m.lenient_json and m.min_children is None
