"""Evaluation sized to the decision (efficient/): anchor fits, partial evaluations and estimates."""

from __future__ import annotations

from holistic_dagster.warehouse.tables.base import Column, Table, glossed

ANCHOR_FITS = Table(
    "anchor_fits",
    "Evaluation sized to the decision (efficient/). Per suite version and scenario, what the anchors were fitted "
    "on: the models with results on the scenario's whole draw (an item response model when there are at least 10 of "
    "them, else a random sample), with the fit's own leave-one-model-out validation.",
    key=("version", "scenario"),
    columns=(
        *glossed("VARCHAR", "version", "scenario"),
        Column("metric", "VARCHAR", "the metric estimated: the scenario's main accuracy metric"),
        Column("method", "VARCHAR", "irt | random sample"),
        Column("anchors", "INTEGER", "instances a model evaluated efficiently answers"),
        *glossed("INTEGER", "n_full", "seed"),
        Column("level", "DOUBLE", "the estimates' interval level"),
        Column("models", "JSON", "the models fitted on (each with results on every instance)"),
        Column("population_hash", "VARCHAR", "a hash of the scores fitted on: new full results make the fit stale"),
        Column("interval_scale", "DOUBLE", "irt: the conformal quantile of |error| / standard error", null=True),
        Column(
            "ability_weight",
            "DOUBLE",
            "irt: how much of the item response model's ability difference is kept",
            null=True,
        ),
        Column("validation", "JSON", "leave-one-model-out on the population: mae, mae_random, coverage, n"),
        Column("fitted_at", "TIMESTAMP"),
    ),
)

ANCHOR_INSTANCES = Table(
    "anchor_instances",
    "The anchor instances of anchor_fits, each with the share of the full draw it stands for.",
    key=("version", "scenario", "instance_id"),
    columns=(
        *glossed("VARCHAR", "version", "scenario", "instance_id"),
        Column("position", "INTEGER", "its place among the anchors (the order estimates read them in)"),
        Column("weight", "DOUBLE", "the share of the full draw it stands for (1 / (its chance x draw size))"),
    ),
)

PARTIAL_EVALUATIONS = Table(
    "partial_evaluations",
    "A model evaluated on part of a scenario's draw: only the anchors (an efficient evaluation), or the first n "
    "instances of a seeded order (the sequential gate's batches). Written by the prompts stage; a full evaluation "
    "removes the row.",
    key=("model", "version", "scenario"),
    columns=(
        *glossed("VARCHAR", "model", "version", "scenario"),
        Column("n_evaluated", "INTEGER", "original test instances answered (the anchors)"),
        Column("n_full", "INTEGER", "original test instances in the full draw"),
        Column("fit_models", "JSON", "the models the anchors were fitted on ([] for a sample)"),
        Column(
            "how",
            "VARCHAR",
            "anchors (an efficient evaluation) | sample (a sequential gate's batch: the first n of a seeded order)",
            default="'anchors'",
        ),
    ),
)

ESTIMATES = Table(
    "estimates",
    "Full-draw values estimated from the anchors a model answered, with their interval (the estimated cells of "
    "scenario_metrics; never used by paired tests, the gate or regressions).",
    key=("model", "version", "scenario", "family", "metric"),
    columns=(
        *glossed("VARCHAR", "model", "version", "scenario", "family", "metric"),
        Column("value", "DOUBLE"),
        Column("ci_low", "DOUBLE", "the interval at `level`, as validated on the population"),
        Column("ci_high", "DOUBLE", "the interval at `level`, as validated on the population"),
        Column("level", "DOUBLE"),
        *glossed("INTEGER", "n_evaluated", "n_full"),
        Column(
            "method",
            "VARCHAR",
            "irt | random sample | stratified sample (a model beyond the population, or a metric other than "
            "the main one)",
        ),
        Column("fit_models", "JSON", "the models the estimate was fitted on"),
    ),
)
