"""The rehearsal's stand-in servers (tests/standins): hoprag's OpenAI-compatible backend and its CRAG judge against
a local OpenAI-compatible server running the bundled SmolLM2, and hoprag's API client against the stand-in of
the official CRAG mock API."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from hoprag.evaluation.judges import LLMJudge
from hoprag.llm import HFLLM, LLMRequestError, OpenAICompatLLM
from hoprag.llm.openai_http import parse_response
from hoprag.llm.types import SamplingParams
from hoprag.metrics.crag import CORRECT, HALLUCINATION, crag_outcomes
from hoprag.paths import PROJECT_ROOT
from hoprag.sources.api import MockAPIClient, MockAPIError
from tests.standins.crag_api import ENDPOINTS, CragAPIStandIn
from tests.standins.openai_server import SMOLLM2, OpenAIStandIn, PrefixCache, ServedModel, served_models

KEY = "sk-standin"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
# a few-shot chat SmolLM2 answers greedily in the same `<think>…</think>answer` form
THINKING = [
    {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "<think>2 plus 2 is 4.</think>4"},
    {"role": "user", "content": "What is 3+3?"}, {"role": "assistant", "content": "<think>3 plus 3 is 6.</think>6"},
    {"role": "user", "content": "What is 5+5?"},
]  # fmt: skip


# -- the OpenAI-compatible server -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def standin():
    with OpenAIStandIn([ServedModel("gpt-4o-mini"), ServedModel("thinker", reasoning="reasoning_content")],
                       api_key=KEY) as server:  # fmt: skip
        yield server


@pytest.fixture(scope="module")
def local():
    """The same model in process: what the server must reproduce."""
    return HFLLM(SMOLLM2)


def client(server: OpenAIStandIn, model: str = "gpt-4o-mini", **kwargs) -> OpenAICompatLLM:
    return OpenAICompatLLM(model, base_url=server.url, api_key=KEY, max_retries=0, **kwargs)


def post(server: OpenAIStandIn, path: str, body: dict | None, key: str | None = KEY) -> tuple[int, dict]:
    """(status, JSON body) of a request to the server; GET without a body."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.real
def test_a_greedy_reply_is_the_models_own_with_log_probs_and_token_counts(standin, local):
    llm = client(standin)
    assert llm.capabilities | {"model": None} == {"logprobs": True, "logprob_fields": "logprobs", "n": True,
                                                  "prefill": True, "model": None, "probed": True}  # fmt: skip
    served = llm.generate([QUESTION], max_new_tokens=12)[0][0]
    here = local.generate([QUESTION], max_new_tokens=12)[0][0]
    assert served.text == here.text and "Paris" in served.text
    assert served.tokens == here.tokens and served.logprobs == pytest.approx(here.logprobs, abs=1e-4)
    assert (served.prompt_tokens, served.completion_tokens) == (here.prompt_tokens, here.completion_tokens)
    assert served.prompt_tokens == len(local.prompt_ids(QUESTION))


@pytest.mark.real
def test_n_seeded_samples_come_from_one_request_and_repeat_with_the_seed(standin):
    llm = client(standin)
    params = SamplingParams(max_new_tokens=4, temperature=1.0, n=3, seed=7)
    first, again = (llm.generate([QUESTION], params)[0] for _ in range(2))
    assert len(first) == 3 and [g.text for g in first] == [g.text for g in again]
    assert len({g.prompt_tokens for g in first}) == 1  # one request: its prompt charged once per sample set
    assert all(0 < g.completion_tokens <= 4 and g.logprobs for g in first)


@pytest.mark.real
def test_a_prompt_sharing_a_cached_prefix_prefills_the_rest_only_and_answers_as_in_process(standin, local):
    passages = " ".join(f"Passage {i}: Paris is the capital of France, on the Seine." for i in range(20))
    first, second = ([{"role": "system", "content": passages}, {"role": "user", "content": q}]
                     for q in ("What is the capital of France?", "Which river flows through Paris?"))  # fmt: skip
    llm, engine = client(standin), standin.engines["gpt-4o-mini"]
    llm.generate([first], max_new_tokens=8)
    ids = local.prompt_ids(second)
    shared, _ = engine.decoder.prefixes.longest(ids)
    assert len(ids) * 0.9 < shared < len(ids) - 5  # the passages and the chat's frame, not the question
    served = llm.generate([second], max_new_tokens=8)[0][0]
    here = local.generate([second], max_new_tokens=8)[0][0]
    assert served.text == here.text and served.logprobs == pytest.approx(here.logprobs, abs=1e-3)
    assert served.prompt_tokens == len(ids)  # a cached prefix is still the prompt's, as vLLM counts it


