"""The Python API: evaluate models on a suite and read the results as pandas DataFrames, what `holistic evaluate`
and `holistic leaderboard` do without the terminal. Public: these names keep their meaning within a minor version;
everything else in the package may change.

    from holistic_dagster import api

    results = api.evaluate(["smollm2-135m-instruct"], suite="v5")    # Dagster runs, as the CLI's
    results.leaderboard(family="accuracy")                            # a DataFrame: model, scenario, metric, ...
    results.query("SELECT model, avg(value) FROM scores WHERE metric = 'exact_match' GROUP BY ALL")

Paths left out are the environment's (settings.py: HOLISTIC_WAREHOUSE, the remembered data folders, ...)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from holistic_dagster.config.deployment import Deployment
from holistic_dagster.errors import HolisticError


@dataclass(frozen=True)
class Results:
    """One suite version's results in a warehouse."""

    deployment: Deployment
    suite: str

    @property
    def warehouse_path(self) -> Path:
        return self.deployment.warehouse_path

    def leaderboard(self, family: str | None = None) -> pd.DataFrame:
        """The `leaderboard` view's rows of the suite (one family, or all), with each cell's 95% interval and n
        (`leaderboard_stats`) where the summaries were computed."""
        from holistic_dagster.metrics import FAMILIES
        from holistic_dagster.results.leaderboard import leaderboard
        from holistic_dagster.warehouse.access import LeaderboardStats

        if family is not None and family not in FAMILIES:
            raise HolisticError(f"unknown metric family {family!r}: the families are {', '.join(FAMILIES)}")
        frame = leaderboard(self.deployment.warehouse(), self.suite, family)
        stats = LeaderboardStats(self.deployment.warehouse()).intervals(self.suite)
        keys = ["model", "scenario", "family", "metric", "perturbation"]
        frame["family"] = frame["family"].astype(str)
        return frame.merge(stats, on=keys, how="left")

    def scores(self, model: str | None = None, scenario: str | None = None) -> pd.DataFrame:
        """Per-instance scores (the `scores` view: one row per model x scenario x instance x family x metric)."""
        where, params = ["version = ?"], [self.suite]
        for column, value in (("model", model), ("scenario", scenario)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        return self.query(f"SELECT * FROM scores WHERE {' AND '.join(where)}", params)

    def query(self, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
        """Any read-only SQL over the warehouse (docs/reference/warehouse.md lists its tables and views)."""
        return self.deployment.warehouse().df(sql, params or [])


def _deployment(warehouse=None, data_dirs=None, catalog=None, models=None, max_eval_instances=None) -> Deployment:
    return Deployment.of(
        warehouse=warehouse, catalog=catalog, data_dirs=data_dirs, models=models, max_eval_instances=max_eval_instances
    )


def results(suite: str | None = None, *, warehouse: str | Path | None = None) -> Results:
    """The results of a suite version already in the warehouse (default: the newest suite)."""
    deployment = _deployment(warehouse)
    if not deployment.warehouse_path.exists():
        raise HolisticError(f"no warehouse at {deployment.warehouse_path}: evaluate a model first")
    return Results(deployment, suite or deployment.catalog().newest_version())


def evaluate(
    models: list[str],
    suite: str | None = None,
    *,
    warehouse: str | Path | None = None,
    data_dirs: list[str | Path] | None = None,
    catalog: str | Path | None = None,
    models_file: str | Path | None = None,
    max_cost: float | None = None,
    max_eval_instances: int | None = None,
    force: bool = False,
    announce=None,
) -> Results:
    """Evaluates registered models on a suite version (default: the newest) as Dagster runs, as
    `holistic evaluate` does: steps whose inputs are unchanged since their last run are skipped unless `force`;
    a priced model's budget is `max_cost` (else the suite's); `max_eval_instances` caps every scenario's sample
    (`--max-eval-instances`). announce(line): progress, one line per step. Paths left out are the environment's:
    the warehouse, data folders, catalog and model registry."""
    deployment = _deployment(warehouse, data_dirs, catalog, models_file, max_eval_instances)
    suite = suite or deployment.catalog().newest_version()
    deployment.catalog().suite(suite)  # a bad suite fails here, before anything runs
    registry = deployment.models()
    unknown = [m for m in models if m not in registry]
    if unknown:
        known = ", ".join(registry)
        raise HolisticError(f"unknown model(s) {unknown}: not in {deployment.models_path} (known: {known})")
    from holistic_dagster.defs import local  # Dagster: only when an evaluation runs

    local.evaluate(deployment, suite, models, announce or (lambda line: None), not force, max_cost)
    return Results(deployment, suite)
