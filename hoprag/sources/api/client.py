"""HTTP client of the official CRAG mock API (github.com/facebookresearch/CRAG, `mock_api/server.py`).

Every endpoint of that server is a POST of a JSON body (`{"query": ...}`, or `{"date", "team_name"}` for
sports, `{"rank", "date"}` / `{"date", "attribute", "song_name"}` for Billboard) answered with
`{"result": ...}`; `call` returns the `result`, which is `null` when the KG has nothing for the query. The
client adds what a long evaluation needs: a timeout, retries with backoff for connection failures and
5xx answers (never for 4xx: a bad request stays bad), errors that name the URL, and an LRU cache per
request (endpoint + body) so questions about the same ticker do not fetch its price history twice.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

DEFAULT_BASE_URL = "http://localhost:8000"
START_HINT = (
    "start the official server from the CRAG repository (cd mock_api && uvicorn server:app --port 8000) "
    "and point `base_url` at it"
)
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}


class MockAPIError(RuntimeError):
    """The mock API did not answer a request; the message names the URL."""


class MockAPIClient:
    """POSTs to `{base_url}{endpoint}`; `requests` counts what went over the wire, `cache_hits` what did not."""

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = 30.0,
        retries: int = 2,
        backoff: float = 0.5,
        cache_size: int = 1024,
    ) -> None:
        if retries < 0 or timeout <= 0 or cache_size < 0:
            raise ValueError(f"need retries >= 0, timeout > 0, cache_size >= 0 (got {retries}, {timeout}, {cache_size})")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.cache_size = cache_size
        self.requests = 0
        self.cache_hits = 0
        self._cache: OrderedDict[tuple[str, str], Any] = OrderedDict()
        # A proxy set in the environment must not swallow requests to a server on this machine.
        handlers = [urllib.request.ProxyHandler({})] if urlsplit(self.base_url).hostname in _LOOPBACK else []
        self._opener = urllib.request.build_opener(*handlers)

    def call(self, endpoint: str, payload: Mapping[str, Any]) -> Any:
        """The `result` the server gives for `payload` at `endpoint` (e.g. "/finance/get_eps")."""
        key = (endpoint, json.dumps(payload, sort_keys=True))
        if key in self._cache:
            self.cache_hits += 1
            self._cache.move_to_end(key)
            return self._cache[key]
        url = self.base_url + endpoint
        body = self._request(url, json.dumps(payload).encode("utf-8"))
        if not isinstance(body, dict) or "result" not in body:
            raise MockAPIError(f"{url} answered without a `result` field: {str(body)[:200]!r}")
        if self.cache_size:
            self._cache[key] = body["result"]
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return body["result"]

    def ping(self) -> None:
        """Fail early, with the URL and how to start the server, when nothing answers at `base_url`."""
        self._request(self.base_url + "/", None)

    def _request(self, url: str, data: bytes | None) -> Any:
        headers = {"accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data is not None else "GET")
        for attempt in range(self.retries + 1):
            self.requests += 1
            try:
                with self._opener.open(request, timeout=self.timeout) as response:
                    raw = response.read()
                break
            except urllib.error.HTTPError as e:
                detail = e.read()[:200].decode("utf-8", "replace")
                if e.code < 500 or attempt == self.retries:
                    raise MockAPIError(f"{url} answered HTTP {e.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                if attempt == self.retries:
                    reason = getattr(e, "reason", e)
                    raise MockAPIError(
                        f"no answer from the CRAG mock API at {url} after {attempt + 1} attempt(s) ({reason}): "
                        f"{START_HINT}"
                    ) from None
            time.sleep(self.backoff * 2**attempt)
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            raise MockAPIError(f"{url} answered with text that is not JSON: {raw[:200]!r}") from None
