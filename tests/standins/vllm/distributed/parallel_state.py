"""vLLM's clean-up between engines: the stand-in holds no distributed state, only objects to collect."""

from __future__ import annotations

import gc


def cleanup_dist_env_and_memory(shutdown_ray: bool = False) -> None:
    gc.collect()
