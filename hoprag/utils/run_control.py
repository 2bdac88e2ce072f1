"""Settings that change where or how fast a run goes, not what it computes (shared by the settings fingerprints
and the wandb run names)."""

# Keys that change where or how fast a run goes, not its answers (fnmatch on dotted keys): left out of every
# settings fingerprint (eval.py's resume check, the router labeller's outcome cache). LLM_TRANSPORT are an
# LLM client's connection settings, matched under whichever key the LLM sits.
RUN_CONTROL_ANYWHERE = (
    "*.cache_dir", "*.generation_cache", "*.index_dir", "*.force", "*.device", "*.threads", "*.batch_size",
    "*.use_gpu", "*.delay",
)  # fmt: skip
LLM_TRANSPORT = ("base_url", "api_key", "timeout", "max_retries", "backoff", "max_backoff", "max_concurrency",
                 "timeout_per_token")  # fmt: skip
