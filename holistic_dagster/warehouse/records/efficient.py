"""Row records of the tables in warehouse/tables/efficient.py. Generated from the declarations in warehouse/tables/ by
`python -m holistic_dagster.cli.reference`: do not edit."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, kw_only=True)
class AnchorFitsRow:
    """A row of `anchor_fits`: Evaluation sized to the decision (efficient/). Per suite version and scenario, what the
    anchors were fitted on: the models with results on the scenario's whole draw (an item response model when there are
    at least 10 of them, else a random sample), with the fit's own leave-one-model-out validation."""

    version: str
    scenario: str
    metric: str
    method: str
    anchors: int
    n_full: int
    seed: int
    level: float
    models: str
    population_hash: str
    interval_scale: float | None
    ability_weight: float | None
    validation: str
    fitted_at: datetime


@dataclass(frozen=True, kw_only=True)
class AnchorInstancesRow:
    """A row of `anchor_instances`: The anchor instances of anchor_fits, each with the share of the full draw it stands
    for."""

    version: str
    scenario: str
    instance_id: str
    position: int
    weight: float


@dataclass(frozen=True, kw_only=True)
class PartialEvaluationsRow:
    """A row of `partial_evaluations`: A model evaluated on part of a scenario's draw: only the anchors (an efficient
    evaluation), or the first n instances of a seeded order (the sequential gate's batches). Written by the prompts
    stage; a full evaluation removes the row."""

    model: str
    version: str
    scenario: str
    n_evaluated: int
    n_full: int
    fit_models: str
    how: str


@dataclass(frozen=True, kw_only=True)
class EstimatesRow:
    """A row of `estimates`: Full-draw values estimated from the anchors a model answered, with their interval (the
    estimated cells of scenario_metrics; never used by paired tests, the gate or regressions)."""

    model: str
    version: str
    scenario: str
    family: str
    metric: str
    value: float
    ci_low: float
    ci_high: float
    level: float
    n_evaluated: int
    n_full: int
    method: str
    fit_models: str
