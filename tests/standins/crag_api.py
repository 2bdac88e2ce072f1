"""A stand-in for the official CRAG mock API (github.com/facebookresearch/CRAG, `mock_api/server.py`): every
endpoint of that server, answered with the fixture's response where one matches the request
(tests/fixtures/crag_api/responses.json, keyed by `request_key`) and otherwise with what the official server
answers when its knowledge graph has nothing (`{"result": null}`, an empty list, a zero, `[null, null]`, as
each endpoint does). So a run over any CRAG question goes through hoprag's whole API path.

    with CragAPIStandIn() as server:
        source = APISource(llm, base_url=server.url)

    python -m tests.standins.crag_api [--port P] [--responses FILE]   # prints its URL, serves until killed

As the official (FastAPI) server does, it answers GET / with its banner, an unknown path with 404
`{"detail": "Not Found"}`, a GET on an endpoint with 405, a body without a required field (or with a
non-integer where one is wanted) with 422, and a `get_year_info` outside 1990-2021 with 500. `log` records
every POST (endpoint, body); `fail_with` makes every POST answer that HTTP status.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.standins import serve_until_killed

RESPONSES = Path(__file__).parents[1] / "fixtures" / "crag_api" / "responses.json"
INT_PARSING = "Input should be a valid integer, unable to parse string as an integer"  # pydantic's message


class ServerError(Exception):
    """What the official server's code raises (FastAPI answers it with a 500)."""


@dataclass(frozen=True)
class Endpoint:
    """An official endpoint's body: required fields (those named in `ints` are integers), optional ones, and
    its result when the knowledge graph has nothing for the body."""

    required: tuple[str, ...] = ("query",)
    optional: tuple[str, ...] = ()
    ints: tuple[str, ...] = ()
    empty: Callable[[dict[str, Any]], Any] = lambda body: None


def _grammy_year(body: dict[str, Any]) -> list | None:
    return [] if 1957 <= body["query"] <= 2019 else None  # the years the official KG holds


def _year_info(body: dict[str, Any]) -> None:
    year = str(body["query"])
    if not (year.isdigit() and 1990 <= int(year) <= 2021):  # the official code's int(year) raises, or its check
        raise ServerError("Year must be between 1990 and 2021")


SEARCH = Endpoint(empty=lambda body: [])
BY_YEAR = Endpoint(ints=("query",), empty=_grammy_year)
ENDPOINTS: dict[str, Endpoint] = {
    "/open/search_entity_by_name": SEARCH,
    "/open/get_entity": Endpoint(),
    "/movie/get_person_info": SEARCH,
    "/movie/get_movie_info": SEARCH,
    "/movie/get_year_info": Endpoint(empty=_year_info),
    "/movie/get_movie_info_by_id": Endpoint(ints=("query",)),
    "/movie/get_person_info_by_id": Endpoint(ints=("query",)),
    "/finance/get_company_name": SEARCH,
    **{f"/finance/{name}": Endpoint() for name in (
        "get_ticker_by_name", "get_price_history", "get_detailed_price_history", "get_dividends_history",
        "get_market_capitalization", "get_eps", "get_pe_ratio", "get_info")},
    "/music/search_artist_entity_by_name": SEARCH,
    "/music/search_song_entity_by_name": SEARCH,
    "/music/get_billboard_rank_date": Endpoint(("rank",), ("date",), ("rank",), lambda body: [None, None]),
    "/music/get_billboard_attributes": Endpoint(("date", "attribute", "song_name")),
    "/music/grammy_get_best_artist_by_year": BY_YEAR,
    "/music/grammy_get_best_song_by_year": BY_YEAR,
    "/music/grammy_get_best_album_by_year": BY_YEAR,
    "/music/grammy_get_award_count_by_artist": Endpoint(empty=lambda body: 0),
    "/music/grammy_get_award_count_by_song": Endpoint(empty=lambda body: 0),
    "/music/grammy_get_award_date_by_artist": SEARCH,
    "/music/grammy_get_all_awarded_artists": Endpoint(required=(), empty=lambda body: []),
    **{f"/music/{name}": Endpoint() for name in (
        "get_artist_birth_place", "get_artist_birth_date", "get_members", "get_song_author",
        "get_song_release_country", "get_song_release_date", "get_artist_all_works")},
    "/music/get_lifespan": Endpoint(empty=lambda body: [None, None]),
    "/sports/soccer/get_games_on_date": Endpoint(("date",), ("team_name",)),
    "/sports/nba/get_games_on_date": Endpoint(("date",), ("team_name",)),
    "/sports/nba/get_play_by_play_data_by_game_ids": Endpoint(("game_ids",)),
}  # fmt: skip