def test_the_prefix_cache_keeps_one_entry_per_prompt_family():
    cache = PrefixCache(2)
    value_prompt = [1, 2, 3, 4, 5, 6, 7, 8]
    cache.keep(value_prompt, ["value"])
    cache.keep([9, 9, 9, 9], ["thought"])
    assert cache.longest([1, 2, 3, 4, 5, 6, 0, 0]) == (6, ["value"])
    cache.keep([1, 2, 3, 4, 5, 6, 0, 0], ["next value"])  # the same family: it replaces the other
    assert [kv for _, kv in cache.entries] == [["next value"], ["thought"]]
    assert cache.longest([1, 2, 3, 4, 5, 6, 0, 0]) == (7, ["next value"])  # the last token is always prefilled
    cache.keep([5, 5], ["other"])
    assert [kv for _, kv in cache.entries] == [["other"], ["next value"]] and cache.longest([7, 7]) == (0, [])


@pytest.mark.real
def test_an_assistant_prefill_is_continued_not_repeated(standin, local):
    prefill = [*QUESTION, {"role": "assistant", "content": "The capital of France is"}]
    served = client(standin).generate([prefill], max_new_tokens=4)[0][0]
    assert served.text == local.generate([prefill], max_new_tokens=4)[0][0].text
    assert "Paris" in served.text and "capital" not in served.text
    status, body = post(standin, "/chat/completions", {"model": "gpt-4o-mini", "messages": prefill, "max_tokens": 1,
                                                      "continue_final_message": True, "add_generation_prompt": True})
    assert status == 400 and "Cannot set both" in body["error"]["message"]


@pytest.mark.real
def test_top_log_probs_and_the_completions_endpoint(standin):
    status, body = post(standin, "/chat/completions", {"model": "gpt-4o-mini", "messages": QUESTION, "temperature": 0,
                                                      "max_completion_tokens": 3, "logprobs": True, "top_logprobs": 2})
    entries = body["choices"][0]["logprobs"]["content"]
    assert status == 200 and body["usage"]["completion_tokens"] == len(entries) == 3
    assert body["choices"][0]["finish_reason"] == "length"
    for entry in entries:  # greedy: the chosen token is the most likely one
        assert [t["token"] for t in entry["top_logprobs"]][0] == entry["token"] and len(entry["top_logprobs"]) == 2
        assert entry["top_logprobs"][0]["logprob"] == pytest.approx(entry["logprob"], abs=1e-4)
    legacy = client(standin, chat=False).generate(["The capital of France is"], max_new_tokens=3)[0][0]
    assert legacy.text and legacy.logprobs and len(legacy.logprobs) == len(legacy.tokens)


@pytest.mark.real
def test_a_reasoning_block_is_returned_apart_and_read_by_hoprag(standin):
    status, answer = post(standin, "/chat/completions", {"model": "thinker", "messages": THINKING, "max_tokens": 24,
                                                        "temperature": 0, "logprobs": True})
    message = answer["choices"][0]["message"]
    assert status == 200 and message["reasoning_content"] == "5 plus 5 is 10." and message["content"] == "10"
    g = parse_response(answer, SamplingParams(max_new_tokens=24), "thinker")[0]
    assert (g.reasoning, g.text, "".join(g.tokens)) == ("5 plus 5 is 10.", "10", "10")
    assert 0 < g.reasoning_tokens < g.completion_tokens


@pytest.mark.real
def test_the_crag_judge_scores_an_answer_through_the_server_as_in_process(standin, local):
    item = ("what is the capital of france?", ["Paris"], "The capital is Lyon.")
    judge = LLMJudge(client(standin))
    reply = judge([item])[0]
    assert judge.name == "local-gpt-4o-mini"
    assert reply == LLMJudge(local)([item])[0]
    assert crag_outcomes([item], judge)[0][0] in (CORRECT, HALLUCINATION)


@pytest.mark.real
def test_models_are_listed_and_requests_need_the_key(standin):
    assert post(standin, "/models", None)[1]["data"][0]["id"] == "gpt-4o-mini"
    assert [m["id"] for m in post(standin, "/models", None)[1]["data"]] == ["gpt-4o-mini", "thinker"]
    status, body = post(standin, "/models", None, key=None)
    assert status == 401 and body["error"]["code"] == "invalid_api_key"
    wrong = OpenAICompatLLM("gpt-4o-mini", base_url=standin.url, api_key="wrong", max_retries=0, probe=False,
                            capabilities={"logprobs": True})  # a probe answered 401 would be cached as "no logprobs"
    with pytest.raises(LLMRequestError, match="401") as err:
        wrong.generate([QUESTION])
    assert err.value.status == 401


