"""Router labels from judged outcomes (spec/pruningrag.md §5.3, P2): one answer per source configuration,
CRAG-judged, labelled with priority and the similar-question back-off; a cache that asks nothing twice,
resumes a crashed run, never mixes settings and names the line it cannot read."""

from __future__ import annotations

import json

import pytest

from hoprag.data.records import DataFormatError
from hoprag.data.types import QAExample
from hoprag.methods.base import MethodOutput
from hoprag.routers.outcomes import CACHE_FILE, OutcomeCache, OutcomeLabeller, label_by_outcomes

CONFIGS = [("web",), ("api",), ("llm",)]


def crag(qid: str, golds: list[str], domain: str = "movie", dynamism: str = "static", kind: str = "simple"):
    return QAExample(qid, f"Question {qid}?", golds, type=kind,
                     metadata={"domain": domain, "static_or_dynamic": dynamism, "split": 1})  # fmt: skip


class FakeMethod:
    """Answers from `replies[(question id, configuration)]` ("i don't know" otherwise), one LLM call charged
    per question; logs what it was asked; raises once `log` holds `fail_after` answers (a crash)."""

    def __init__(self, configuration, replies, log, fail_after=None) -> None:
        self.configuration, self.replies, self.log, self.fail_after = configuration, replies, log, fail_after

    def answer(self, examples, costs):
        for ex, cost in zip(examples, costs):
            if self.fail_after is not None and len(self.log) >= self.fail_after:
                raise RuntimeError("the answerer crashed")
            self.log.append((self.configuration, ex.id))
            cost.add_llm(10, 2, 0.0, stage="answer")
        return [MethodOutput(self.replies.get((ex.id, self.configuration), "i don't know")) for ex in examples]


def factory(replies, log, unavailable=(), fail_after=None):
    return lambda c: None if set(c) & set(unavailable) else FakeMethod(c, replies, log, fail_after)


def run(examples, cache, replies, log, settings="s1", unavailable=(), judge=None, **kwargs):
    return label_by_outcomes(examples, CONFIGS, factory(replies, log, unavailable, kwargs.pop("fail_after", None)),
                             {c: settings for c in CONFIGS}, cache, judge=judge, **kwargs)  # fmt: skip


def test_outcomes_are_judged_then_labelled_by_priority_and_the_similar_question_backoff(tmp_path):
    examples = [
        crag("q1", ["paris"]),                                   # web and api right: api first
        crag("q2", ["london"], domain="music"),                  # only the LLM right, via the judge
        crag("q3", ["rome"], domain="music"),                    # none right: q2's bucket → llm
        crag("q4", ["oslo"], dynamism="real-time"),              # none right, a bucket of its own: its domain → api
        crag("q5", ["bern"], domain="sports"),                   # none right, nothing in its domain: everyone → api
    ]  # fmt: skip
    replies = {("q1", ("web",)): "Paris", ("q1", ("api",)): "paris", ("q2", ("llm",)): "London, England",
               ("q3", ("web",)): "Madrid", ("q4", ("llm",)): "i don't know, maybe oslo"}  # fmt: skip
    judged = []

    def judge(items):
        judged.extend(items)
        return ['{"Accuracy": "True"}' if p.startswith("London") else '{"Accuracy": "False"}' for _, _, p in items]

    result = run(examples, OutcomeCache(tmp_path / CACHE_FILE), replies, [], judge=judge, batch_size=2)
    assert [set(c) for c in result.correct] == [{"web", "api"}, {"llm"}, set(), set(), set()]
    assert result.labels == [("api",), ("llm",), ("llm",), ("api",), ("api",)]
    # exact matches and "i don't know" (a substring: missing) never reach the judge, the rest in their own case
    assert sorted(p for _, _, p in judged) == ["London, England", "Madrid"]
    summary = result.summary
    assert summary["questions"] == 5 and summary["backoff"] == 3 and summary["unavailable"] == []
    assert summary["correct"] == {"api": 1, "web": 1, "llm": 1} and summary["answer_llm_calls"] == 15
    assert summary["answered"] == {"web": 5, "api": 5, "llm": 5} and summary["labels"] == {"api": 3, "llm": 2}
    assert summary["outcomes"]["llm"] == {"correct": 1, "missing": 4}
    assert run(examples, OutcomeCache(None), replies, [], mode="subset").labels[0] == ("api", "web")


