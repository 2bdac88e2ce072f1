"""PruningRAG's mock-API source (spec/pruningrag.md §6.2, behaviours 13–15) against a stand-in of the official
CRAG mock API (tests/standins/crag_api.py): a stdlib HTTP server on 127.0.0.1, started by the test, answering
the official endpoint names with fixture JSON shaped like the official server's
(tests/fixtures/crag_api/responses.json)."""

from __future__ import annotations

import re
import socket
from datetime import date
from pathlib import Path

import pytest

from hoprag.cost import Cost
from hoprag.data import QADataset
from hoprag.data.crag import parse_crag
from hoprag.data.types import QAExample
from hoprag.llm.scripted import ScriptedLLM
from hoprag.paths import data_root
from hoprag.sources.api import APISource, MockAPIClient, MockAPIError
from hoprag.sources.api.domain import DomainGuess
from hoprag.sources.api.matching import CompanyTable, Match, Matcher, team_of
from hoprag.sources.api.ner import CATEGORIES, extract_entities, ner_messages, parse_entities
from hoprag.sources.api.render import frame_rows, render
from hoprag.sources.api.rules import select
from hoprag.sources.api.source import STATS
from hoprag.sources.api.timeparse import Period, parse_query_time, resolve_periods
from tests.standins.crag_api import CragAPIStandIn

FIXTURES = Path(__file__).parents[1] / "fixtures" / "crag_api"
COMPANIES = FIXTURES / "company_name.dict"
QUERY_TIME = "03/05/2024, 23:18:31 PT"  # a Tuesday
TODAY = date(2024, 3, 5)
FUNKO = "How much did Funko open at today?"


@pytest.fixture
def server():
    """The stand-in of the official server (tests/standins/crag_api.py), answering from the fixture."""
    with CragAPIStandIn() as srv:
        yield srv


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def question(query: str, domain: str, qid: str = "q1", query_time: str = QUERY_TIME):
    """A question as the CRAG loader gives it (domain and query_time in its metadata)."""
    return parse_crag({"interaction_id": qid, "query": query, "answer": "x", "query_time": query_time,
                       "domain": domain, "question_type": "simple", "static_or_dynamic": "static",
                       "search_results": []})  # fmt: skip


def api_source(server, replies: dict[str, str], **kwargs) -> APISource:
    """An APISource whose NER model answers `replies[word]` for the questions containing the word."""
    rules = [(f"### Question\n[^\n]*{re.escape(word)}", reply) for word, reply in replies.items()]
    llm = ScriptedLLM(rules=rules, default_reply="None (company)")
    kwargs.setdefault("company_names", COMPANIES)
    return APISource(llm, base_url=server.url, retries=0, timeout=5.0, **kwargs)


# -- behaviour 13: the NER parser -------------------------------------------------------------------


def test_ner_parser_reads_entity_category_lines_and_drops_none():
    result = parse_entities("Apple (company)\nAAPL (symbol)\nNone (company)", "finance")
    assert result.entities == {"company": ["Apple"], "symbol": ["AAPL"]}
    assert result.parsed


def test_ner_parser_ignores_unknown_categories_and_tolerates_list_markup():
    reply = "1. Tim Cook (person)\n- Apple (company).\n* `Apple` (company)\nAAPL (Symbol)\nsome chatter"
    assert parse_entities(reply, "finance").entities == {"company": ["Apple"], "symbol": ["AAPL"]}
    assert parse_entities("Lakers (nba team)\nLeBron James (NBA player)", "sports").entities == {
        "nba team": ["Lakers"], "nba player": ["LeBron James"]}


def test_a_reply_without_entity_lines_is_a_parse_failure_but_none_is_not():
    assert not parse_entities("I think the question is about Funko.", "finance").parsed
    assert not parse_entities("", "finance").parsed
    none = parse_entities("None (company)", "finance")
    assert none.parsed and none.entities == {}


def test_the_ner_prompt_lists_the_categories_of_the_question_domain():
    for domain, categories in CATEGORIES.items():
        user = ner_messages("a question", domain)[1]["content"]
        assert f"category is one of: {', '.join(categories)}." in user
        assert user.endswith("### Question\na question\nEntities:\n")
    with pytest.raises(ValueError, match="unknown CRAG domain"):
        ner_messages("a question", "weather")


