"""What the warehouse holds of evaluation sized to the decision: a scenario's fitted anchors (anchor_fits,
anchor_instances), a model's partial evaluation, and the estimated cells with their intervals (estimates)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from holistic_dagster.errors import HolisticError
from holistic_dagster.warehouse import ResultStore
from holistic_dagster.warehouse.access import (
    AnchorFits,
    AnchorInstances,
    Estimates,
    Instances,
    InstanceScores,
    PartialEvaluations,
    ScenarioMetrics,
)

if TYPE_CHECKING:
    from holistic_dagster.config.catalog import Catalog


@dataclass(frozen=True)
class AnchorSet:
    """A scenario's anchors as stored: instance ids in order, their weights, and the fit's facts."""

    version: str
    scenario: str
    metric: str
    instance_ids: tuple[str, ...]
    weights: tuple[float, ...]
    n_full: int
    method: str
    models: tuple[str, ...]
    level: float


def fit_facts(row: pd.Series) -> dict[str, Any]:
    return {
        "method": row["method"], "anchors": int(row["anchors"]), "n_full": int(row["n_full"]),
        "models": json.loads(row["models"]), "validation": json.loads(row["validation"]), "metric": row["metric"],
        "level": float(row["level"]),
    }  # fmt: skip


def anchor_fit_facts(warehouse: ResultStore, version: str, scenario: str) -> dict[str, Any]:
    """The stored fit of a scenario's anchors: method, anchors, n_full, models, validation, metric, level."""
    stored = AnchorFits(warehouse).where(version=version, scenario=scenario)
    if stored.empty:
        raise HolisticError(f"no anchors for {scenario!r} in suite version {version!r}: materialize them first")
    return fit_facts(stored.iloc[0])


def stored_anchors(warehouse: ResultStore, version: str, scenario: str) -> AnchorSet | None:
    fit = AnchorFits(warehouse).where(version=version, scenario=scenario)
    if fit.empty:
        return None
    rows = AnchorInstances(warehouse).where(order_by=("position",), version=version, scenario=scenario)
    f = fit.iloc[0]
    return AnchorSet(
        version, scenario, f["metric"], tuple(rows["instance_id"]), tuple(rows["weight"]), int(f["n_full"]),
        f["method"], tuple(json.loads(f["models"])), float(f["level"]),
    )  # fmt: skip


def partial_evaluation(warehouse: ResultStore, version: str, scenario: str, model: str) -> dict[str, Any] | None:
    """The partial_evaluations row of a model's scenario (None: evaluated on the whole draw)."""
    frame = PartialEvaluations(warehouse).where(model=model, version=version, scenario=scenario)
    return None if frame.empty else frame.iloc[0].to_dict()


def partial_evaluations(warehouse: ResultStore, version: str) -> pd.DataFrame:
    """Every model x scenario of the version evaluated efficiently: model, scenario, n_evaluated, n_full."""
    return PartialEvaluations(warehouse).where(version=version)


def estimates(warehouse: ResultStore, version: str) -> pd.DataFrame:
    """The version's estimated cells with their intervals (model, scenario, family, metric, value, ci_low, ...)."""
    return Estimates(warehouse).where(version=version)


def all_estimates(warehouse: ResultStore, catalog: Catalog) -> pd.DataFrame:
    """Every estimated main accuracy cell of every version (what the `complete_undecided` sensor weighs; an
    efficient evaluation estimates the other metrics too, which place no model)."""
    from holistic_dagster.results.leaderboard import main_metrics

    frame = Estimates(warehouse).accuracy()
    mains = {v: main_metrics(warehouse, catalog, v) for v in set(frame["version"])}
    main = [mains[v].get(s) == m for v, s, m in zip(frame["version"], frame["scenario"], frame["metric"])]
    return frame[pd.Series(main, index=frame.index, dtype=bool)]


def measured_accuracy(warehouse: ResultStore) -> pd.DataFrame:
    """Every measured (not estimated) accuracy cell: model, version, scenario, metric, value."""
    return ScenarioMetrics(warehouse).measured_accuracy()


def draw_ids(warehouse: ResultStore, version: str, scenario: str) -> list[str]:
    """The original test instances of a scenario's draw in the version, sorted."""
    return Instances(warehouse).draw(version, scenario)


def instance_values(
    warehouse: ResultStore, version: str, scenario: str, model: str, family: str, metric: str
) -> dict[str, float]:
    """{instance_id: value} of a model's metric on the scenario's original instances, whether it answered all of
    them or part (a partial evaluation's rows too: what the sequential gate reads batch by batch)."""
    return InstanceScores(warehouse).on_originals(version, scenario, model, family, metric)