def test_a_second_run_asks_nothing_and_reads_every_outcome_from_the_cache(tmp_path):
    examples = [crag(f"q{i}", ["paris"]) for i in range(4)]
    replies = {(f"q{i}", ("web",)): "paris" for i in range(4)}
    first_log, second_log = [], []
    first = run(examples, OutcomeCache(tmp_path / CACHE_FILE), replies, first_log)
    second = run(examples, OutcomeCache(tmp_path / CACHE_FILE), replies, second_log)
    assert len(first_log) == 12 and second_log == []
    assert second.labels == first.labels == [("web",)] * 4
    assert second.summary["answered"] == {"web": 0, "api": 0, "llm": 0} and second.summary["answer_llm_calls"] == 0
    assert second.summary["cached"] == {"web": 4, "api": 4, "llm": 4}
    assert len((tmp_path / CACHE_FILE).read_text().splitlines()) == 12


def test_other_settings_never_reuse_cached_answers_and_a_new_judge_only_rejudges(tmp_path):
    examples = [crag("q1", ["paris"]), crag("q2", ["london"])]
    replies = {("q1", ("web",)): "Paris, France", ("q2", ("llm",)): "london"}
    path = tmp_path / CACHE_FILE
    run(examples, OutcomeCache(path), replies, [], settings="s1")
    log = []
    other = run(examples, OutcomeCache(path), {}, log, settings="s2")  # e.g. another answering LLM
    assert len(log) == 6 and other.summary["cached"] == {"web": 0, "api": 0, "llm": 0}
    assert all(set(c) == set() for c in other.correct)  # its own answers, not s1's
    log = []

    def accept(items):
        return ['{"accuracy": true}'] * len(items)

    rejudged = run(examples, OutcomeCache(path), replies, log, settings="s1", judge=accept, judge_settings="gpt")
    assert log == [] and rejudged.summary["rejudged"] == {"web": 2, "api": 2, "llm": 2}
    assert rejudged.correct == [{"web"}, {"llm"}]  # "Paris, France" now judged right; "i don't know" stays missing
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert {line["settings"] for line in lines} == {"s1", "s2"} and {line["judge"] for line in lines} == {"", "gpt"}


def test_a_crashed_run_resumes_with_only_the_rest_answered(tmp_path):
    examples = [crag(f"q{i}", ["paris"]) for i in range(5)]
    path, log = tmp_path / CACHE_FILE, []
    with pytest.raises(RuntimeError, match="crashed"):
        run(examples, OutcomeCache(path), {}, log, batch_size=2, fail_after=3)  # batch 2 dies mid-way
    assert len(path.read_text().splitlines()) == 2  # the first batch was judged and written
    resumed = []
    result = run(examples, OutcomeCache(path), {}, resumed, batch_size=2)
    assert [qid for c, qid in resumed if c == ("web",)] == ["q2", "q3", "q4"]
    assert result.summary["cached"]["web"] == 2 and result.summary["answered"] == {"web": 3, "api": 5, "llm": 5}
    ids = [(line["id"], tuple(line["sources"])) for line in map(json.loads, path.read_text().splitlines())]
    assert len(ids) == len(set(ids)) == 15


def test_an_unavailable_configuration_is_skipped_counted_and_never_a_label():
    examples = [crag("q1", ["paris"]), crag("q2", ["rome"], domain="music")]
    log = []
    result = run(examples, OutcomeCache(None), {("q1", ("llm",)): "paris"}, log, unavailable={"api"})
    assert result.summary["unavailable"] == ["api"] and "api" not in result.summary["answered"]
    assert {c for c, _ in log} == {("web",), ("llm",)}
    # q2: nothing right in its bucket or domain; over all questions llm did best
    assert result.labels == [("llm",), ("llm",)]
    nothing = run(examples, OutcomeCache(None), {}, [], unavailable={"api"})
    assert nothing.labels == [("web",), ("web",)]  # the first *available* source of the priority, not api
    with pytest.raises(ValueError, match="nothing to label"):
        run(examples, OutcomeCache(None), {}, [], unavailable={"api", "web", "llm"})


def test_a_malformed_cache_line_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / CACHE_FILE
    good = {"id": "q1", "sources": ["web"], "settings": "s", "judge": "", "prediction": "x", "outcome": "correct"}
    path.write_text(json.dumps(good) + "\n{not json\n" + json.dumps(good) + "\n")
    with pytest.raises(DataFormatError, match=rf"{path}, line 2: not JSON"):
        OutcomeCache(path)
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "outcome": "great"}) + "\n")
    with pytest.raises(DataFormatError, match=rf"{path}, line 2: outcome 'great'"):
        OutcomeCache(path)
    path.write_text("\n" + json.dumps({k: v for k, v in good.items() if k != "prediction"}) + "\n")
    with pytest.raises(DataFormatError, match=rf"{path}, line 2: `prediction` missing"):
        OutcomeCache(path)


