"""Mock-API JSON → deterministic Markdown (spec/pruningrag.md §6.2 step 6).

Each `Selection` renders to bullet lines under a heading naming its entity and section (`heading`); dated
values are listed in date order, ranges get totals and averages, and a few "Note:" lines carry the answer
conventions the official code adds (a year without dividends is answered "None of the Days"). The same
results always render to the same text. A section with nothing to say renders to "" and is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, timezone
from typing import Any

from hoprag.sources.api.rules import Selection
from hoprag.sources.api.timeparse import Period

TITLES = {
    "info": "company information", "market_cap": "market capitalization", "eps": "earnings per share",
    "pe_ratio": "price-to-earnings ratio", "dividends": "dividend history", "dividends_by_year": "dividends by year",
    "price_daily": "daily stock prices", "price_intraday": "intraday stock prices (1-minute bars)",
    "birth_date": "birth date", "birth_place": "birth place", "lifespan": "lifespan", "members": "members",
    "all_works": "works", "grammy_count": "Grammy awards", "grammy_years": "Grammy award years",
    "song_author": "author", "song_release_date": "release date", "song_release_country": "release country",
    "grammy_song_count": "Grammy awards", "billboard_attribute": "Billboard Hot 100",
    "billboard_rank": "songs", "grammy_best_new_artist": "Best New Artist",
    "grammy_song_of_the_year": "Song of the Year", "grammy_album_of_the_year": "Album of the Year",
    "movie_info": "movie information", "person_info": "person information", "acted_movies": "movies acted in",
    "directed_movies": "movies directed", "oscar_year": "winners", "nba_games": "NBA games",
    "soccer_games": "soccer games", "open_entity": "entity page",
}
# yfinance-style keys of `get_info`, in the order they are listed.
INFO_FIELDS = [
    ("longName", "Name", str), ("sector", "Sector", str), ("industry", "Industry", str),
    ("country", "Country", str), ("exchange", "Exchange", str), ("currency", "Currency", str),
    ("fullTimeEmployees", "Full-time employees", "int"), ("marketCap", "Market capitalization", "money"),
    ("currentPrice", "Current price", "money"), ("previousClose", "Previous close", "money"),
    ("open", "Open", "money"), ("dayLow", "Day low", "money"), ("dayHigh", "Day high", "money"),
    ("volume", "Volume", "int"), ("fiftyTwoWeekLow", "52-week low", "money"),
    ("fiftyTwoWeekHigh", "52-week high", "money"), ("trailingPE", "Trailing P/E", "num"),
    ("forwardPE", "Forward P/E", "num"), ("trailingEps", "Trailing EPS", "num"), ("forwardEps", "Forward EPS", "num"),
    ("dividendRate", "Dividend rate", "money"), ("dividendYield", "Dividend yield", "ratio"),
    ("exDividendDate", "Ex-dividend date", "epoch"), ("payoutRatio", "Payout ratio", "ratio"), ("beta", "Beta", "num"),
    ("totalRevenue", "Total revenue", "money"), ("sharesOutstanding", "Shares outstanding", "int"),
]
MAX_ROWS = 31  # daily rows listed for a range (a month); longer ranges are summarised only
MAX_ITEMS = 50  # items of a list (works, members) listed
MAX_GAMES = 10
MAX_CAST = 10


def heading(selection: Selection) -> str:
    m = selection.match
    name = f"{m.name} ({m.key})" if m.kind == "ticker" and m.name != m.key else m.name
    return f"{name}: {TITLES[selection.section]}"


def render(selection: Selection, results: Sequence[Any]) -> str:
    """The section's bullet lines for the results of its requests ("" when there is nothing to say)."""
    return _RENDERERS[selection.section](selection, list(results)).strip()


# -- formatting -------------------------------------------------------------------------------------


def money(x: Any) -> str:
    x = float(x)
    return f"{'-' if x < 0 else ''}${abs(x):,.2f}"


def num(x: Any) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{float(x):,.2f}"


def _value(x: Any, kind: Any) -> str:
    if kind == "money":
        return money(x)
    if kind == "num":
        return num(x)
    if kind == "ratio":
        return f"{float(x):.4f}"
    if kind == "int":
        return f"{int(x):,}"
    if kind == "epoch":
        return datetime.fromtimestamp(int(x), timezone.utc).date().isoformat()
    return str(x)


