"""Hydra/OmegaConf glue shared by every entry point: resolvers, and the checks a composed config must pass."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from fnmatch import fnmatch
from typing import Any, NamedTuple, TypeVar

from omegaconf import DictConfig, ListConfig, OmegaConf, open_dict

from hoprag.paths import PROJECT_ROOT
from hoprag.utils.refusals import Refusal
from hoprag.utils.secrets import is_secret


def select_settings(cfg: Mapping[str, Any], sections: Iterable[str], ignored: Iterable[str]) -> dict[str, Any]:
    """The resolved `sections` of `cfg` (as JSON would store them) without the keys matching `ignored`
    (fnmatch on dotted keys, e.g. `RUN_CONTROL_ANYWHERE`) and without secrets (`hoprag.utils.secrets`: an API
    key changes no answer, and a fingerprint is written to disk): what a settings fingerprint covers."""
    ignored = tuple(ignored)

    def prune(node: Any, prefix: str) -> Any:
        if not isinstance(node, dict):
            return node
        return {
            k: prune(v, f"{prefix}{k}.")
            for k, v in node.items()
            if not is_secret(k) and not any(fnmatch(f"{prefix}{k}", pattern) for pattern in ignored)
        }

    resolved = {key: plain(cfg[key]) for key in sections if key in cfg}
    return json.loads(json.dumps({key: prune(value, f"{key}.") for key, value in resolved.items()}))


def plain(node: Any) -> Any:
    """A config node as plain containers, resolved; anything else as it is."""
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node


class Rule(NamedTuple):
    """Keys matching `pattern` (whole name) must hold an integer >= `minimum` (or null when `nullable`)."""

    pattern: str
    minimum: int
    nullable: bool
    meaning: str


# The numbers a run cannot mean, by key name wherever the key sits (data, method, retriever, llm,
# selector, model, ...). `ks` is a list: each entry is checked. Keys matching no rule are never touched.
NUMBER_RULES: tuple[Rule, ...] = (
    Rule(r"batch_size", 1, False, "items per batch"),
    Rule(r"limit", 1, True, "questions to keep; null: all"),
    Rule(r"sample", 1, True, "questions to draw at random; null: all"),
    Rule(r"k|[a-z0-9_]+_k", 1, False, "passages or candidates to take"),
    Rule(r"ks", 1, False, "cut-offs of the retrieval metrics"),
    Rule(r"simulations", 1, False, "search simulations"),
    Rule(r"branching", 1, False, "children per expansion"),
    Rule(r"max_depth", 1, False, "tree depth"),
    Rule(r"max_new_tokens", 1, False, "tokens to generate"),
    Rule(r"max_nodes", 1, False, "tree nodes per question (the ceiling of a tree-growing method)"),
    Rule(r"max_llm_calls", 2, False, "LLM calls per question (one MCTS simulation makes 2)"),
    Rule(r"n", 1, False, "samples per prompt"),
    Rule(r"max_concurrency", 1, False, "requests in flight per LLM call"),
    Rule(r"gpus_per_job", 1, True, "GPUs each job claims; null: every job sees every GPU"),
)
# Keys a pattern matches that count something else: Lightning's ModelCheckpoint takes -1 (keep every
# checkpoint) and 0 (keep none), and the reciprocal-rank-fusion constant may be 0 (score 1 / rank).
EXEMPT = frozenset({"save_top_k", "rrf_k"})
# Nodes that declare rather than count, never walked: a served LLM's `capabilities` (`n: true`: it honours n).
DECLARATIONS = frozenset({"capabilities"})
# Entry-point settings that take one of a few values (dotted key → allowed values).
CHOICES: dict[str, tuple[Any, ...]] = {
    "progress": ("auto", True, False),
    "scale": ("smoke", "paper", "rehearsal"),
}
# Settings that moved (old dotted key → new): Hydra suggests `+old=` for a key it does not know, which would then
# fail deep inside a constructor; the run is refused naming the new key instead.
RENAMED = {"method.ckpt": "method.search.ckpt"}


class ConfigError(Refusal, ValueError):
    """A setting no run can mean, found before anything is read, built or deleted."""


def register_resolvers() -> None:
    """`${hoprag_root:}` → the checkout, so paths never depend on the working directory; `${wandb_run:...}` → a
    wandb run's name, group and tags from its Hydra job (hoprag.utils.loggers.wandb_run)."""
    if not OmegaConf.has_resolver("hoprag_root"):
        OmegaConf.register_new_resolver("hoprag_root", lambda: str(PROJECT_ROOT))
    if not OmegaConf.has_resolver("wandb_run"):
        from hoprag.utils.loggers import wandb_run  # here: that module imports this one

        OmegaConf.register_new_resolver("wandb_run", wandb_run)