@pytest.mark.real
def test_what_the_stand_in_cannot_honour_is_refused(standin):
    ask = {"model": "gpt-4o-mini", "messages": QUESTION, "max_tokens": 1}
    assert post(standin, "/chat/completions", {**ask, "top_k": 5})[0] == 400
    assert post(standin, "/chat/completions", {**ask, "model": "gpt-5"})[0] == 404
    assert post(standin, "/chat/completions", {**ask, "max_tokens": 10**6})[0] == 400  # beyond the context


def test_served_models_read_from_the_command_line():
    assert served_models(["gpt-4o-mini", "qwen=Qwen/Qwen3-8B"], ["qwen"]) == [
        ServedModel("gpt-4o-mini"), ServedModel("qwen", "Qwen/Qwen3-8B", "reasoning_content")]
    with pytest.raises(ValueError, match="not served"):
        served_models(["a"], ["b=reasoning"])
    with pytest.raises(ValueError, match="reasoning must be"):
        ServedModel("a", reasoning="thoughts")


# -- the CRAG mock API --------------------------------------------------------------------------------------


@pytest.fixture
def crag():
    with CragAPIStandIn() as server:
        yield server


def test_a_known_request_gets_the_fixture_and_an_unknown_one_an_empty_result(crag):
    client = MockAPIClient(crag.url, retries=0)
    assert client.call("/finance/get_ticker_by_name", {"query": "Funko Inc. Class A Common Stock"}) == "FNKO"
    assert client.call("/movie/get_movie_info", {"query": "Inception"})[0]["title"] == "Inception"
    assert client.call("/finance/get_info", {"query": "ZZZZ"}) is None
    assert client.call("/finance/get_company_name", {"query": "Nowhere Corp"}) == []
    assert client.call("/music/get_lifespan", {"query": "Nobody"}) == [None, None]
    assert client.call("/music/grammy_get_award_count_by_artist", {"query": "Nobody"}) == 0
    assert client.call("/music/grammy_get_best_song_by_year", {"query": "2001"}) == []
    assert client.call("/sports/nba/get_games_on_date", {"date": "2024-03-04", "team_name": None}) is None


def test_every_official_endpoint_answers_a_well_formed_body(crag):
    client = MockAPIClient(crag.url, retries=0, cache_size=0)
    bodies = {"/music/get_billboard_rank_date": {"rank": 1, "date": "2024-02-28"},
              "/music/get_billboard_attributes": {"date": "2024-02-28", "attribute": "rank", "song_name": "x"},
              "/sports/nba/get_play_by_play_data_by_game_ids": {"game_ids": ["1"]},
              "/music/grammy_get_all_awarded_artists": {}}  # fmt: skip
    for endpoint, spec in ENDPOINTS.items():
        body = bodies.get(endpoint) or {f: ("2000" if f == "query" else "2024-03-04") for f in spec.required}
        client.call(endpoint, body)  # answers 200 with a `result`, or raises
    assert len(crag.log) == len(ENDPOINTS) == 38


def test_invalid_requests_are_refused_as_the_official_server_refuses_them(crag):
    client = MockAPIClient(crag.url, retries=0, backoff=0)
    with pytest.raises(MockAPIError, match="HTTP 422"):
        client.call("/sports/nba/get_games_on_date", {"team_name": "Los Angeles Lakers"})
    with pytest.raises(MockAPIError, match="HTTP 422"):
        client.call("/movie/get_movie_info_by_id", {"query": "Inception"})
    with pytest.raises(MockAPIError, match="HTTP 500"):
        client.call("/movie/get_year_info", {"query": "1950"})
    with pytest.raises(MockAPIError, match="HTTP 404"):
        client.call("/finance/get_everything", {"query": "FNKO"})


def test_the_crag_command_line_prints_its_url_and_serves():
    process = subprocess.Popen([sys.executable, "-m", "tests.standins.crag_api"], cwd=PROJECT_ROOT,
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        url = process.stdout.readline().strip()
        MockAPIClient(url, retries=0).ping()
        assert MockAPIClient(url).call("/finance/get_ticker_by_name", {"query": "Nobody"}) is None
    finally:
        process.terminate()
        process.wait(timeout=30)