def test_ner_is_one_batched_greedy_generation_charged_to_each_question():
    llm = ScriptedLLM(rules=[("Funko", "Funko (company)"), ("Adele", "Adele (person)")])
    costs = [Cost(), Cost()]
    results = extract_entities(llm, [FUNKO, "When was Adele born?"], ["finance", "music"], costs)
    assert [r.entities for r in results] == [{"company": ["Funko"]}, {"person": ["Adele"]}]
    assert len(llm.calls) == 1 and len(llm.calls[0].prompts) == 2 and llm.calls[0].params.greedy
    assert [c.llm_calls for c in costs] == [1, 1] and set(costs[0].seconds) == {"api_ner"}


# -- behaviour 14: entity matching and time parsing ---------------------------------------------------


def test_the_company_table_reads_the_official_csv_and_maps_names_to_tickers():
    table = CompanyTable.load(COMPANIES)
    assert table.lookup("apple") == "AAPL"
    assert table.lookup("Apple Inc. Common Stock") == "AAPL"  # the full table name
    assert table.lookup("Funko") == "FNKO" and table.lookup("Coca-Cola") == "KO" and table.lookup("Coca Cola") == "KO"
    assert table.lookup("aapl") == "AAPL"  # a ticker read as a name
    assert table.lookup("Dow") == "DOW"  # the table's trailing space is not part of the ticker
    # a shared short name means the shares, not the warrants, notes or preferred series
    assert table.lookup("Armada Acquisition Corp. I") == "AACI"
    assert table.lookup("Abacus Life") == "ABL" and table.lookup("AT&T") == "T"
    assert table.lookup("Nintendo") is None
    assert table.name_of("FNKO") == "Funko Inc. Class A Common Stock"


def test_fuzzy_matching_catches_typos_but_not_other_companies():
    table = CompanyTable.load(COMPANIES)
    assert table.lookup("Amercan Airlines") is None
    assert table.fuzzy("Amercan Airlines", 0.85) == "AAL"
    assert table.fuzzy("Nintendo", 0.85) is None


def test_the_header_of_the_company_table_is_checked(tmp_path):
    bad = tmp_path / "names.csv"
    bad.write_text("name,ticker\nApple,AAPL\n", encoding="utf-8")
    with pytest.raises(ValueError, match="company_name.dict"):
        CompanyTable.load(bad)


def test_apple_maps_to_aapl_in_the_real_company_table():
    path = data_root() / "crag" / "company_name.dict"
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    table = CompanyTable.load(path)
    assert table.lookup("apple") == "AAPL"
    assert table.lookup("Funko") == "FNKO" and table.lookup("american airlines") == "AAL"
    assert table.lookup("amazon") == "AMZN"  # "Amazon.com Inc." read with its punctuation as spaces


def test_teams_are_validated_against_the_kg_team_names():
    assert team_of("Lakers") == ("nba team", "Los Angeles Lakers")
    assert team_of("Manchester United", "soccer team") == ("soccer team", "Manchester Utd")
    assert team_of("Wolves", "soccer team") == ("soccer team", "Wolves")
    assert team_of("Wolves", "nba team") == ("nba team", "Minnesota Timberwolves")
    assert team_of("atletico madrid", "soccer team") == ("soccer team", "Atlético Madrid")
    assert team_of("Springfield Isotopes") is None
    matches = Matcher(lambda *a: pytest.fail("no call")).match(
        "sports", {"nba team": ["Lakers", "Springfield Isotopes"], "nba player": ["LeBron James"]})
    assert [(m.kind, m.key) for m in matches] == [("nba team", "Los Angeles Lakers"), ("nba player", "LeBron James")]


def test_yesterday_and_last_year_resolve_against_the_query_time():
    assert resolve_periods("What did it close at yesterday?", "03/05/2024, 23:18:31 PT") == [
        Period(date(2024, 3, 4), date(2024, 3, 4), "yesterday")]
    (last_year,) = resolve_periods("total dividends last year", QUERY_TIME)
    assert (last_year.start, last_year.end) == (date(2023, 1, 1), date(2023, 12, 31))