def check_config(cfg: DictConfig) -> None:
    """Refuse numbers that make no sense (`method.k=0`, `batch_size=0`, `limit=-1`) before anything runs.

    Walks the whole config (but Hydra's own node) and checks every key a NUMBER_RULES pattern names;
    only those keys are resolved, so interpolations elsewhere (`${hydra:...}`) need no Hydra context.
    A boolean of the config files must stay a boolean: `overwrite=no` is a string, which Python reads as
    true, so it is refused (compared with the files as this run's choices compose them, without its value
    overrides). Settings that take one of a few words (`CHOICES`) are checked too.
    Raises ConfigError naming each offending dotted key, its value and what it may be.
    """
    problems = [problem for key, value, rule in _ruled(cfg, "") if (problem := _check(key, value, rule))]
    problems += _mistyped(cfg, _files_config())
    problems += [p for key, allowed in CHOICES.items() if (p := _choice(cfg, key, allowed))]
    problems += [f"{old} is now {new}: set {new}=..." for old, new in RENAMED.items()
                 if OmegaConf.select(cfg, old, default=_ABSENT) is not _ABSENT]  # fmt: skip
    if problems:
        raise ConfigError("invalid config: " + "; ".join(problems))


def _files_config() -> DictConfig | None:
    """This run's config as its config files give it: composed again with the run's config-group choices (the
    `+method=cot`, `llm=openai` of its command line) but none of its value overrides. None outside a Hydra app."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if not HydraConfig.initialized() or not GlobalHydra.instance().is_initialized():
        return None
    hydra_cfg = HydraConfig.get()
    groups = PROJECT_ROOT / "conf"
    parsed = OverridesParser.create().parse_overrides(list(hydra_cfg.overrides.task))
    choices = [o.input_line for o in parsed
               if not o.is_delete() and not o.key_or_group.startswith("hydra") and (groups / o.key_or_group).is_dir()]
    from hydra import compose

    return compose(config_name=hydra_cfg.job.config_name, overrides=choices)


def check_known(cfg: DictConfig) -> None:
    """For an entry point whose settings are all in its config files (reproduce.py): refuse a key they do not
    have (`+llm.api_key=...` would be accepted and ignored), naming where such a setting goes instead."""
    files = _files_config()
    unknown = [] if files is None else [k for k in _leaves(cfg) if OmegaConf.select(files, k, default=_ABSENT) is _ABSENT]
    if unknown:
        raise ConfigError(f"{files.get('task_name', 'this command')} has no setting {' or '.join(unknown)} (a row's "
                          "settings go in job_overrides=[...], API keys in the environment)")


_ABSENT = object()


def _leaves(node: DictConfig, prefix: str = "") -> Iterator[str]:
    for key in node:
        if key == "hydra" and not prefix:
            continue
        path = f"{prefix}{key}"
        child = node._get_node(key)
        if isinstance(child, DictConfig) and not OmegaConf.is_interpolation(node, key):
            yield from _leaves(child, f"{path}.")
        else:
            yield path


def _mistyped(cfg: DictConfig, files: DictConfig | None, prefix: str = "") -> list[str]:
    """Every key that is a boolean in the config files but holds something else (null aside) in the run."""
    if files is None:
        return []
    problems = []
    for key in files:
        if (key == "hydra" and not prefix) or key not in cfg or OmegaConf.is_missing(files, key):
            continue
        if OmegaConf.is_interpolation(files, key) or OmegaConf.is_interpolation(cfg, key):
            continue
        path, given, value = f"{prefix}{key}", files[key], cfg[key]
        if isinstance(given, DictConfig) and isinstance(value, DictConfig):
            problems += _mistyped(value, given, f"{path}.")
        elif isinstance(given, bool) and value is not None and not isinstance(value, bool):
            problems.append(f"{path}={value!r} must be true or false")
    return problems


def _choice(cfg: DictConfig, key: str, allowed: tuple[Any, ...]) -> str | None:
    value = OmegaConf.select(cfg, key, default=None)
    if value is None or any(value == a and type(value) is type(a) for a in allowed):
        return None
    return f"{key}={value!r} must be one of {', '.join(str(a).lower() if isinstance(a, bool) else a for a in allowed)}"


def _rule(key: str) -> Rule | None:
    if key in EXEMPT:
        return None
    return next((rule for rule in NUMBER_RULES if re.fullmatch(rule.pattern, key)), None)


def _ruled(node: DictConfig | ListConfig, prefix: str) -> Iterator[tuple[str, Any, Rule]]:
    """(dotted key, value, rule) for every ruled key under `node`; a `ks` list gives one per entry."""
    keys = list(node.keys()) if isinstance(node, DictConfig) else range(len(node))
    for key in keys:
        if (key == "hydra" and not prefix) or key in DECLARATIONS or OmegaConf.is_missing(node, key):
            continue
        path = f"{prefix}[{key}]" if isinstance(key, int) else f"{prefix}.{key}" if prefix else key
        rule = _rule(key) if isinstance(key, str) else None
        if rule is not None:
            value = node[key]
            if isinstance(value, ListConfig):
                yield from ((f"{path}[{i}]", item, rule) for i, item in enumerate(value))
            else:
                yield path, value, rule
        elif not OmegaConf.is_interpolation(node, key):  # an interpolated node is checked where it lives
            child = node[key]
            if isinstance(child, (DictConfig, ListConfig)):
                yield from _ruled(child, path)


def _check(key: str, value: Any, rule: Rule) -> str | None:
    if value is None and rule.nullable:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value >= rule.minimum:
        return None
    allowed = f"an integer >= {rule.minimum}" + (" or null" if rule.nullable else "")
    return f"{key}={value!r} must be {allowed} ({rule.meaning})"


T = TypeVar("T")


def complete(engine: Callable[..., T], key: str, **given: Any) -> T:
    """`engine` (a Hydra `_partial_` child, or a class) finished with what only the method holds. A value
    both the child's config and the method set is refused (`check_given`), not silently replaced by the
    method's."""
    check_given(key, getattr(engine, "keywords", {}), given)
    return engine(**given)


