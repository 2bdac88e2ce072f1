"""Settings that change where or how fast a run goes, or what it prints, not what it computes (shared by the
settings fingerprints, the wandb run names and `hoprag.compare`'s run names)."""

from fnmatch import fnmatch

from hoprag.utils.secrets import is_secret

# Keys that change where or how fast a run goes, not its answers (fnmatch on dotted keys): left out of every
# settings fingerprint (eval.py's resume check, the router labeller's outcome cache). LLM_TRANSPORT are an
# LLM client's connection settings, matched under whichever key the LLM sits.
RUN_CONTROL_ANYWHERE = (
    "*.cache_dir", "*.generation_cache", "*.index_dir", "*.force", "*.device", "*.devices", "*.threads",
    "*.batch_size", "*.use_gpu", "*.mmap", "*.delay",
)  # fmt: skip
LLM_TRANSPORT = ("base_url", "api_key", "timeout", "max_retries", "backoff", "max_backoff", "max_concurrency",
                 "timeout_per_token")  # fmt: skip
# Overrides that say where a run writes, what it shows or how fast it goes: left out of run names (wandb's,
# hoprag.compare's), these by their first key and RUN_CONTROL_ANYWHERE at any depth.
UNNAMED_ROOTS = frozenset({"paths", "logger", "show", "overwrite", "progress", "verbose", "gpus_per_job"})


def is_run_control(key: str) -> bool:
    """Whether the dotted override key `key` (no `+`/`~`) changes nothing a run computes (a secret, such as
    `llm.api_key`, included: it never names a run)."""
    return (
        key.split(".")[0] in UNNAMED_ROOTS or any(fnmatch(f".{key}", p) for p in RUN_CONTROL_ANYWHERE) or is_secret(key)
    )
