"""What a run returns to a sweeper: one metric, several (a multi-objective search), or a metric under a cost cap.

`optimized_metric` names keys of the run's metrics (a string, or a list for Optuna's multi-objective search);
`budget` ({metric: <cost key>, max: <value>, infeasible: <score>}) turns the first objective into "quality at a
cost": a run whose cost exceeds `max` returns `infeasible` for it (0 unless set), and says so, instead of its score.

CRAG's rates carry their judge (`crag/score@gpt-3.5-turbo`, `crag/score@exact`; `hoprag.metrics.crag`), so an
objective names one exactly, or ends in `@*` for whichever judged variant the run has (`crag/score@*`: the run
must have exactly one, which is printed). A plain `crag/score` is not a metric: it is refused with the judged
names the run has, never read as one of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

ANY_JUDGE = "@*"


def resolve(metrics: Mapping[str, float], key: str) -> str:
    """`key` itself, or for `<name>@*` the run's one `<name>@<judge>`; KeyError naming what the run has."""
    if not key.endswith(ANY_JUDGE):
        if key not in metrics:
            judged = [k for k in metrics if k.startswith(f"{key}@")]
            hint = f" (its metrics name their judge: {judged}; name one, or {key}{ANY_JUDGE})" if judged else ""
            raise KeyError(f"optimized_metric / budget name a metric this run did not produce: {key!r}{hint}")
        return key
    stem = key.removesuffix("*")
    found = sorted(k for k in metrics if k.startswith(stem) and "/" not in k[len(stem) :])
    if len(found) != 1:
        raise KeyError(
            f"{key!r} needs exactly one judged variant of {stem[:-1]!r} in this run's metrics, found {found}"
        )
    print(f"objective: {key} is {found[0]}")
    return found[0]


def objective(
    metrics: Mapping[str, float], optimized_metric: str | Sequence[str], budget: Mapping[str, Any] | None = None
) -> float | tuple[float, ...]:
    keys = [optimized_metric] if isinstance(optimized_metric, str) else list(optimized_metric)
    keys = [resolve(metrics, k) for k in keys]
    cost_key = resolve(metrics, budget["metric"]) if budget else None
    values = [float(metrics[k]) for k in keys]
    if budget:
        cost, cap = float(metrics[cost_key]), float(budget["max"])
        if cost > cap:
            values[0] = float(budget.get("infeasible", 0.0))
            print(f"objective: {cost_key} {cost:.4g} > {cap:.4g}: {keys[0]} scored {values[0]} (infeasible)")
    return values[0] if isinstance(optimized_metric, str) else tuple(values)
