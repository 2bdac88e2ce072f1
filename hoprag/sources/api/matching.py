"""Entity matching: NER names → the keys the mock API is called with (spec/pruningrag.md §6.2 step 3).

- finance: company names → tickers through the official company table (`company_name.dict`, the mock
  API's own CSV: an index column, `Name` such as "Funko Inc. Class A Common Stock", `Symbol`): the full
  name, then the name without its security description and legal suffix ("funko"), then the name read as
  a ticker, then a fuzzy match (stdlib difflib, so every machine matches alike), and last the server's own
  BM25 company search (`/finance/get_company_name`). Symbols are checked against the table. Without a
  table every name goes through the server: `get_company_name` → `get_ticker_by_name`.
- music: artist, band and song names canonicalised by the search endpoints (the exact-name hit, else the
  top one);
- movie: movie and person names → the entity records (and ids) of `get_movie_info` / `get_person_info`;
- sports: team names validated against the NBA teams and the soccer teams the KG holds (aliases such as
  "Lakers" or "Manchester United" map to the names the KG stores); players pass through;
- open (only with the open lookup on): names → the top `/open/search_entity_by_name` hit.
An entity that does not match is dropped.
"""

from __future__ import annotations

import csv
import difflib
import os
import string
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Caller = Callable[[str, Mapping[str, Any]], Any]  # (endpoint, JSON body) -> the server's `result`

# Words from which a company's table name describes the security, not the company.
_SECURITY = {"common", "ordinary", "class", "depositary", "depository", "warrant", "warrants", "unit", "units",
             "right", "rights", "preferred", "notes", "senior", "subordinated", "series", "fixed", "floating",
             "ads", "adr", "adrs", "perpetual", "cumulative", "noncumulative", "redeemable", "convertible",
             "shares", "share", "stock", "each", "representing", "beneficial"}
# Legal suffixes dropped from the end of what is left ("Apple Inc." -> "apple").
_LEGAL = {"inc", "incorporated", "corp", "corporation", "co", "com", "company", "ltd", "limited", "plc", "llc", "lp",
          "llp", "nv", "sa", "ag", "se", "the", "de", "holdings", "holding", "group"}

_DELETE = str.maketrans("", "", string.punctuation)
_SPACE = str.maketrans(string.punctuation, " " * len(string.punctuation))