def _day_of(stamp: str) -> date:
    """The day of a mock-API timestamp: "2024-03-05 00:00:00 EST", "2024-03-05T00:00:00.000"."""
    return date.fromisoformat(str(stamp)[:10])


def _weekday(day: date) -> str:
    return day.strftime("%A")


def _bullet(label: str, value: Any) -> str:
    return f"- {label}: {value}"


def _one(value: Callable[[Any], str], label: str) -> Callable[[Selection, list], str]:
    """A section that is one labelled value (empty when the KG has none)."""
    return lambda sel, results: _bullet(label, value(results[0])) if results and results[0] not in (None, "", []) else ""


# -- finance ----------------------------------------------------------------------------------------


def _info(sel: Selection, results: list) -> str:
    info = results[0] if results and isinstance(results[0], Mapping) else {}
    return "\n".join(_bullet(label, _value(info[key], kind)) for key, label, kind in INFO_FIELDS
                     if info.get(key) not in (None, ""))


def _dividend_rows(history: Any) -> list[tuple[date, float]]:
    return sorted((_day_of(k), float(v)) for k, v in (history or {}).items())


def _dividends(sel: Selection, results: list) -> str:
    rows = _dividend_rows(results[0] if results else None)
    if not rows:
        return "- No dividends distributed.\n- Note: if asked on which days dividends were distributed, answer \"None of the Days\"."
    lines = [f"- {d.isoformat()}: {money(v)}" for d, v in rows[-12:]]
    if len(rows) > 12:
        lines.insert(0, f"- (the latest 12 of {len(rows)} distributions)")
    return "\n".join([*lines, _bullet("First distribution", rows[0][0].isoformat()),
                      _bullet("Latest distribution", rows[-1][0].isoformat()),
                      _bullet("Number of distributions", len(rows)), _bullet("Total", money(sum(v for _, v in rows)))])


def _dividends_by_year(sel: Selection, results: list) -> str:
    rows = _dividend_rows(results[0] if results else None)
    blocks = []
    for year in sel.years:
        in_year = [(d, v) for d, v in rows if d.year == year]
        if in_year:
            lines = [f"- {d.isoformat()}: {money(v)}" for d, v in in_year]
            lines += [_bullet(f"Distributions in {year}", len(in_year)),
                      _bullet(f"Total dividends in {year}", money(sum(v for _, v in in_year)))]
        else:
            lines = [f"- No dividends distributed in {year}.",
                     f"- Note: if asked on which days dividends were distributed in {year}, answer \"None of the Days\"."]
        blocks.append(f"### {year}\n" + "\n".join(lines))
    return "\n".join(blocks)


def _bars(history: Any) -> list[tuple[str, Mapping[str, Any]]]:
    return sorted((str(k), v) for k, v in (history or {}).items() if isinstance(v, Mapping))


def _price_line(bar: Mapping[str, Any]) -> str:
    return (f"open {money(bar['Open'])}, high {money(bar['High'])}, low {money(bar['Low'])}, "
            f"close {money(bar['Close'])}, volume {int(bar['Volume']):,}")


def _price_daily(sel: Selection, results: list) -> str:
    bars = [(_day_of(k), v) for k, v in _bars(results[0] if results else None)]
    if not bars:
        return ""
    blocks = []
    for period in sel.periods:
        title = f"### {period.label} ({_span(period)})"
        if period.single_day:
            blocks.append(title + "\n" + _daily_day(bars, period.start))
        else:
            blocks.append(title + "\n" + _daily_range([(d, b) for d, b in bars if period.contains(d)], period))
    return "\n".join(blocks)


def _span(period: Period) -> str:
    if period.single_day:
        return f"{period.start.isoformat()}, {_weekday(period.start)}"
    return f"{period.start.isoformat()} to {period.end.isoformat()}"


def _daily_day(bars: list[tuple[date, Mapping]], day: date) -> str:
    found = dict(bars)
    if day in found:
        return f"- {day.isoformat()}: {_price_line(found[day])}"
    before = [(d, b) for d, b in bars if d < day]
    if not before:
        return f"- No trading day on or before {day.isoformat()} in the daily history."
    d, bar = before[-1]
    return (f"- No trading on {day.isoformat()} ({_weekday(day)}) in the daily history; the latest trading day "
            f"before it is {d.isoformat()} ({_weekday(d)}).\n- {d.isoformat()}: {_price_line(bar)}")


