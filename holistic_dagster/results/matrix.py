"""A scenario's per-instance results as a models x items matrix of 0/1: what the efficient evaluation fits and
validates on (efficient/), read from the warehouse as the shared HELM Classic file is read from disk."""

from __future__ import annotations

import numpy as np

from holistic_dagster.efficient.validation import Matrix
from holistic_dagster.errors import HolisticError
from holistic_dagster.results.scores import original_scores
from holistic_dagster.warehouse import Warehouse


def scenario_matrix(warehouse: Warehouse, version: str, scenario: str, metric: str) -> Matrix:
    """Every model's value of `metric` (accuracy family, 0/1) on each original test instance of the scenario in
    the suite version; NaN where a model has no value for an instance (it was evaluated on part of the draw)."""
    scores = original_scores(warehouse, version)
    part = scores[(scores["scenario"] == scenario) & (scores["family"] == "accuracy") & (scores["metric"] == metric)]
    if part.empty:
        raise HolisticError(
            f"no {metric} scores for scenario {scenario!r} in suite version {version!r}: evaluate models on it first"
        )
    wide = part.pivot_table(index="model", columns="instance_id", values="value", aggfunc="first")
    values = wide.to_numpy(float)
    if not np.isin(values[~np.isnan(values)], (0.0, 1.0)).all():
        raise HolisticError(f"{scenario}: {metric} is not a 0/1 metric; the item response fit needs right or wrong")
    return Matrix(list(wide.index), [str(c) for c in wide.columns], values, f"{version}/{scenario} ({metric})")