@pytest.mark.parametrize("text, start, end", [
    ("How much did Funko open at today?", "2024-03-05", "2024-03-05"),
    ("the day before yesterday", "2024-03-03", "2024-03-03"),
    ("3 days ago", "2024-03-02", "2024-03-02"),
    ("average close last week", "2024-02-26", "2024-03-03"),  # the calendar week before, Monday to Sunday
    ("so far this week", "2024-03-04", "2024-03-05"),
    ("the past 5 days", "2024-03-01", "2024-03-05"),
    ("last month", "2024-02-01", "2024-02-29"),
    ("this year", "2024-01-01", "2024-03-05"),
    ("in january", "2024-01-01", "2024-01-31"),
    ("in december", "2023-12-01", "2023-12-31"),  # the latest December not after the query
    ("march 2023", "2023-03-01", "2023-03-31"),
    ("on feb 28, 2024", "2024-02-28", "2024-02-28"),
    ("on 5 march", "2024-03-05", "2024-03-05"),
    ("2024-02-29", "2024-02-29", "2024-02-29"),
    ("02/01/2023", "2023-02-01", "2023-02-01"),
    ("last friday", "2024-03-01", "2024-03-01"),
    ("who won the title in 2022?", "2022-01-01", "2022-12-31"),
])
def test_time_expressions(text, start, end):
    (period,) = resolve_periods(text, QUERY_TIME)
    assert (period.start.isoformat(), period.end.isoformat()) == (start, end)


def test_may_is_a_month_only_after_a_preposition_and_a_dated_year_is_not_a_second_period():
    assert [p.label for p in resolve_periods("may I ask what happened in may?", QUERY_TIME)] == ["in may"]
    assert resolve_periods("What is the weather like?", QUERY_TIME) == []


def test_query_time_is_crag_format():
    assert parse_query_time("03/05/2024, 23:18:31 PT").date() == TODAY
    with pytest.raises(ValueError, match="mm/dd/yyyy"):
        parse_query_time("2024-03-05T23:18:31")


def test_sports_dates_cover_a_period_with_the_fewest_strings():
    assert Period(TODAY, TODAY, "today").api_dates() == ["2024-03-05"]
    assert Period(date(2024, 3, 1), TODAY, "this month").api_dates() == ["2024-03"]
    assert Period(date(2023, 12, 20), TODAY, "x").api_dates() == ["2023", "2024"]


# -- behaviour 15: endpoint selection ----------------------------------------------------------------

AAPL = Match("ticker", "AAPL", "Apple Inc. Common Stock")


def sections(question_text: str, domain: str = "finance", matches=(AAPL,)) -> list[tuple[str, str]]:
    periods = resolve_periods(question_text, QUERY_TIME)
    return [(s.section, s.endpoint) for s in select(domain, question_text, matches, periods, TODAY)]


def test_dividend_and_a_year_select_the_dividends_by_year():
    periods = resolve_periods("How much dividend did Apple pay in 2023?", QUERY_TIME)
    chosen = select("finance", "How much dividend did Apple pay in 2023?", [AAPL], periods, TODAY)
    assert [(s.section, s.endpoint, s.years) for s in chosen] == [
        ("info", "/finance/get_info", ()), ("dividends_by_year", "/finance/get_dividends_history", (2023,))]
    assert sections("When did Apple pay its last dividend?")[-1] == ("dividends", "/finance/get_dividends_history")


def test_a_question_without_finance_keywords_gets_only_the_company_info():
    assert sections("Tell me about Apple.") == [("info", "/finance/get_info")]


def test_finance_keywords_select_their_endpoints():
    assert sections("What is Apple's market cap and its EPS and P/E ratio?") == [
        ("info", "/finance/get_info"), ("market_cap", "/finance/get_market_capitalization"),
        ("eps", "/finance/get_eps"), ("pe_ratio", "/finance/get_pe_ratio")]
    # prices of the query date (or "now") also read the 1-minute bars; past periods only the daily history
    assert sections(FUNKO)[1:] == [("price_daily", "/finance/get_price_history"),
                                   ("price_intraday", "/finance/get_detailed_price_history")]
    assert sections("What is Apple's stock price right now?")[2:] == [
        ("price_intraday", "/finance/get_detailed_price_history")]
    assert sections("What was Apple's average closing price last week?")[1:] == [
        ("price_daily", "/finance/get_price_history")]


def test_selection_in_the_other_domains():
    adele = Match("artist", "Adele", "Adele")
    assert sections("When was Adele born?", "music", [adele]) == [("birth_date", "/music/get_artist_birth_date")]
    assert sections("How many Grammy awards has Adele won?", "music", [adele]) == [
        ("all_works", "/music/get_artist_all_works"), ("grammy_count", "/music/grammy_get_award_count_by_artist"),
        ("grammy_years", "/music/grammy_get_award_date_by_artist")]
    assert sections("Who won the grammy for best new artist in 2019?", "music", []) == [
        ("grammy_best_new_artist", "/music/grammy_get_best_artist_by_year")]
    lakers = Match("nba team", "Los Angeles Lakers", "Los Angeles Lakers")
    (games,) = select("sports", "Did the Lakers win yesterday?", [lakers],
                      resolve_periods("Did the Lakers win yesterday?", QUERY_TIME), TODAY)
    assert games.requests == (("/sports/nba/get_games_on_date", {"date": "2024-03-04", "team_name": "Los Angeles Lakers"}),)
    assert sections("Who is Marie Curie?", "open", [Match("entity", "Marie Curie", "Marie Curie")]) == []