def _daily_range(bars: list[tuple[date, Mapping]], period: Period) -> str:
    if not bars:
        return f"- No trading days from {period.start.isoformat()} to {period.end.isoformat()} in the daily history."
    first, last = bars[0], bars[-1]
    high = max(bars, key=lambda r: r[1]["High"])
    low = min(bars, key=lambda r: r[1]["Low"])
    lines = [
        _bullet("Trading days", len(bars)),
        _bullet(f"Open on the first trading day ({first[0].isoformat()})", money(first[1]["Open"])),
        _bullet(f"Close on the last trading day ({last[0].isoformat()})", money(last[1]["Close"])),
        _bullet(f"Highest price ({high[0].isoformat()})", money(high[1]["High"])),
        _bullet(f"Lowest price ({low[0].isoformat()})", money(low[1]["Low"])),
        _bullet("Average open", money(sum(b["Open"] for _, b in bars) / len(bars))),
        _bullet("Average close", money(sum(b["Close"] for _, b in bars) / len(bars))),
        _bullet("Total volume", f"{sum(int(b['Volume']) for _, b in bars):,}"),
        _bullet("Change (last close minus first open)", money(last[1]["Close"] - first[1]["Open"])),
    ]
    if len(bars) <= MAX_ROWS:
        lines += [f"- {d.isoformat()} ({_weekday(d)}): {_price_line(b)}" for d, b in bars]
    return "\n".join(lines)


def _price_intraday(sel: Selection, results: list) -> str:
    bars = _bars(results[0] if results else None)
    if not bars:
        return ""
    day = sel.periods[0].start
    days = sorted({_day_of(k) for k, _ in bars})
    shown = max((d for d in days if d <= day), default=None)
    if shown is None:
        return f"- No 1-minute bars on or before {day.isoformat()} (the bars cover {days[0]} to {days[-1]})."
    of_day = [(k, b) for k, b in bars if _day_of(k) == shown]
    (first_time, first), (last_time, last) = of_day[0], of_day[-1]
    lines = [] if shown == day else [
        (f"- No 1-minute bars on {day.isoformat()} ({_weekday(day)}); the latest trading day before it is "
         f"{shown.isoformat()} ({_weekday(shown)}).")]
    lines += [
        f"### {shown.isoformat()} ({_weekday(shown)})",
        _bullet(f"Open (first bar, {first_time[11:]})", money(first["Open"])),
        _bullet(f"Last price (last bar, {last_time[11:]})", money(last["Close"])),
        _bullet("High", money(max(b["High"] for _, b in of_day))),
        _bullet("Low", money(min(b["Low"] for _, b in of_day))),
        _bullet("Volume (sum of the 1-minute bars)", f"{sum(int(b['Volume']) for _, b in of_day):,}"),
        "- Note: the first bar's open and the last bar's close may differ from the official daily open and close.",
    ]
    return "\n".join(lines)


# -- music ------------------------------------------------------------------------------------------


def _listing(items: Any) -> str:
    items = sorted({str(i) for i in items or []})
    shown = "; ".join(items[:MAX_ITEMS]) + ("; ..." if len(items) > MAX_ITEMS else "")
    return f"({len(items)}) {shown}"


def _lifespan(sel: Selection, results: list) -> str:
    span = results[0] if results else None
    if not span or not any(span):
        return ""
    begin, end = (list(span) + [None, None])[:2]
    return "\n".join([_bullet("Began (birth or formation)", begin or "unknown"),
                      _bullet("Ended (death or break-up)", end or "no end date in the KG")])


def _billboard_attribute(sel: Selection, results: list) -> str:
    attribute, day = sel.fields
    value = results[0] if results else None
    if value in (None, ""):
        return f"- No Billboard Hot 100 entry for {sel.match.key} on {day}."
    return _bullet(f"{attribute.replace('_', ' ')} on the chart of {day}", value)


def _billboard_rank(sel: Selection, results: list) -> str:
    rank, day = sel.fields
    songs, artists = (list(results[0]) + [None, None])[:2] if results and results[0] else (None, None)
    if not songs:
        return f"- No Billboard Hot 100 chart of {day} in the KG."
    return "\n".join(f"- Rank {rank} on {day}: {s} by {a}" for s, a in zip(songs, artists or [""] * len(songs)))