def normalize(text: str, spaced: bool = False) -> str:
    """Lower case, accents folded, punctuation deleted (as the mock API normalises names; `spaced`:
    replaced by a space, so "Amazon.com" also reads "amazon com"), spaces collapsed."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return " ".join(folded.lower().replace("_", " ").translate(_SPACE if spaced else _DELETE).split())


def short_name(name: str, spaced: bool = False) -> str:
    """A table name without its security description and legal suffix: the name people use."""
    tokens = normalize(name, spaced).split()
    cut = next((i for i, t in enumerate(tokens) if i > 0 and t in _SECURITY), len(tokens))
    if 1 < cut < len(tokens) and tokens[cut - 1] == "american" and tokens[cut] in ("depositary", "depository"):
        cut -= 1
    tokens = tokens[:cut]
    while len(tokens) > 1 and tokens[-1] in _LEGAL:
        tokens.pop()
    while len(tokens) > 1 and tokens[0] == "the":
        tokens.pop(0)
    return " ".join(tokens)


def _keys(name: str) -> list[str]:
    """The forms a name is looked up by, most literal first: the full name, then the short one, each with its
    punctuation deleted, then spaced."""
    return list(dict.fromkeys(f(name, spaced) for f in (normalize, short_name) for spaced in (False, True)))


_SECONDARY = {"preferred", "warrant", "warrants", "notes", "debentures", "right", "rights", "unit", "units",
              "subordinated", "senior", "perpetual"}


def _listing_rank(name: str, symbol: str, index: int) -> tuple:
    """Which row a shared name means: the company's shares before its warrants, notes, units and
    preferred series; then the shorter ticker; then file order."""
    return bool(set(normalize(name).split()) & _SECONDARY), len(symbol), index


class CompanyTable:
    """The official company table: name → ticker and ticker → name."""

    def __init__(self, rows: Iterable[tuple[str, str]]) -> None:
        best: dict[str, tuple[tuple, str]] = {}
        self.names: dict[str, str] = {}  # ticker -> the name of its first row
        for index, (name, symbol) in enumerate(rows):
            name, symbol = name.strip(), symbol.strip()
            if not name or not symbol:
                continue
            self.names.setdefault(symbol, name)
            rank = _listing_rank(name, symbol, index)
            for key in _keys(name):
                if key not in best or rank < best[key][0]:
                    best[key] = (rank, symbol)
        self.tickers = {key: symbol for key, (_, symbol) in best.items()}
        self._candidates = sorted(self.tickers)  # what fuzzy matching compares with

    @classmethod
    def load(cls, path: str | os.PathLike) -> CompanyTable:
        """Read `company_name.dict` (CSV with a header `,Name,Symbol`)."""
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, [])
            if header[1:3] != ["Name", "Symbol"]:
                raise ValueError(f"{path}: expected the header ',Name,Symbol' of CRAG's company_name.dict, got {header}")
            return cls((row[1], row[2]) for row in reader if len(row) >= 3)

    def name_of(self, symbol: str) -> str:
        return self.names.get(symbol, symbol)

    def lookup(self, text: str) -> str | None:
        """The ticker of a company name (full or short) or of a ticker itself; None if it names neither."""
        for key in _keys(text):
            if key in self.tickers:
                return self.tickers[key]
        symbol = text.strip().upper()
        return symbol if symbol in self.names else None

    def fuzzy(self, text: str, cutoff: float) -> str | None:
        """The ticker of the closest name at difflib similarity >= cutoff, if any."""
        close = difflib.get_close_matches(short_name(text), self._candidates, n=1, cutoff=cutoff)
        return self.tickers[close[0]] if close else None


@dataclass(frozen=True)
class Match:
    """A matched entity: its kind, the key endpoints are called with (ticker, canonical name, team, id),
    a display name, and the record a search endpoint returned for it (movie, person, open entity)."""

    kind: str
    key: str
    name: str
    record: Any = None
    source: str = ""  # the endpoint the record came from


NBA_TEAMS: dict[str, tuple[str, ...]] = {
    "Atlanta Hawks": ("hawks", "atlanta", "atl"), "Boston Celtics": ("celtics", "boston", "bos"),
    "Brooklyn Nets": ("nets", "brooklyn", "bkn"), "Charlotte Hornets": ("hornets", "charlotte", "cha"),
    "Chicago Bulls": ("bulls", "chicago", "chi"), "Cleveland Cavaliers": ("cavaliers", "cavs", "cleveland", "cle"),
    "Dallas Mavericks": ("mavericks", "mavs", "dallas", "dal"), "Denver Nuggets": ("nuggets", "denver", "den"),
    "Detroit Pistons": ("pistons", "detroit", "det"),
    "Golden State Warriors": ("warriors", "golden state", "gsw"), "Houston Rockets": ("rockets", "houston", "hou"),
    "Indiana Pacers": ("pacers", "indiana", "ind"), "Los Angeles Clippers": ("clippers", "la clippers", "lac"),
    "Los Angeles Lakers": ("lakers", "la lakers", "lal"), "Memphis Grizzlies": ("grizzlies", "memphis", "mem"),
    "Miami Heat": ("heat", "miami", "mia"), "Milwaukee Bucks": ("bucks", "milwaukee", "mil"),
    "Minnesota Timberwolves": ("timberwolves", "wolves", "minnesota", "min"),
    "New Orleans Pelicans": ("pelicans", "new orleans", "nop"), "New York Knicks": ("knicks", "new york", "nyk"),
    "Oklahoma City Thunder": ("thunder", "oklahoma city", "okc"), "Orlando Magic": ("magic", "orlando", "orl"),
    "Philadelphia 76ers": ("76ers", "sixers", "philadelphia", "phi"), "Phoenix Suns": ("suns", "phoenix", "phx"),
    "Portland Trail Blazers": ("trail blazers", "blazers", "portland", "por"),
    "Sacramento Kings": ("kings", "sacramento", "sac"), "San Antonio Spurs": ("spurs", "san antonio", "sas"),
    "Toronto Raptors": ("raptors", "toronto", "tor"), "Utah Jazz": ("jazz", "utah", "uta"),
    "Washington Wizards": ("wizards", "washington", "was"),
}
# The soccer KG's 2023-24 Premier League, La Liga and Ligue 1 teams, as the KG (FBref) names them.
SOCCER_TEAMS: dict[str, tuple[str, ...]] = {
    "Arsenal": (), "Aston Villa": (), "Bournemouth": ("afc bournemouth",), "Brentford": (),
    "Brighton": ("brighton and hove albion", "brighton hove albion"), "Burnley": (), "Chelsea": (),
    "Crystal Palace": (), "Everton": (), "Fulham": (), "Liverpool": (), "Luton Town": ("luton",),
    "Manchester City": ("man city",), "Manchester Utd": ("manchester united", "man united", "man utd"),
    "Newcastle Utd": ("newcastle united", "newcastle"), "Nott'ham Forest": ("nottingham forest",),
    "Sheffield Utd": ("sheffield united",), "Tottenham": ("tottenham hotspur", "spurs"),
    "West Ham": ("west ham united",), "Wolves": ("wolverhampton", "wolverhampton wanderers"),
    "Alavés": ("deportivo alaves",), "Almería": ("ud almeria",), "Athletic Club": ("athletic bilbao",),
    "Atlético Madrid": ("atletico de madrid",), "Barcelona": ("fc barcelona", "barca"), "Betis": ("real betis",),
    "Cádiz": ("cadiz cf",), "Celta Vigo": ("celta de vigo",), "Getafe": (), "Girona": (), "Granada": (),
    "Las Palmas": (), "Mallorca": ("rcd mallorca",), "Osasuna": (), "Rayo Vallecano": (), "Real Madrid": (),
    "Real Sociedad": (), "Sevilla": ("sevilla fc",), "Valencia": (), "Villarreal": (),
    "Brest": (), "Clermont Foot": ("clermont",), "Le Havre": (), "Lens": ("rc lens",), "Lille": ("losc lille",),
    "Lorient": (), "Lyon": ("olympique lyonnais",), "Marseille": ("olympique de marseille",), "Metz": (),
    "Monaco": ("as monaco",), "Montpellier": (), "Nantes": (), "Nice": ("ogc nice",),
    "Paris S-G": ("paris saint germain", "psg"), "Reims": (), "Rennes": (), "Strasbourg": (), "Toulouse": (),
}


def _alias_index(teams: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    index: dict[str, str] = {}
    for team, aliases in teams.items():
        for alias in (team, *aliases):
            index.setdefault(normalize(alias), team)
    return index


_NBA = _alias_index(NBA_TEAMS)
_SOCCER = _alias_index(SOCCER_TEAMS)


def team_of(name: str, label: str = "nba team") -> tuple[str, str] | None:
    """("nba team" | "soccer team", the KG's team name) for a team name or alias. A name both leagues
    know ("Wolves", "Spurs") goes to the league of the NER label; a team the label got wrong is still found."""
    key = normalize(name)
    leagues = [("nba team", _NBA), ("soccer team", _SOCCER)]
    for kind, index in sorted(leagues, key=lambda league: league[0] != label):
        if key in index:
            return kind, index[key]
    return None


class Matcher:
    """Matches a question's NER entities; `call` is how it reaches the mock API (counted by the caller)."""

    def __init__(self, call: Caller, companies: CompanyTable | None = None, fuzzy_cutoff: float = 0.85) -> None:
        self.call = call
        self.companies = companies
        self.fuzzy_cutoff = fuzzy_cutoff

    def match(self, domain: str, entities: Mapping[str, list[str]]) -> list[Match]:
        matcher = {"finance": self._finance, "music": self._music, "movie": self._movie,
                   "sports": self._sports, "open": self._open}[domain]
        found: list[Match] = []
        for match in matcher(entities):
            if all((m.kind, m.key) != (match.kind, match.key) for m in found):
                found.append(match)
        return found

    # -- finance ------------------------------------------------------------------------------------

    def _finance(self, entities: Mapping[str, list[str]]) -> Iterable[Match]:
        for name in entities.get("symbol", []):
            ticker = self._symbol(name)
            if ticker:
                yield Match("ticker", ticker, self._company_name(ticker))
        for name in entities.get("company", []):
            ticker = self._ticker(name)
            if ticker:
                yield Match("ticker", ticker, self._company_name(ticker))

    def _symbol(self, name: str) -> str | None:
        if self.companies is None:
            return name.strip().upper() or None
        symbol = name.strip().upper()
        return symbol if symbol in self.companies.names else self._ticker(name)

    def _ticker(self, name: str) -> str | None:
        table = self.companies
        if table is not None:
            ticker = table.lookup(name) or table.fuzzy(name, self.fuzzy_cutoff)
            if ticker:
                return ticker
        hits = self.call("/finance/get_company_name", {"query": name}) or []
        if not hits:
            return None
        if table is not None:
            return table.lookup(hits[0])
        return self.call("/finance/get_ticker_by_name", {"query": hits[0]})

    def _company_name(self, ticker: str) -> str:
        return self.companies.name_of(ticker) if self.companies is not None else ticker

    # -- music, movie, open -------------------------------------------------------------------------

    def _music(self, entities: Mapping[str, list[str]]) -> Iterable[Match]:
        for kind, endpoint in (("person", "/music/search_artist_entity_by_name"),
                               ("band", "/music/search_artist_entity_by_name"),
                               ("song", "/music/search_song_entity_by_name")):
            for name in entities.get(kind, []):
                hit = _best(name, self.call(endpoint, {"query": name}) or [], str)
                if hit is not None:
                    yield Match("artist" if kind == "person" else kind, hit, hit, source=endpoint)

    def _movie(self, entities: Mapping[str, list[str]]) -> Iterable[Match]:
        for kind, endpoint, field in (("movie", "/movie/get_movie_info", "title"),
                                      ("person", "/movie/get_person_info", "name")):
            for name in entities.get(kind, []):
                record = _best(name, self.call(endpoint, {"query": name}) or [], lambda r, f=field: r.get(f, ""))
                if record is not None:
                    yield Match(kind, str(record.get("id", record.get(field))), record.get(field, name), record, endpoint)

    def _open(self, entities: Mapping[str, list[str]]) -> Iterable[Match]:
        for names in entities.values():
            for name in names:
                hits = self.call("/open/search_entity_by_name", {"query": name}) or []
                if hits:
                    yield Match("entity", hits[0], hits[0], source="/open/search_entity_by_name")

    # -- sports ---------------------------------------------------------------------------------------

    def _sports(self, entities: Mapping[str, list[str]]) -> Iterable[Match]:
        for kind in ("nba team", "soccer team"):
            for name in entities.get(kind, []):
                team = team_of(name, kind)
                if team:
                    yield Match(team[0], team[1], team[1])
        for kind in ("nba player", "soccer player"):
            for name in entities.get(kind, []):
                yield Match(kind, name, name)


def _best(name: str, hits: list, label: Callable[[Any], str]) -> Any:
    """The search hit whose name is the query's (normalised), else the top hit; None for no hits."""
    key = normalize(name)
    return next((h for h in hits if normalize(label(h)) == key), hits[0] if hits else None)