# -- the client against the local server -------------------------------------------------------------


def test_the_client_posts_the_query_as_json_and_returns_the_result(server):
    client = MockAPIClient(server.url)
    assert client.call("/finance/get_ticker_by_name", {"query": "Funko Inc. Class A Common Stock"}) == "FNKO"
    assert client.call("/finance/get_info", {"query": "NOPE"}) is None  # the KG has nothing: `result` is null
    assert server.log[0] == ("/finance/get_ticker_by_name", {"query": "Funko Inc. Class A Common Stock"})


def test_the_client_caches_each_request(server):
    client = MockAPIClient(server.url)
    for _ in range(2):
        assert client.call("/finance/get_ticker_by_name", {"query": "Funko Inc. Class A Common Stock"}) == "FNKO"
    assert len(server.log) == 1 and client.cache_hits == 1
    uncached = MockAPIClient(server.url, cache_size=0)
    uncached.call("/finance/get_ticker_by_name", {"query": "x"})
    uncached.call("/finance/get_ticker_by_name", {"query": "x"})
    assert len(server.log) == 3


def test_a_client_error_is_not_retried_and_names_the_url(server):
    client = MockAPIClient(server.url, retries=3, backoff=0)
    with pytest.raises(MockAPIError, match=rf"{server.url}/finance/no_such_endpoint answered HTTP 404"):
        client.call("/finance/no_such_endpoint", {"query": "x"})
    assert len(server.log) == 1


def test_server_errors_are_retried_then_reported(server):
    server.fail_with = 500
    client = MockAPIClient(server.url, retries=2, backoff=0)
    with pytest.raises(MockAPIError, match="HTTP 500"):
        client.call("/finance/get_info", {"query": "FNKO"})
    assert len(server.log) == 3 and client.requests == 3


def test_a_server_that_is_down_gives_an_error_naming_the_url(closed_port):
    client = MockAPIClient(f"http://127.0.0.1:{closed_port}", retries=1, backoff=0, timeout=2)
    with pytest.raises(MockAPIError, match=rf"no answer from the CRAG mock API at http://127.0.0.1:{closed_port}/"
                                           r"finance/get_info after 2 attempt\(s\).*uvicorn server:app"):
        client.call("/finance/get_info", {"query": "FNKO"})


# -- the whole pipeline ------------------------------------------------------------------------------


def test_funko_end_to_end_renders_the_open_price(server):
    source = api_source(server, {"How much did Funko": "Funko (company)"})
    cost = Cost()
    (passages,) = source.fetch([question(FUNKO, "finance")], [cost])
    assert [p.id for p in passages] == ["api:finance/get_info:FNKO", "api:finance/get_price_history:FNKO",
                                        "api:finance/get_detailed_price_history:FNKO"]
    assert {p.origin for p in passages} == {"api"}
    daily, intraday = passages[1].text, passages[2].text
    assert daily.startswith("## Funko Inc. Class A Common Stock (FNKO): daily stock prices\n### today (2024-03-05, Tuesday)")
    assert "- 2024-03-05: open $7.16, high $7.23, low $7.05, close $7.13, volume 455,300" in daily
    assert "- Open (first bar, 09:30:00 EST): $7.16" in intraday
    assert "- Last price (last bar, 15:59:00 EST): $7.13" in intraday
    assert "- Volume (sum of the 1-minute bars): 43,505" in intraday
    assert "- Forward EPS: 0.36" in passages[0].text
    # one NER generation, three API requests (the company table resolved the name without a call)
    assert server.endpoints() == ["/finance/get_info", "/finance/get_price_history", "/finance/get_detailed_price_history"]
    assert cost.llm_calls == 1 and cost.retrieval_calls == 3 and set(cost.seconds) == {"api", "api_ner"}
    assert cost.passage_ids == {p.id for p in passages}
    trace = source.traces[0]
    assert (trace.domain, trace.entities, trace.matches) == ("finance", {"company": ["Funko"]}, ["ticker:FNKO"])
    assert trace.periods == ["today=2024-03-05..2024-03-05"]
    assert source.counts == {"questions": 1, "api_calls": 3, "ner_parse_failures": 0, "no_match": 0, "empty": 0,
                             "domain_oracle": 1, "domain_parse_failures": 0, "domain_correct": 1, "domain_known": 1}
    assert source.question_stats == [{"ner_parse_failed": 0.0, "no_match": 0.0, "empty": 0.0, "api_calls": 3.0,
                                      "domain_oracle": 1.0, "domain_parse_failed": 0.0, "domain_correct": 1.0}]
    # the same question renders to the same text
    assert source.fetch([question(FUNKO, "finance")], [Cost()]) == [passages]


