"""The shortcut probe (issue 46 item 3) on a scripted LLM: a question is a shortcut when its closed-book answer or
any single-gold-paragraph answer is correct by the rule (EM = 1 by default, a score threshold otherwise); its
record holds every answer and the flags, its cost every call, and its prompts are the baselines'."""

from __future__ import annotations

import json

import pytest
from hydra.utils import instantiate

from hoprag.config import ConfigError
from hoprag.cost import Cost
from hoprag.data.types import Passage, QAExample
from hoprag.evaluation.runner import run
from hoprag.llm import ScriptedLLM
from hoprag.methods import ChatPrompt, ShortcutProbe
from hoprag.methods.shortcut_probe import gold_paragraphs, shortcut_rule

CLOSED = ChatPrompt("Closed book.", "Question: {question}\nAnswer:")
SINGLE = ChatPrompt("From the passages.", "{passages}\n\nQuestion: {question}\nAnswer:")


def context(*titles: str) -> list[Passage]:
    return [Passage(f"p-{t}", t, f"{t} is a place.") for t in titles]


# q1: known closed-book; q2: answered from its paragraph "Bridge" alone; q3: from neither (multi-hop);
# q4: partly right from the paragraph "Half" (F1 0.8, EM 0)
EXAMPLES = [
    QAExample("q1", "Where is Paris?", ["France"], supporting_titles=["Paris", "Seine"],
              context=context("Paris", "Distractor", "Seine")),
    QAExample("q2", "Which bridge links A and B?", ["Golden Gate"], supporting_titles=["Anchor", "Bridge"],
              context=context("Anchor", "Bridge", "Other")),
    QAExample("q3", "Who married the author?", ["Ann Lee"], supporting_titles=["Author", "Spouse"],
              context=context("Author", "Spouse")),
    QAExample("q4", "Which river crosses the half?", ["Big River Delta"], supporting_titles=["Half", "Whole"],
              context=context("Half", "Whole")),
]  # fmt: skip


def probe_llm() -> ScriptedLLM:
    def reply(prompt: str) -> str:
        closed = prompt.startswith("system: Closed book.")
        if closed:
            return "Answer: France" if "Paris" in prompt else "Answer: no idea"
        if "[1] Bridge\n" in prompt:
            return "Answer: the Golden Gate."
        if "[1] Half\n" in prompt:
            return "Answer: Big River"
        return "Answer: Seine" if "[1] Seine\n" in prompt else "Answer: unknown"

    return ScriptedLLM(rules=[(lambda p: True, reply, -0.5)])


def test_a_question_is_a_shortcut_when_the_closed_book_or_a_single_gold_paragraph_answer_is_right():
    probe = ShortcutProbe(probe_llm(), CLOSED, SINGLE)
    costs = [Cost() for _ in EXAMPLES]
    outputs = probe.answer(EXAMPLES, costs)

    assert [o.trace["shortcut"] for o in outputs] == [True, True, False, False]
    assert [o.stats for o in outputs] == [
        {"shortcut": 1.0, "closed_book_correct": 1.0, "single_paragraph_correct": 0.0, "gold_paragraphs": 2.0},
        {"shortcut": 1.0, "closed_book_correct": 0.0, "single_paragraph_correct": 1.0, "gold_paragraphs": 2.0},
        {"shortcut": 0.0, "closed_book_correct": 0.0, "single_paragraph_correct": 0.0, "gold_paragraphs": 2.0},
        {"shortcut": 0.0, "closed_book_correct": 0.0, "single_paragraph_correct": 0.0, "gold_paragraphs": 2.0},
    ]
    # the prediction is the closed-book answer; the record holds every answer, the gold paragraphs' titles in
    # context order (the distractors never asked), and each answer's verdict
    assert [o.prediction for o in outputs] == ["France", "no idea", "no idea", "no idea"]
    q2 = outputs[1].trace
    assert q2["closed_book"] == {"answer": "no idea", "output": "Answer: no idea", "parse_failed": False,
                                 "correct": False}  # fmt: skip
    assert [(s["title"], s["answer"], s["correct"]) for s in q2["single_paragraph"]] == [
        ("Anchor", "unknown", False), ("Bridge", "the Golden Gate.", True)]  # fmt: skip
    assert all(o.retrieved == [] for o in outputs)  # nothing retrieved: the probe's run reports no recall

    # two batched calls: every closed-book prompt, then every gold paragraph alone, each charged to its question
    llm = probe.llm
    assert [len(c.prompts) for c in llm.calls] == [4, 8]
    assert llm.calls[1].texts[2] == (
        "system: From the passages.\nuser: [1] Anchor\nAnchor is a place.\n\n"
        "Question: Which bridge links A and B?\nAnswer:"
    )
    assert [c.llm_calls for c in costs] == [3, 3, 3, 3]
    assert all(set(c.seconds) == {"closed_book", "single_paragraph"} for c in costs)
    assert probe.run_info()["shortcut_rule"] == "closed-book answer or any single-gold-paragraph answer with EM = 1"