def check_given(key: str, settings: Iterable[str] | None, given: Iterable[str]) -> None:
    """Refuse a child (`method.<key>`) whose `settings` (its keywords: a `_partial_` child's config keys) set
    one of the names the method passes it (`given`). `complete` checks this as it finishes the child; a
    method's `check_settings` checks the same on the child's config, before anything is built."""
    both = sorted(set(settings or ()) & set(given))
    if both:
        raise ValueError(
            f"method.{key} sets {both}, which the method itself passes to it (its llm or retriever, or a "
            f"setting of the method shared with other parts): set them once, on the method, not in method.{key}"
        )


def apply_aids(cfg: DictConfig) -> str:
    """Merge the small-model overlay (`cfg.aids`, conf/aids/) into `cfg.method`, once: the overlay's block for
    this method (keyed by its registered name) when the overlay is on for this run. The method config holds its
    paper's settings; the aids (short token budgets, prefills, lenient parsing) live only in the overlay. Returns
    what the run records as `run.aids`: the overlay's name when it was applied, else "none"."""
    aids = cfg.get("aids")
    if aids is None or cfg.get("method") is None:
        return "none"
    if aids.get("applied") is not None:
        return str(aids.applied)
    when = str(aids.get("when", "never"))
    if when not in {"always", "bundled_llm", "never"}:
        raise ValueError(f"aids.when={when!r} must be always, bundled_llm or never")
    model = str(OmegaConf.select(cfg, "llm.model", default="") or "")
    on = when == "always" or (when == "bundled_llm" and model.startswith("pkg://"))
    from hydra.utils import get_class  # here: hydra.utils is slow to import and config.py is imported everywhere

    block = (aids.get("methods") or {}).get(get_class(cfg.method._target_).name) if on else None
    applied = str(aids.get("name", "aids")) if on else "none"
    with open_dict(cfg):
        if block is not None:
            cfg.method = OmegaConf.merge(cfg.method, block)
        cfg.aids.applied = applied
    return applied