def test_without_a_company_table_names_go_through_the_server_search(server):
    source = api_source(server, {"How much did Funko": "Funko (company)"}, company_names=None)
    (passages,) = source.fetch([question(FUNKO, "finance")], [Cost()])
    assert server.endpoints()[:2] == ["/finance/get_company_name", "/finance/get_ticker_by_name"]
    assert source.traces[0].matches == ["ticker:FNKO"] and len(passages) == 3


def test_the_server_search_is_the_last_resort_with_a_table(server):
    table = CompanyTable([("Apple Inc. Common Stock", "AAPL"), ("Funko Inc. Class A Common Stock", "FNKO")])
    calls = []
    matcher = Matcher(lambda e, p: calls.append(e) or server.responses[e].get(p["query"]), table)
    assert matcher.match("finance", {"company": ["Funko", "Funko"], "symbol": ["AAPL", "ZZZZ"]}) == [
        Match("ticker", "AAPL", "Apple Inc. Common Stock"), Match("ticker", "FNKO", "Funko Inc. Class A Common Stock")]
    assert calls == ["/finance/get_company_name"]  # only "ZZZZ", which is neither a ticker nor a name, was searched


def test_dividends_by_year_render_totals_and_the_none_of_the_days_note(server):
    source = api_source(server, {"Apple": "Apple (company)"})
    (passages,) = source.fetch([question("How much dividend did Apple pay in 2023 and 2021?", "finance")], [Cost()])
    text = passages[-1].text
    assert "- Dividend yield: 0.0056\n- Ex-dividend date: 2024-02-09" in passages[0].text
    assert passages[-1].id == "api:finance/get_dividends_history:AAPL"
    assert "### 2021\n- No dividends distributed in 2021.\n- Note: if asked on which days dividends were " \
           "distributed in 2021, answer \"None of the Days\"." in text
    assert "### 2023\n- 2023-02-10: $0.23\n- 2023-05-12: $0.24\n- 2023-08-11: $0.24\n- 2023-11-10: $0.24\n" \
           "- Distributions in 2023: 4\n- Total dividends in 2023: $0.95" in text


def test_a_range_of_days_is_summarised_and_a_day_without_trading_points_to_the_one_before(server):
    source = api_source(server, {"Funko": "FNKO (symbol)"})
    (passages,) = source.fetch([question("What was Funko's average closing price this week?", "finance")], [Cost()])
    daily = next(p.text for p in passages if p.id == "api:finance/get_price_history:FNKO")
    assert "- Trading days: 2\n- Open on the first trading day (2024-03-04): $7.21" in daily
    assert "- Average close: $7.13" in daily and "- Total volume: 854,000" in daily
    assert "- Change (last close minus first open): -$0.08" in daily
    (passages,) = source.fetch([question("What did Funko close at on Sunday?", "finance")], [Cost()])
    daily = next(p.text for p in passages if p.id == "api:finance/get_price_history:FNKO")
    assert "No trading on 2024-03-03 (Sunday) in the daily history; the latest trading day before it is " \
           "2024-03-01 (Friday)." in daily


def test_music_movie_and_sports_questions_end_to_end(server):
    source = api_source(server, {"Adele": "Adele (person)", "Inception": "Inception (movie)",
                                 "Lakers": "Lakers (nba team)", "Everton": "Everton (soccer team)"})
    examples = [question("When was Adele born?", "music", "m"),
                question("What was the budget of Inception?", "movie", "v"),
                question("Did the Lakers win yesterday?", "sports", "n"),
                question("How many goals did Everton score this month?", "sports", "s")]
    music, movie, nba, soccer = source.fetch(examples, [Cost() for _ in examples])
    assert [p.text for p in music] == ["## Adele: birth date\n- Birth date (or a band's formation date): 1988-05-05"]
    assert movie[0].id == "api:movie/get_movie_info:27205"
    assert "- Director(s): Christopher Nolan" in movie[0].text and "- Budget: $160,000,000.00 (USD)" in movie[0].text
    assert "- 2024-03-04: Los Angeles Lakers (home) 112.0 - 116.0 Oklahoma City Thunder (away); home result L" in nba[0].text
    assert "- 2024-03-02: Everton vs West Ham (Home): result L, goals for 1.0, goals against 3.0; captain Séamus Coleman" \
           in soccer[0].text
    assert ("/sports/soccer/get_games_on_date", {"date": "2024-03", "team_name": "Everton"}) in server.log


