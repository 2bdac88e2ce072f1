"""What a run returns to a sweeper: one metric, several (a multi-objective search), or a metric under a cost cap.

`optimized_metric` names keys of the run's metrics (a string, or a list for Optuna's multi-objective search);
`budget` ({metric: <cost key>, max: <value>, infeasible: <score>}) turns the first objective into "quality at a
cost": a run whose cost exceeds `max` returns `infeasible` for it (0 unless set), and says so, instead of its score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def objective(
    metrics: Mapping[str, float], optimized_metric: str | Sequence[str], budget: Mapping[str, Any] | None = None
) -> float | tuple[float, ...]:
    keys = [optimized_metric] if isinstance(optimized_metric, str) else list(optimized_metric)
    missing = [k for k in [*keys, *([budget["metric"]] if budget else [])] if k not in metrics]
    if missing:
        raise KeyError(f"optimized_metric / budget name metrics this run did not produce: {missing}")
    values = [float(metrics[k]) for k in keys]
    if budget:
        cost, cap = float(metrics[budget["metric"]]), float(budget["max"])
        if cost > cap:
            values[0] = float(budget.get("infeasible", 0.0))
            print(f"objective: {budget['metric']} {cost:.4g} > {cap:.4g}: {keys[0]} scored {values[0]} (infeasible)")
    return values[0] if isinstance(optimized_metric, str) else tuple(values)
