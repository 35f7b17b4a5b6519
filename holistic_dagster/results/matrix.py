"""A scenario's per-instance results as a models x items matrix of 0/1 (or scores in [0, 1]): what the efficient
evaluation fits and validates on (efficient/), read from the warehouse as the shared HELM Classic file is read from
disk."""

from __future__ import annotations

import numpy as np

from holistic_dagster.efficient.sequential import bounded
from holistic_dagster.efficient.validation import Matrix
from holistic_dagster.errors import HolisticError
from holistic_dagster.results.scores import original_scores
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import Instances


def scenario_matrix(warehouse: ResultStore, version: str, scenario: str, metric: str) -> Matrix:
    """Every model's value of `metric` (accuracy family, in [0, 1]) on each original test instance of the scenario in
    the suite version; NaN where a model has no value for an instance (it was evaluated on part of the draw)."""
    scores = original_scores(warehouse, version)
    part = scores[(scores["scenario"] == scenario) & (scores["family"] == "accuracy") & (scores["metric"] == metric)]
    if part.empty:
        raise HolisticError(
            f"no {metric} scores for scenario {scenario!r} in suite version {version!r}: evaluate models on it first"
        )
    wide = part.pivot_table(index="model", columns="instance_id", values="value", aggfunc="first")
    values = wide.to_numpy(float)
    if not bounded(values[~np.isnan(values)]):
        raise HolisticError(f"{scenario}: {metric} has values outside [0, 1]; the item response fit needs scores in it")
    return Matrix(list(wide.index), [str(c) for c in wide.columns], values, f"{version}/{scenario} ({metric})")


def full_draw_results(
    warehouse: ResultStore, version: str, scenario: str, metric: str, models: list[str] | tuple[str, ...] | None = None
) -> tuple[Matrix, list[str]]:
    """The models with a value of `metric` (accuracy family) on every original test instance of the scenario's
    draw, as a matrix over the draw (models evaluated efficiently are not among them), and the draw's instance ids.
    With `models`: those models, in that order (a fit made on them, made again)."""
    draw = Instances(warehouse).draw(version, scenario)
    scores = original_scores(warehouse, version)
    part = scores[(scores["scenario"] == scenario) & (scores["family"] == "accuracy") & (scores["metric"] == metric)]
    wide = part.pivot_table(index="model", columns="instance_id", values="value", aggfunc="first")
    wide = wide.reindex(columns=draw)
    complete = wide[wide.notna().all(axis=1)] if len(draw) else wide.iloc[0:0]
    if models is not None:
        missing = [m for m in models if m not in complete.index]
        if missing:
            raise HolisticError(
                f"{scenario}: the anchors were fitted on {missing}, whose results on the whole draw are gone: "
                "materialize its anchors again"
            )
        complete = complete.loc[list(models)]
    label = f"{version}/{scenario} ({metric})"
    return Matrix(list(complete.index), draw, complete.to_numpy(float).reshape(len(complete), len(draw)), label), draw
