"""Stand-ins for what a paper table needs but this machine cannot run (hosted models, GPU engines, the CRAG
mock API), so the rehearsal scale runs every table end to end on a CPU through hoprag's real code paths."""

from __future__ import annotations

import threading
from typing import Any


def serve_until_killed(server: Any) -> None:
    """A stand-in server's command line: print its URL on one line, serve until interrupted, then close it."""
    print(server.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