def request_key(payload: Mapping[str, Any]) -> str:
    """How responses.json keys a request: its `query`, or `field=value|...` for bodies with several fields."""
    if set(payload) == {"query"}:
        return str(payload["query"])
    return "|".join(f"{k}={payload[k]}" for k in sorted(payload))


class CragAPIStandIn(ThreadingHTTPServer):
    """The server, serving from a background thread as soon as it is built: `url` is its base URL (hoprag's
    `base_url`); `close()` (or leaving its `with` block) stops it."""

    daemon_threads = True

    def __init__(self, responses: Path | Mapping[str, Any] = RESPONSES, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        if not isinstance(responses, Mapping):
            responses = json.loads(Path(responses).read_text(encoding="utf-8"))
        self.responses = {k: v for k, v in responses.items() if k in ENDPOINTS}  # e.g. a "_note" is no endpoint
        self.log: list[tuple[str, dict]] = []
        self.fail_with: int | None = None
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def endpoints(self) -> list[str]:
        return [endpoint for endpoint, _ in self.log]

    def answer(self, endpoint: str, body: dict[str, Any]) -> Any:
        """The `result` for a valid body: the fixture's, else the endpoint's empty one."""
        known = self.responses.get(endpoint, {})
        key = request_key(body)
        return known[key] if key in known else ENDPOINTS[endpoint].empty(body)

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join()

    def __enter__(self) -> CragAPIStandIn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Handler(BaseHTTPRequestHandler):
    server: CragAPIStandIn

    def do_GET(self) -> None:
        if self.path == "/":
            self.reply(200, {"message": "The CRAG API service is running"})
        elif self.path in ENDPOINTS:
            self.reply(405, {"detail": "Method Not Allowed"})
        else:
            self.reply(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = None
        self.server.log.append((self.path, body))
        endpoint = ENDPOINTS.get(self.path)
        if self.server.fail_with:
            self.reply(self.server.fail_with, {"detail": "failure asked for by the test"})
        elif endpoint is None:
            self.reply(404, {"detail": "Not Found"})
        elif (problems := _invalid(endpoint, body)) is not None:
            self.reply(422, {"detail": problems})
        else:
            ints = {f: int(body[f]) for f in endpoint.ints if body.get(f) is not None}
            try:
                self.reply(200, {"result": self.server.answer(self.path, {**(body or {}), **ints})})
            except ServerError:
                self.send_text(500, "Internal Server Error")

    def reply(self, status: int, body: dict) -> None:
        self.send_text(status, json.dumps(body), "application/json")

    def send_text(self, status: int, text: str, kind: str = "text/plain; charset=utf-8") -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass


def _invalid(endpoint: Endpoint, body: Any) -> list[dict[str, Any]] | None:
    """FastAPI's 422 details for a body the endpoint's model rejects (None when it is valid); an integer field
    takes what pydantic accepts as one: an int, or a string of digits."""
    if not endpoint.required:
        return None
    if not isinstance(body, dict):
        return [{"type": "model_attributes_type", "loc": ["body"], "msg": "Input should be a valid dictionary"}]
    problems = [{"type": "missing", "loc": ["body", f], "msg": "Field required"}
                for f in endpoint.required if body.get(f) is None]  # fmt: skip
    for field in endpoint.ints:
        value = body.get(field)
        whole = isinstance(value, int) and not isinstance(value, bool)
        if value is not None and not whole and not (isinstance(value, str) and value.strip().lstrip("-").isdigit()):
            problems.append({"type": "int_parsing", "loc": ["body", field], "msg": INT_PARSING})
    return problems or None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: any free one)")
    parser.add_argument("--responses", type=Path, default=RESPONSES, help="fixture answers (default: the tests')")
    args = parser.parse_args(argv)
    serve_until_killed(CragAPIStandIn(args.responses, args.port))


if __name__ == "__main__":
    main()
