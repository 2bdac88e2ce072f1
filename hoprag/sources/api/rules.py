"""Endpoint selection by keyword rules (spec/pruningrag.md §6.2 step 5, §16.15): only what the question
asks about is fetched, which is how the API source prunes.

`select` turns a question, its matched entities and its time periods into `Selection`s: a section to
render about one entity and the official endpoint requests it needs (none when the record a search
endpoint already returned is enough). Per domain:
- finance: company information always (`get_info`); market cap, EPS, P/E on their words; dividends (per
  year when the question names a year or period); prices on price words: the daily history for the
  question's periods (the query date by default), and the 1-minute bars of the last 5 days when the
  question is about the query date or asks for a current price;
- music: birth date and place, lifespan, works, Grammy counts and years, band members, song author,
  release date and country, Billboard attributes and ranks, and the Grammy winners of a named year;
- movie: the movie or person record (fields by keyword), the filmography by id, the Oscars of a year;
- sports: the games of each matched team (NBA or soccer) in each period (the 30 days before the query
  by default), or all games of one league on a named day;
- open: the entity page, when the open lookup is on (matching found entities only then).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from hoprag.sources.api.matching import Match
from hoprag.sources.api.timeparse import Period

Request = tuple[str, Mapping[str, Any]]  # (endpoint, JSON body)


@dataclass(frozen=True)
class Selection:
    """One section to render about `match`, the requests whose results it renders, and its arguments."""

    section: str
    match: Match
    requests: tuple[Request, ...] = ()
    periods: tuple[Period, ...] = ()
    years: tuple[int, ...] = ()
    fields: tuple[str, ...] = ()

    @property
    def endpoint(self) -> str:
        """The endpoint the section's data came from: its first request's, else the search that matched."""
        return self.requests[0][0] if self.requests else self.match.source


def _words(*patterns: str) -> re.Pattern:
    return re.compile("|".join(patterns))


# finance
MARKET_CAP = _words(r"market\s*cap", r"capitali[sz]ation", r"market value", r"valuation")
EPS = _words(r"\beps\b", r"earnings per share")
PE_RATIO = _words(r"\bp\s*/\s*e\b", r"\bpe ratio", r"price[- ]to[- ]earnings", r"price earnings")
DIVIDEND = _words(r"dividend")
PRICE = _words(r"\bprice", r"\bopen(?:ed|ing|s)?\b", r"\bclos(?:e|ed|es|ing)\b", r"\bhigh(?:er|est)?\b",
               r"\blow(?:er|est)?\b", r"\bvolume\b", r"\btrad(?:e|ed|es|ing)\b", r"\bperform", r"\bgain",
               r"\bris(?:e|en|es|ing)\b", r"\brose\b", r"\bf[ae]ll\b", r"\bdrop", r"\bchange")
CURRENT = _words(r"\bnow\b", r"\bcurrent", r"\blatest\b", r"\bright now\b", r"\bat the moment\b")
# music
BIRTH_DATE = _words(r"\bborn\b", r"\bbirth", r"\bage\b", r"\bhow old\b", r"\bformed\b", r"\bfounded\b")
BIRTH_PLACE = _words(r"where .*\bborn\b", r"\bbirth ?place", r"\bcountry\b", r"\bnationality\b", r"\bhometown\b",
                     r"\bwhere\b.*\bfrom\b")
LIFESPAN = _words(r"\bdie[ds]?\b", r"\bdeath\b", r"\bdead\b", r"\balive\b", r"\blifespan\b", r"\bpassed away\b",
                  r"\bdisband", r"\bbroke up\b")
WORKS = _words(r"\balbums?\b", r"\bsongs\b", r"\btracks\b", r"\bworks?\b", r"\bdiscography\b", r"\brecords\b",
               r"\bhow many\b", r"\breleased\b")
GRAMMY = _words(r"grammy", r"\baward")
MEMBERS = _words(r"\bmembers?\b", r"\bline-?up\b", r"\bin the band\b")
AUTHOR = _words(r"\bwho\b", r"\bwr[io]te\b", r"\bwritten\b", r"\bwriter\b", r"\bauthor", r"\bsang\b", r"\bsung\b",
                r"\bsinger\b", r"\bperform", r"\bartist\b", r"\bby\b")
RELEASE = _words(r"\breleas", r"\bcame out\b", r"\bwhen\b", r"\bwhat year\b", r"\bdate\b", r"\bhow old\b")
CHART = _words(r"billboard", r"\bhot 100\b", r"\bchart", r"\branks?\b", r"\branked\b", r"\bweeks\b",
               r"\bpeak", r"\btop position\b")
RANK = re.compile(r"(?:\bnumber|\bno\.?|#)\s*(\d{1,3})\b|\b(?:number one|top song)\b")
# movie
MONEY = {"budget": _words(r"\bbudget", r"\bcost\b"),
         "revenue": _words(r"\brevenue", r"\bbox office\b", r"\bgross", r"\bearn", r"\bmake\b", r"\bmade\b")}
OSCAR = _words(r"\boscar", r"\bacademy award", r"\baward", r"\bnominat")
CAST = _words(r"\bcast\b", r"\bact(?:or|ress|ed|s)\b", r"\bstar(?:s|red|ring)?\b", r"\bplay(?:s|ed)?\b",
              r"\brole\b", r"\bcharacter\b")
CREW = _words(r"\bcrew\b", r"\bproduc", r"\bcompos", r"\bwriter\b", r"\bscreenplay\b", r"\bcinematograph",
              r"\bedit(?:or|ed)\b", r"\bmusic\b")
FILMOGRAPHY = _words(r"\bmovies\b", r"\bfilms\b", r"\bacted\b", r"\bstarred\b", r"\bappear", r"\bdirected\b",
                     r"\bhow many\b", r"\bfirst\b", r"\blast\b", r"\blatest\b", r"\bdebut")
# sports
NBA = _words(r"\bnba\b", r"basketball")
SOCCER = _words(r"soccer", r"football", r"premier league", r"la liga", r"ligue 1", r"\bgoals?\b")
SPORTS_WINDOW_DAYS = 30


def select(
    domain: str,
    question: str,
    matches: Sequence[Match],
    periods: Sequence[Period],
    today: date,
    open_lookup: bool = False,
    max_titles: int = 20,
) -> list[Selection]:
    """The sections to render, in a fixed order per entity: the same inputs always select the same calls."""
    q = question.lower()
    if domain == "finance":
        return [s for m in matches if m.kind == "ticker" for s in _finance(q, m, periods, today)]
    if domain == "music":
        return _music(q, matches, periods, today)
    if domain == "movie":
        return _movie(q, matches, periods, max_titles)
    if domain == "sports":
        return _sports(q, matches, periods, today)
    if domain == "open":
        return [Selection("open_entity", m, (("/open/get_entity", {"query": m.key}),)) for m in matches] if open_lookup else []
    raise ValueError(f"unknown CRAG domain {domain!r}")


def _ask(section: str, match: Match, endpoint: str, **args: Any) -> Selection:
    """A section fetched with the one-field body every single-entity endpoint takes."""
    return Selection(section, match, ((endpoint, {"query": match.key}),), **args)


def _finance(q: str, m: Match, periods: Sequence[Period], today: date) -> list[Selection]:
    chosen = [_ask("info", m, "/finance/get_info")]
    if MARKET_CAP.search(q):
        chosen.append(_ask("market_cap", m, "/finance/get_market_capitalization"))
    if EPS.search(q):
        chosen.append(_ask("eps", m, "/finance/get_eps"))
    if PE_RATIO.search(q):
        chosen.append(_ask("pe_ratio", m, "/finance/get_pe_ratio"))
    if DIVIDEND.search(q):
        years = tuple(sorted({y for p in periods for y in p.years()}))
        section = "dividends_by_year" if years else "dividends"
        chosen.append(_ask(section, m, "/finance/get_dividends_history", years=years))
    if PRICE.search(q):
        days = tuple(periods) or (Period(today, today, "the query date"),)
        chosen.append(_ask("price_daily", m, "/finance/get_price_history", periods=days))
        if CURRENT.search(q) or any(p.contains(today) for p in days):
            chosen.append(_ask("price_intraday", m, "/finance/get_detailed_price_history",
                               periods=(Period(today, today, "the query date"),)))
    return chosen


def _music(q: str, matches: Sequence[Match], periods: Sequence[Period], today: date) -> list[Selection]:
    chosen: list[Selection] = []
    day = next((p.start.isoformat() for p in periods if p.single_day), today.isoformat())
    for m in matches:
        if m.kind in ("artist", "band"):
            asked = [
                ("birth_date", "/music/get_artist_birth_date", BIRTH_DATE),
                ("birth_place", "/music/get_artist_birth_place", BIRTH_PLACE),
                ("lifespan", "/music/get_lifespan", LIFESPAN),
                ("members", "/music/get_members", MEMBERS if m.kind == "artist" else re.compile("")),
                ("all_works", "/music/get_artist_all_works", WORKS),
                ("grammy_count", "/music/grammy_get_award_count_by_artist", GRAMMY),
                ("grammy_years", "/music/grammy_get_award_date_by_artist", GRAMMY),
            ]
            found = [_ask(s, m, e) for s, e, words in asked if words.search(q)]
            chosen += found or [_ask("birth_date", m, "/music/get_artist_birth_date"),
                                _ask("birth_place", m, "/music/get_artist_birth_place")]
        elif m.kind == "song":
            asked = [
                ("song_author", "/music/get_song_author", AUTHOR),
                ("song_release_date", "/music/get_song_release_date", RELEASE),
                ("song_release_country", "/music/get_song_release_country", BIRTH_PLACE),
                ("grammy_song_count", "/music/grammy_get_award_count_by_song", GRAMMY),
            ]
            found = [_ask(s, m, e) for s, e, words in asked if words.search(q)]
            if CHART.search(q):
                attribute = _billboard_attribute(q)
                body = {"date": day, "attribute": attribute, "song_name": m.key}
                found.append(Selection("billboard_attribute", m, (("/music/get_billboard_attributes", body),),
                                       fields=(attribute, day)))
            chosen += found or [_ask("song_author", m, "/music/get_song_author"),
                                _ask("song_release_date", m, "/music/get_song_release_date")]
    years = sorted({y for p in periods if p.start.year == p.end.year for y in p.years()})
    if GRAMMY.search(q):
        for year in years:
            chosen += _grammy_year(q, year)
    rank = RANK.search(q)
    if CHART.search(q) and rank:
        n = int(rank.group(1)) if rank.group(1) else 1
        body = {"rank": n, "date": day}
        chosen.append(Selection("billboard_rank", Match("rank", f"{n}@{day}", f"Billboard Hot 100 rank {n}"),
                                (("/music/get_billboard_rank_date", body),), fields=(str(n), day)))
    return chosen


def _billboard_attribute(q: str) -> str:
    if "weeks" in q:
        return "weeks_in_chart"
    if "last week" in q:
        return "rank_last_week"
    if re.search(r"\bpeak|\btop position\b|\bhighest\b", q):
        return "top_position"
    return "rank"


def _grammy_year(q: str, year: int) -> list[Selection]:
    """The Grammy winners of a named year: the categories the question names, else all three."""
    match = Match("year", str(year), f"Grammy Awards {year}")
    asked = [("grammy_best_new_artist", "/music/grammy_get_best_artist_by_year", r"new artist"),
             ("grammy_song_of_the_year", "/music/grammy_get_best_song_by_year", r"song of the year|best song"),
             ("grammy_album_of_the_year", "/music/grammy_get_best_album_by_year", r"album of the year|best album")]
    named = [a for a in asked if re.search(a[2], q)] or asked
    return [Selection(s, match, ((e, {"query": year}),)) for s, e, _ in named]


def _movie(q: str, matches: Sequence[Match], periods: Sequence[Period], max_titles: int) -> list[Selection]:
    chosen: list[Selection] = []
    fields = tuple(f for f, words in (*MONEY.items(), ("oscars", OSCAR), ("cast", CAST), ("crew", CREW))
                   if words.search(q))
    for m in matches:
        if m.kind == "movie":
            chosen.append(Selection("movie_info", m, fields=fields))
        elif m.kind == "person":
            chosen.append(Selection("person_info", m, fields=tuple(f for f in fields if f == "oscars")))
            if FILMOGRAPHY.search(q):
                for role in ("acted_movies", "directed_movies"):
                    ids = (m.record or {}).get(role) or []
                    requests = tuple(("/movie/get_movie_info_by_id", {"query": int(i)}) for i in ids[:max_titles])
                    if requests:
                        chosen.append(Selection(role, m, requests, fields=(str(len(ids)),)))
    if OSCAR.search(q):
        for year in sorted({y for p in periods if p.start.year == p.end.year for y in p.years()}):
            if 1990 <= year <= 2021:  # the years the official get_year_info serves
                chosen.append(Selection("oscar_year", Match("year", str(year), f"Academy Awards {year}"),
                                        (("/movie/get_year_info", {"query": str(year)}),)))
    return chosen


def _sports(q: str, matches: Sequence[Match], periods: Sequence[Period], today: date) -> list[Selection]:
    window = tuple(periods) or (
        Period(today - timedelta(days=SPORTS_WINDOW_DAYS), today, f"the {SPORTS_WINDOW_DAYS} days before the query"),
    )
    leagues = {"nba team": ("nba_games", "/sports/nba/get_games_on_date"),
               "soccer team": ("soccer_games", "/sports/soccer/get_games_on_date")}
    chosen = [
        Selection(leagues[m.kind][0], m, tuple((leagues[m.kind][1], {"date": d, "team_name": m.key})
                                               for d in p.api_dates()), periods=(p,))
        for m in matches if m.kind in leagues for p in window
    ]
    if not chosen:  # no team: every game of the named league on a named day
        for p in periods:
            for section, endpoint, words in (("nba_games", "/sports/nba/get_games_on_date", NBA),
                                             ("soccer_games", "/sports/soccer/get_games_on_date", SOCCER)):
                if p.single_day and words.search(q):
                    day = p.start.isoformat()
                    chosen.append(Selection(section, Match("date", day, f"all games on {day}"),
                                            ((endpoint, {"date": day, "team_name": None}),), periods=(p,)))
    return chosen
