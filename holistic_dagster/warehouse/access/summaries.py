"""The accessors of the summaries' tables, the HELM imports', the provenance's and efficient evaluation's
(tables/summaries.py, operations.py, core.py and efficient.py declare them): each table's SQL in one class."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.warehouse.access.base import Accessor
from holistic_dagster.warehouse.records.core import ProvenanceRow
from holistic_dagster.warehouse.records.efficient import (
    AnchorFitsRow,
    AnchorInstancesRow,
    EstimatesRow,
    PartialEvaluationsRow,
)
from holistic_dagster.warehouse.records.operations import ImportedRunsRow
from holistic_dagster.warehouse.records.summaries import ComparisonsRow, LeaderboardStatsRow, StabilityRow, WinRatesRow
from holistic_dagster.warehouse.tables.core import PROVENANCE
from holistic_dagster.warehouse.tables.efficient import ANCHOR_FITS, ANCHOR_INSTANCES, ESTIMATES, PARTIAL_EVALUATIONS
from holistic_dagster.warehouse.tables.operations import IMPORTED_RUNS
from holistic_dagster.warehouse.tables.summaries import COMPARISONS, LEADERBOARD_STATS, STABILITY, WIN_RATES


class LeaderboardStats(Accessor[LeaderboardStatsRow]):
    """`leaderboard_stats`: the leaderboard's cells with their statistics."""

    table = LEADERBOARD_STATS

    def computed(self, version: str) -> bool:
        """Whether the version's summaries were computed (it has cells here)."""
        frame = self._df("SELECT count(*) AS n FROM leaderboard_stats WHERE version = ?", [version])
        return bool(frame["n"].iat[0])

    def scenarios(self, version: str) -> set[str]:
        """The scenarios a version's leaderboard has cells of."""
        frame = self._df("SELECT DISTINCT scenario FROM leaderboard_stats WHERE version = ?", [version])
        return set(frame["scenario"])

    def intervals(self, version: str) -> pd.DataFrame:
        """model, scenario, family, metric, perturbation, ci_low, ci_high, ci_note: each cell's interval."""
        return self._df(
            "SELECT model, scenario, family, metric, perturbation, ci_low, ci_high, ci_note FROM leaderboard_stats "
            "WHERE version = ?",
            [version],
        )


class AnchorFits(Accessor[AnchorFitsRow]):
    """`anchor_fits`: the anchors fitted for a scenario and the population they were fitted on."""

    table = ANCHOR_FITS


class AnchorInstances(Accessor[AnchorInstancesRow]):
    """`anchor_instances`: a scenario's anchors, each with its weight."""

    table = ANCHOR_INSTANCES


class PartialEvaluations(Accessor[PartialEvaluationsRow]):
    """`partial_evaluations`: a model's scenarios evaluated on part of the draw (anchors, or a sample)."""

    table = PARTIAL_EVALUATIONS


class Estimates(Accessor[EstimatesRow]):
    """`estimates`: the cells estimated from a partial evaluation, with their intervals."""

    table = ESTIMATES

    def accuracy(self) -> pd.DataFrame:
        """model, version, scenario, metric, value, ci_low, ci_high: every estimated accuracy cell of every version."""
        return self._df(
            "SELECT model, version, scenario, metric, value, ci_low, ci_high FROM estimates WHERE family = 'accuracy'",
            [],
        )


class WinRates(Accessor[WinRatesRow]):
    """`win_rates`: each model's mean win rate per family."""

    table = WIN_RATES


class Comparisons(Accessor[ComparisonsRow]):
    """`comparisons`: each model paired with its baseline, per scenario, family and metric."""

    table = COMPARISONS


class Stability(Accessor[StabilityRow]):
    """`stability`: the same prompts asked again, each answer against the stored one."""

    table = STABILITY

    def agreement(self, version: str, models: list[str]) -> pd.DataFrame:
        """model, scenario, instance_id, value: per instance, the share of its re-asked answers equal to the stored."""
        return self._df(
            "SELECT model, scenario, instance_id, avg(agrees::DOUBLE) AS value FROM stability "
            "WHERE version = ? AND error = '' AND model IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL",
            [version, models],
        )


class ImportedRuns(Accessor[ImportedRunsRow]):
    """`imported_runs`: the HELM runs a version's partitions were imported from."""

    table = IMPORTED_RUNS

    def scenarios(self, version: str) -> pd.DataFrame:
        """scenario, main_metric, method, description: each imported scenario as its runs describe it."""
        return self._df(
            "SELECT scenario, any_value(main_metric) AS main_metric, any_value(adapter_method) AS method, "
            "any_value(description) AS description FROM imported_runs WHERE version = ? GROUP BY scenario "
            "ORDER BY scenario",
            [version],
        )

    def models(self, version: str) -> set[str]:
        """The models of the version whose results were imported."""
        return set(self._df("SELECT DISTINCT model FROM imported_runs WHERE version = ?", [version])["model"])

    def run_for(self, version: str, scenario: str, model: str, subset: str) -> pd.DataFrame:
        """run_name, folder, files: the run a partition came from (the subset's, where there are several)."""
        return self._df(
            "SELECT run_name, folder, files FROM imported_runs WHERE version = ? AND scenario = ? AND model = ? "
            "ORDER BY subset <> ?, run_name LIMIT 1",
            [version, scenario, model, subset],
        )


class Provenance(Accessor[ProvenanceRow]):
    """`provenance`: how each step's rows were made (backend, model, decoding, hardware, run)."""

    table = PROVENANCE