def test_open_domain_is_empty_by_default_and_looked_up_behind_the_flag(server):
    marie = question("Who is Marie Curie?", "open")
    quiet = api_source(server, {"Marie Curie": "Marie Curie (person)"})
    cost = Cost()
    assert quiet.fetch([marie], [cost]) == [[]]
    assert server.log == [] and cost.llm_calls == 0 and quiet.counts["empty"] == 1
    lookup = api_source(server, {"Marie Curie": "Marie Curie (person)"}, open_lookup=True)
    ((page,),) = lookup.fetch([marie], [Cost()])
    assert server.endpoints() == ["/open/search_entity_by_name", "/open/get_entity"]
    assert page.id == "api:open/get_entity:Marie Curie" and "- death_date: 4 July 1934" in page.text


def test_ner_parse_failures_and_unmatched_entities_are_counted(server):
    source = api_source(server, {"Funko": "The company is Funko.", "Nintendo": "Nintendo (company)"})
    examples = [question(FUNKO, "finance", "a"), question("How is Nintendo doing?", "finance", "b")]
    assert source.fetch(examples, [Cost(), Cost()]) == [[], []]
    assert source.counts["ner_parse_failures"] == 1 and source.counts["no_match"] == 2
    assert [(s["ner_parse_failed"], s["no_match"]) for s in source.question_stats] == [(1.0, 1.0), (0.0, 1.0)]
    # "Nintendo" is not in the table, so the server's search was the last resort
    assert server.endpoints() == ["/finance/get_company_name"]


def test_a_server_that_is_down_stops_the_fetch_with_the_url(closed_port):
    source = APISource(ScriptedLLM(default_reply="Funko (company)"), base_url=f"http://127.0.0.1:{closed_port}",
                       company_names=COMPANIES, retries=0, timeout=2)
    with pytest.raises(MockAPIError, match=rf"http://127.0.0.1:{closed_port}/ .*uvicorn server:app"):
        source.fetch([question(FUNKO, "finance")], [Cost()])


class FixedDomains:
    """A classifier object naming one domain for every question."""

    oracle = False

    def __init__(self, domain: str) -> None:
        self.domain = domain

    def classify(self, examples, costs):
        return [DomainGuess(self.domain) for _ in examples]


def test_the_domain_is_the_gold_field_unless_a_classifier_is_given(server):
    examples = [question(FUNKO, "open")]
    oracle = api_source(server, {"Funko": "Funko (company)"})
    assert oracle.fetch(examples, [Cost()]) == [[]]
    assert oracle.question_stats[0]["domain_oracle"] == 1.0 and oracle.question_stats[0]["domain_correct"] == 1.0
    routed = api_source(server, {"Funko": "Funko (company)"}, domain=FixedDomains("finance"))
    assert len(routed.fetch(examples, [Cost()])[0]) == 3 and routed.traces[0].domain == "finance"
    assert (routed.traces[0].gold_domain, routed.question_stats[0]["domain_correct"]) == ("open", 0.0)
    assert routed.question_stats[0]["domain_oracle"] == 0.0
    assert routed.counts["domain_correct"] == 0 and routed.counts["domain_known"] == 1
    with pytest.raises(ValueError, match="unknown CRAG domains"):
        api_source(server, {}, domain=FixedDomains("weather")).fetch(examples, [Cost()])


def test_question_stats_are_per_question_in_batch_order(server):
    """A finance question with a matched company, an open question and a NER parse failure, in one batch."""
    source = api_source(server, {"How much did Funko": "Funko (company)", "Apple": "Apple is the company."})
    examples = [question(FUNKO, "finance", "a"), question("Who is Marie Curie?", "open", "b"),
                question("When did Apple pay its last dividend?", "finance", "c")]
    funko, curie, apple = source.fetch(examples, [Cost() for _ in examples])
    assert len(funko) == 3 and curie == [] and apple == []
    base = {"domain_oracle": 1.0, "domain_parse_failed": 0.0, "domain_correct": 1.0}
    assert source.question_stats == [
        {"ner_parse_failed": 0.0, "no_match": 0.0, "empty": 0.0, "api_calls": 3.0, **base},
        {"ner_parse_failed": 0.0, "no_match": 0.0, "empty": 1.0, "api_calls": 0.0, **base},  # open: no NER, no call
        {"ner_parse_failed": 1.0, "no_match": 1.0, "empty": 1.0, "api_calls": 0.0, **base},
    ]
    assert set(source.question_stats[0]) == set(STATS)
    assert [t.id for t in source.traces] == ["a", "b", "c"]
    assert (source.counts["ner_parse_failures"], source.counts["empty"], source.counts["api_calls"]) == (1, 2, 3)
    source.fetch(examples[1:2], [Cost()])  # the stats are the last batch's; the counts run on
    assert len(source.question_stats) == 1 and source.counts["questions"] == 4 and source.counts["empty"] == 3