def _names(label: str) -> Callable[[Selection, list], str]:
    return lambda sel, results: _bullet(label, ", ".join(map(str, results[0]))) if results and results[0] else ""


# -- movie ------------------------------------------------------------------------------------------


def _oscar_lines(awards: Any, by_film: bool) -> list[str]:
    lines = []
    for a in sorted(awards or [], key=lambda a: (a.get("year_ceremony", 0), a.get("category", ""))):
        outcome = "won" if a.get("winner") else "nominated"
        what = a.get("film") if by_film else a.get("name")
        lines.append(f"- Oscar {a.get('year_ceremony')} ({a.get('ceremony')}th ceremony), {a.get('category')}: "
                     f"{what} ({outcome})")
    return lines


def _movie_info(sel: Selection, results: list) -> str:
    r = sel.match.record or {}
    directors = [c["name"] for c in r.get("crew") or [] if c.get("job") == "Director"]
    lines = [_bullet("Title", r.get("title"))]
    if r.get("original_title") and r.get("original_title") != r.get("title"):
        lines.append(_bullet("Original title", r["original_title"]))
    lines += [_bullet(label, r[key]) for key, label in (("release_date", "Release date"),
              ("original_language", "Original language"), ("rating", "Rating (0-10)"), ("length", "Length (minutes)"))
              if r.get(key) not in (None, "")]
    if r.get("genres"):
        lines.append(_bullet("Genres", ", ".join(g["name"] for g in r["genres"])))
    if directors:
        lines.append(_bullet("Director(s)", ", ".join(directors)))
    for key in ("budget", "revenue"):
        if key in sel.fields and key in r:
            lines.append(_bullet(key.capitalize(), money(r[key]) + " (USD)" if r[key] else "unknown"))
    if "oscars" in sel.fields:
        lines += _oscar_lines(r.get("oscar_awards"), by_film=False) or ["- No Oscar nominations in the KG."]
    if "cast" in sel.fields:
        cast = sorted(r.get("cast") or [], key=lambda c: c.get("order", 0))[:MAX_CAST]
        lines += [f"- Cast: {c.get('name')} as {c.get('character') or 'unknown'}" for c in cast]
    if "crew" in sel.fields:
        lines += [f"- Crew: {c.get('job')}: {c.get('name')}" for c in (r.get("crew") or [])[:MAX_ITEMS]]
    return "\n".join(lines)


def _person_info(sel: Selection, results: list) -> str:
    r = sel.match.record or {}
    lines = [_bullet("Name", r.get("name"))]
    if r.get("birthday"):
        lines.append(_bullet("Birthday", r["birthday"]))
    lines += [_bullet(label, len(r[key])) for key, label in (("acted_movies", "Movies acted in"),
              ("directed_movies", "Movies directed")) if r.get(key)]
    if "oscars" in sel.fields:
        lines += _oscar_lines(r.get("oscar_awards"), by_film=True) or ["- No Oscar nominations in the KG."]
    return "\n".join(lines)


def _filmography(sel: Selection, results: list) -> str:
    movies = sorted((m for m in results if m), key=lambda m: (m.get("release_date") or "", m.get("title", "")))
    total = int(sel.fields[0])
    lines = [f"- {m.get('release_date') or 'unknown date'}: {m.get('title')}" for m in movies]
    if total > len(movies):
        lines.append(f"- (the first {len(movies)} of {total} movies in the KG's list)")
    return "\n".join(lines)


def _oscar_year(sel: Selection, results: list) -> str:
    info = results[0] if results and isinstance(results[0], Mapping) else {}
    winners = sorted((a.get("category", ""), a.get("name", ""), a.get("film", "")) for a in info.get("oscar_awards") or []
                     if a.get("winner"))
    return "\n".join(f"- {c}: {n}" + (f" ({f})" if f and f != n else "") for c, n, f in winners)


# -- sports -----------------------------------------------------------------------------------------


def frame_rows(frame: Any) -> list[dict[str, Any]]:
    """The rows of a pandas `DataFrame.to_json()` (column → {row key → value}), as the sports endpoints answer."""
    if not isinstance(frame, Mapping) or not frame:
        return []
    columns = list(frame)
    keys = list(frame[columns[0]])
    return [{"_key": k, **{c: frame[c].get(k) for c in columns}} for k in keys]