def test_a_line_cut_short_by_a_kill_is_dropped_and_cut_off_before_the_next_append(tmp_path):
    path = tmp_path / CACHE_FILE
    good = {"id": "q1", "sources": ["web"], "settings": "s", "judge": "", "prediction": "x", "outcome": "correct"}
    path.write_text(json.dumps(good) + '\n{"id": "q2", "sour')
    cache = OutcomeCache(path)
    assert cache.judged("q1", ("web",), "s", "") == good and cache.answer("q2", ("web",), "s") is None
    cache.append([{**good, "id": "q2"}])
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["q1", "q2"]


# -- the labeller built from configs ------------------------------------------------------------------------

ROUTER = {"_target_": "hoprag.routers.router.LLMRouter", "_partial_": True, "options": "crag_single"}
METHOD = {
    "_target_": "hoprag.methods.PruningRAG", "_partial_": True, "_convert_": "all", "strategy": "routed",
    "fixed": ["web"], "router": ROUTER, "generation": {"max_new_tokens": 16},
    "sources": {"web": {"_target_": "hoprag.sources.ContextSource", "origin": "web"}, "api": None,
                "llm": {"_target_": "hoprag.sources.ParametricSource"}},
}  # fmt: skip
# the web prompt has a references section, the LLM-only prompt has none
LLM = {"_target_": "hoprag.llm.ScriptedLLM", "_convert_": "all", "rules": [["### References", "paris"]],
       "default_reply": "london", "delay": 0.0}  # fmt: skip
QUESTIONS = [crag("q1", ["paris"]), crag("q2", ["london"]), crag("q3", ["rome"])]


def labeller(tmp_path, method=METHOD, llm=LLM, **kwargs) -> OutcomeLabeller:
    return OutcomeLabeller(method, llm, configurations=CONFIGS, cache_dir=str(tmp_path), **kwargs)


def test_the_labellers_judge_fingerprint_follows_the_judge_and_its_prompt(tmp_path, monkeypatch):
    rule = {"_target_": "hoprag.evaluation.judges.NormalizedMatchJudge"}
    judge = {"_target_": "hoprag.evaluation.judges.LLMJudge", "llm": {"_target_": "hoprag.llm.ScriptedLLM"}}
    first = labeller(tmp_path, judge=judge).judge_settings()
    assert labeller(tmp_path, judge=judge).judge_settings() == first
    assert len({first, labeller(tmp_path, judge=rule).judge_settings(), labeller(tmp_path).judge_settings()}) == 3
    monkeypatch.setattr("hoprag.evaluation.judges.LLMJudge.prompt_id", "another-prompt")
    assert labeller(tmp_path, judge=judge).judge_settings() != first  # a new judge prompt re-judges cached answers


def test_the_labeller_answers_with_pruningrag_per_source_and_a_rerun_builds_no_model(tmp_path):
    first = labeller(tmp_path)
    result = first(QUESTIONS)
    assert result.labels == [("web",), ("llm",), ("web",)]  # q3: web and llm tie on all questions → web first
    assert result.summary["unavailable"] == ["api"] and result.summary["answer_llm_calls"] == 6
    assert len(first.llm.calls) == 2  # one batched answer call per available source
    again = labeller(tmp_path)
    assert again(QUESTIONS).labels == result.labels and again.llm is None  # nothing left to ask: no LLM built


def test_the_labellers_fingerprint_follows_the_answering_settings_only(tmp_path):
    labeller(tmp_path)(QUESTIONS)
    faster = labeller(tmp_path, llm={**LLM, "delay": 0.001})  # run control: the same answers
    assert faster(QUESTIONS).summary["answered"] == {"web": 0, "llm": 0}
    longer = labeller(tmp_path, method={**METHOD, "generation": {"max_new_tokens": 32}})
    assert longer(QUESTIONS).summary["answered"] == {"web": 3, "llm": 3}
    with_api = {**METHOD, "sources": {**METHOD["sources"], "api": {"_target_": "hoprag.sources.ContextSource",
                                                                   "origin": "api"}}}  # fmt: skip
    summary = labeller(tmp_path, method=with_api)(QUESTIONS).summary  # a new source leaves the others' answers valid
    assert summary["answered"] == {"web": 0, "api": 3, "llm": 0} and summary["unavailable"] == []
    judge = {"_target_": "hoprag.evaluation.judges.LLMJudge",
             "llm": {"_target_": "hoprag.llm.ScriptedLLM", "default_reply": '{"Accuracy": "True"}'}}  # fmt: skip
    judged = labeller(tmp_path, judge=judge)(QUESTIONS)
    assert judged.summary["answered"] == {"web": 0, "llm": 0} and judged.summary["rejudged"] == {"web": 3, "llm": 3}
    assert judged.correct[2] == {"web", "llm"}  # the scripted judge accepts every non-exact answer