def test_a_question_without_a_gold_domain_has_no_domain_correct(server):
    source = api_source(server, {}, domain=FixedDomains("open"))
    unlabelled = QAExample("u", "Who is Marie Curie?", ["x"], metadata={"query_time": QUERY_TIME})
    assert source.fetch([unlabelled], [Cost()]) == [[]]
    assert "domain_correct" not in source.question_stats[0] and source.counts["domain_known"] == 0
    with pytest.raises(ValueError, match="no 'domain' field"):
        api_source(server, {}).fetch([unlabelled], [Cost()])


def test_a_missing_company_table_is_reported_with_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="company_names=null"):
        APISource(ScriptedLLM(), company_names="crag/no_such.dict", data_dir=str(tmp_path))


def test_crag_finance_questions_from_the_loader(server):
    """The bundled CRAG questions carry what the source needs; the comparison question asks for both market caps."""
    path = data_root() / "crag" / "crag_task1_dev_10.jsonl.bz2"
    if not path.is_file():
        pytest.skip(f"{path} is not here")
    examples = [e for e in QADataset("crag", "crag/crag_task1_dev_10.jsonl.bz2", format="crag") if "plya" in e.question]
    source = api_source(server, {"plya": "PLYA (symbol)\nSEATW (symbol)"})
    assert source.fetch(examples, [Cost()]) == [[]]  # the stand-in server knows neither ticker
    assert server.log == [("/finance/get_info", {"query": "PLYA"}),
                          ("/finance/get_market_capitalization", {"query": "PLYA"}),
                          ("/finance/get_info", {"query": "SEATW"}),
                          ("/finance/get_market_capitalization", {"query": "SEATW"})]


def test_sports_frames_are_read_row_by_row():
    frame = {"game_date": {"0": "2024-03-04T00:00:00.000", "1": "2024-03-02T00:00:00.000"}, "pts_home": {"0": 1, "1": 2}}
    assert frame_rows(frame) == [{"_key": "0", "game_date": "2024-03-04T00:00:00.000", "pts_home": 1},
                                 {"_key": "1", "game_date": "2024-03-02T00:00:00.000", "pts_home": 2}]
    assert frame_rows(None) == []


def test_a_section_the_kg_has_no_data_for_renders_nothing():
    (info,) = select("finance", "Tell me about Apple.", [AAPL], [], TODAY)
    assert render(info, [None]) == ""


def rendered(section: str, match: Match, results: list, **args) -> str:
    from hoprag.sources.api.rules import Selection

    return render(Selection(section, match, **args), results)


def test_music_sections_render_the_official_answers():
    band = Match("band", "Maroon 5", "Maroon 5")
    assert rendered("members", band, [["Adam Levine", "James Valentine", "Adam Levine"]]) == \
        "- Members: (2) Adam Levine; James Valentine"
    assert rendered("lifespan", band, [["1994", None]]) == \
        "- Began (birth or formation): 1994\n- Ended (death or break-up): no end date in the KG"
    assert rendered("lifespan", band, [[None, None]]) == ""
    assert rendered("grammy_years", band, [[2005, 2003]]) == "- Grammy award years: 2003, 2005"
    song = Match("song", "Texas Hold 'Em", "Texas Hold 'Em")
    assert rendered("billboard_attribute", song, ["3"], fields=("weeks_in_chart", "2024-02-28")) == \
        "- weeks in chart on the chart of 2024-02-28: 3"
    assert rendered("billboard_attribute", song, [None], fields=("rank", "2024-03-05")) == \
        "- No Billboard Hot 100 entry for Texas Hold 'Em on 2024-03-05."
    rank = Match("rank", "1@2024-02-28", "Billboard Hot 100 rank 1")
    assert rendered("billboard_rank", rank, [[["Lovin On Me"], ["Jack Harlow"]]], fields=("1", "2024-02-28")) == \
        "- Rank 1 on 2024-02-28: Lovin On Me by Jack Harlow"
    assert rendered("billboard_rank", rank, [[[], []]], fields=("1", "2024-03-05")) == \
        "- No Billboard Hot 100 chart of 2024-03-05 in the KG."
    assert rendered("grammy_best_new_artist", Match("year", "2019", "Grammy Awards 2019"), [["Dua Lipa"]]) == \
        "- Best New Artist: Dua Lipa"