def _games(date_column: str, line: Callable[[dict], str]) -> Callable[[Selection, list], str]:
    def render_games(sel: Selection, results: list) -> str:
        period = sel.periods[0]
        rows = [r for result in results for r in frame_rows(result)]
        rows = [r for r in rows if r.get(date_column) and period.contains(_day_of(r[date_column]))]
        if not rows:
            return f"- No games in the KG from {period.start.isoformat()} to {period.end.isoformat()}."
        rows.sort(key=lambda r: (str(r[date_column]), str(r["_key"])), reverse=True)
        lines = [f"### {period.label} ({_span(period)}): {len(rows)} game(s), latest first"]
        lines += [f"- {str(r[date_column])[:10]}: {line(r)}" for r in rows[:MAX_GAMES]]
        return "\n".join(lines)

    return render_games


def _nba_line(r: dict) -> str:
    return (f"{r.get('team_name_home')} (home) {r.get('pts_home')} - {r.get('pts_away')} {r.get('team_name_away')} "
            f"(away); home result {r.get('wl_home')}")


def _soccer_line(r: dict) -> str:
    extras = [f"{label} {r[key]}" for key, label in (("xG", "xG"), ("xGA", "xGA"), ("Poss", "possession"),
              ("Captain", "captain")) if r.get(key) not in (None, "")]
    team = _soccer_team(r["_key"])
    return (f"{team} vs {r.get('opponent')} ({r.get('venue')}): result {r.get('result')}, "
            f"goals for {r.get('GF')}, goals against {r.get('GA')}" + (f"; {', '.join(extras)}" if extras else ""))


def _soccer_team(key: str) -> str:
    """The team of a soccer row key "('ENG-Premier League', '2324', 'Everton', '2024-03-09 ...')"."""
    parts = [p.strip(" '\"") for p in str(key).strip("()").split(",")]
    return parts[2] if len(parts) > 2 else "the team"


# -- open -------------------------------------------------------------------------------------------


def _open_entity(sel: Selection, results: list) -> str:
    page = results[0] if results and isinstance(results[0], Mapping) else {}
    lines = [_bullet("Summary", " ".join(str(page["summary_text"]).split())[:1500])] if page.get("summary_text") else []
    facts = page.get("summary_structured") or {}
    lines += [_bullet(k, " ".join(str(v).split())[:300]) for k, v in sorted(facts.items())[:30] if v not in (None, "")]
    return "\n".join(lines)


_RENDERERS: dict[str, Callable[[Selection, list], str]] = {
    "info": _info,
    "market_cap": _one(money, "Market capitalization"),
    "eps": _one(num, "Earnings per share (forward EPS)"),
    "pe_ratio": _one(num, "Price-to-earnings ratio (forward P/E)"),
    "dividends": _dividends,
    "dividends_by_year": _dividends_by_year,
    "price_daily": _price_daily,
    "price_intraday": _price_intraday,
    "birth_date": _one(str, "Birth date (or a band's formation date)"),
    "birth_place": _one(str, "Birth place (ISO 3166 country code)"),
    "lifespan": _lifespan,
    "members": lambda sel, results: _bullet("Members", _listing(results[0])) if results and results[0] else "",
    "all_works": lambda sel, results: _bullet("Works", _listing(results[0])) if results and results[0] else "",
    "grammy_count": _one(str, "Grammy awards (1958-2019)"),
    "grammy_years": lambda sel, results: _bullet("Grammy award years", ", ".join(map(str, sorted(results[0]))))
    if results and results[0] else "",
    "song_author": _one(str, "Author"),
    "song_release_date": _one(str, "Release date"),
    "song_release_country": _one(str, "Release country (ISO 3166 code)"),
    "grammy_song_count": _one(str, "Grammy awards (1958-2019)"),
    "billboard_attribute": _billboard_attribute,
    "billboard_rank": _billboard_rank,
    "grammy_best_new_artist": _names("Best New Artist"),
    "grammy_song_of_the_year": _names("Song of the Year"),
    "grammy_album_of_the_year": _names("Album of the Year"),
    "movie_info": _movie_info,
    "person_info": _person_info,
    "acted_movies": _filmography,
    "directed_movies": _filmography,
    "oscar_year": _oscar_year,
    "nba_games": _games("game_date", _nba_line),
    "soccer_games": _games("date", _soccer_line),
    "open_entity": _open_entity,
}