def test_a_threshold_on_another_answer_score_is_the_looser_rule():
    """F1 ≥ 0.6 counts q4's paragraph answer "Big River" (F1 0.8 against "Big River Delta"); F1 ≥ 0.9 does not."""
    loose = ShortcutProbe(probe_llm(), CLOSED, SINGLE, metric="f1", threshold=0.6).answer(EXAMPLES, [Cost()] * 4)
    strict = ShortcutProbe(probe_llm(), CLOSED, SINGLE, metric="f1", threshold=0.9).answer(EXAMPLES, [Cost()] * 4)
    assert [o.trace["shortcut"] for o in loose] == [True, True, False, True]
    assert [o.trace["shortcut"] for o in strict] == [True, True, False, False]
    assert shortcut_rule("f1", 0.6) == "closed-book answer or any single-gold-paragraph answer with F1 ≥ 0.6"


@pytest.mark.parametrize(("settings", "message"), [
    ({"metric": "bleu"}, r"method.metric must be one of \['em', 'f1'"),
    ({"threshold": 0}, r"method.threshold must be a number in \(0, 1\], not 0"),
    ({"threshold": 1.5}, r"not 1.5"),
])  # fmt: skip
def test_a_rule_no_answer_score_can_meet_is_refused_from_the_settings_alone(settings, message):
    with pytest.raises(ConfigError, match=message):
        ShortcutProbe.check_settings(settings)
    with pytest.raises(ConfigError, match=message):
        ShortcutProbe(ScriptedLLM(), CLOSED, SINGLE, **settings)


def test_a_question_without_a_gold_paragraph_is_flagged_by_its_closed_book_answer_alone_and_said_so(tmp_path, caplog):
    open_domain = [*EXAMPLES[:2], QAExample("open", "Who?", ["x"], supporting_titles=["Gone"], context=context("A"))]
    assert gold_paragraphs(open_domain[2]) == []
    run(ShortcutProbe(probe_llm(), CLOSED, SINGLE), open_domain, tmp_path)
    assert "1 of 3 questions (e.g. 'open') have no gold paragraph in their context: their shortcut flag rests on " \
           "the closed-book answer alone" in caplog.text  # fmt: skip
    last = json.loads((tmp_path / "predictions.jsonl").read_text().splitlines()[-1])
    assert (last["stats"]["gold_paragraphs"], last["trace"]["single_paragraph"]) == (0, [])
    assert last["cost"]["llm_calls"] == 1  # the closed-book call alone


def test_the_probes_run_directory_holds_every_answer_the_flags_and_the_share_of_shortcuts(tmp_path):
    metrics = run(ShortcutProbe(probe_llm(), CLOSED, SINGLE), EXAMPLES, tmp_path)
    records = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert [(r["method"], r["stats"]["shortcut"]) for r in records] == [
        ("shortcut_probe", 1.0), ("shortcut_probe", 1.0), ("shortcut_probe", 0.0), ("shortcut_probe", 0.0)]  # fmt: skip
    assert records[1]["trace"]["single_paragraph"][1]["answer"] == "the Golden Gate."
    assert metrics["method/shortcut"] == 0.5 and metrics["em"] == 25.0  # EM: the closed-book answers'
    assert metrics["cost/mean/llm_calls"] == 3
    info = json.loads((tmp_path / "metrics.json").read_text())["run"]
    assert (info["method"], info["shortcut_metric"], info["shortcut_threshold"]) == ("shortcut_probe", "em", 1.0)


def test_the_config_asks_the_baselines_prompts_and_builds_the_probe(compose_cfg):
    baseline = {name: compose_cfg("eval", [f"+method={name}", "aids=none"]).method
                for name in ("no_retrieval", "standard_rag")}  # fmt: skip
    cfg = compose_cfg("eval", ["+method=shortcut_probe", "llm=scripted", "aids=none"])
    assert cfg.method.closed_book == baseline["no_retrieval"].prompt
    assert cfg.method.single_paragraph == baseline["standard_rag"].prompt
    assert cfg.method.passage_template == baseline["standard_rag"].passage_template
    assert cfg.method.generation == baseline["standard_rag"].generation == baseline["no_retrieval"].generation
    probe = instantiate(cfg.method)(llm=instantiate(cfg.llm))
    assert isinstance(probe, ShortcutProbe) and (probe.metric, probe.threshold) == ("em", 1.0)