def test_movie_sections_render_records_filmographies_and_oscar_years():
    award = {"year_ceremony": 2011, "ceremony": 83, "category": "WRITING (Original Screenplay)", "name": "Christopher Nolan",
             "film": "Inception", "winner": False}
    nolan = Match("person", "525", "Christopher Nolan", {"name": "Christopher Nolan", "birthday": "1970-07-30",
                  "directed_movies": [27205, 155], "oscar_awards": [award]}, "/movie/get_person_info")
    assert rendered("person_info", nolan, [], fields=("oscars",)) == (
        "- Name: Christopher Nolan\n- Birthday: 1970-07-30\n- Movies directed: 2\n"
        "- Oscar 2011 (83th ceremony), WRITING (Original Screenplay): Inception (nominated)")
    films = [{"id": 155, "title": "The Dark Knight", "release_date": "2008-07-16"},
             {"id": 27205, "title": "Inception", "release_date": "2010-07-15"}]
    assert rendered("directed_movies", nolan, films[::-1], fields=("3",)) == (
        "- 2008-07-16: The Dark Knight\n- 2010-07-15: Inception\n- (the first 2 of 3 movies in the KG's list)")
    year = {"movie_list": [1, 2], "oscar_awards": [
        {"category": "BEST PICTURE", "name": "Green Book", "film": "Green Book", "winner": True},
        {"category": "ACTOR IN A LEADING ROLE", "name": "Rami Malek", "film": "Bohemian Rhapsody", "winner": True},
        {"category": "BEST PICTURE", "name": "Roma", "film": "Roma", "winner": False}]}
    assert rendered("oscar_year", Match("year", "2019", "Academy Awards 2019"), [year]) == (
        "- ACTOR IN A LEADING ROLE: Rami Malek (Bohemian Rhapsody)\n- BEST PICTURE: Green Book")
    inception = Match("movie", "27205", "Inception", {"title": "Inception", "revenue": 0, "cast": [
        {"name": "Elliot Page", "character": "Ariadne", "order": 2}, {"name": "Leonardo DiCaprio", "character": "Cobb",
                                                                      "order": 0}]})
    assert rendered("movie_info", inception, [], fields=("revenue", "cast")) == (
        "- Title: Inception\n- Revenue: unknown\n- Cast: Leonardo DiCaprio as Cobb\n- Cast: Elliot Page as Ariadne")


def test_finance_sections_render_whole_histories_and_the_latest_trading_day():
    history = {f"20{y}-0{q}-10 00:00:00 EST": 0.2 for y in range(20, 25) for q in (2, 5, 8)}
    text = rendered("dividends", AAPL, [history])
    assert text.startswith("- (the latest 12 of 15 distributions)\n- 2021-02-10: $0.20\n")
    assert text.endswith("- 2024-08-10: $0.20\n- First distribution: 2020-02-10\n- Latest distribution: 2024-08-10\n"
                         "- Number of distributions: 15\n- Total: $3.00")
    assert rendered("dividends", AAPL, [{}]).startswith("- No dividends distributed.")
    bars = {"2024-03-01 09:30:00 EST": {"Open": 7.15, "High": 7.2, "Low": 7.1, "Close": 7.18, "Volume": 10},
            "2024-03-01 15:59:00 EST": {"Open": 7.2, "High": 7.25, "Low": 7.19, "Close": 7.22, "Volume": 5}}
    text = rendered("price_intraday", AAPL, [bars], periods=(Period(date(2024, 3, 3), date(2024, 3, 3), "today"),))
    assert text.startswith("- No 1-minute bars on 2024-03-03 (Sunday); the latest trading day before it is "
                           "2024-03-01 (Friday).\n### 2024-03-01 (Friday)\n- Open (first bar, 09:30:00 EST): $7.15")
    assert rendered("market_cap", AAPL, [None]) == "" and rendered("eps", AAPL, [1.5]) == \
        "- Earnings per share (forward EPS): 1.50"


def test_the_api_source_is_exported_with_the_other_sources():
    from hoprag import sources

    assert sources.APISource is APISource
