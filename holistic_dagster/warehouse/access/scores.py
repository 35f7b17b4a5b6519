"""The scores' accessors (tables/core.py declares the tables): per-instance scores and each scenario's aggregates."""

from __future__ import annotations

import pandas as pd

from holistic_dagster.warehouse.access.base import Accessor, among
from holistic_dagster.warehouse.records.core import InstanceScoresRow, ScenarioMetricsRow
from holistic_dagster.warehouse.tables.core import INSTANCE_SCORES, SCENARIO_METRICS


class InstanceScores(Accessor[InstanceScoresRow]):
    """`instance_scores`: each evaluated instance's score per metric."""

    table = INSTANCE_SCORES

    def models(self, version: str) -> set[str]:
        """The models a version has scores of."""
        return set(self._df("SELECT DISTINCT model FROM instance_scores WHERE version = ?", [version])["model"])

    def scored_originals(self, version: str) -> pd.DataFrame:
        """scenario, instance_id: every evaluated original some model was scored on."""
        return self._df(
            "SELECT DISTINCT i.scenario, i.instance_id FROM instances i JOIN instance_scores s "
            "USING (version, scenario, instance_id) WHERE i.version = ? AND i.split = 'test' AND i.perturbation = ''",
            [version],
        )

    def full_partitions(self, version: str) -> pd.DataFrame:
        """model, scenario: every partition with scores on its whole draw (not a partial evaluation), in order."""
        return self._df(
            "SELECT DISTINCT model, scenario FROM instance_scores s WHERE version = ? AND NOT EXISTS (SELECT 1 FROM "
            "partial_evaluations p WHERE p.model = s.model AND p.version = s.version AND p.scenario = s.scenario) "
            "ORDER BY model, scenario",
            [version],
        )

    def values(self, version: str, scenario: str, model: str, perturbation: str) -> pd.DataFrame:
        """instance_id, metric, family, value: a model's per-instance scores on a scenario ('' unperturbed,
        'worst' the worst case over perturbations)."""
        return self._df(
            "SELECT instance_id, metric, family, value FROM instance_scores WHERE version = ? AND scenario = ? "
            "AND model = ? AND perturbation = ?",
            [version, scenario, model, perturbation],
        )

    def of_instances(self, version: str, instances: list[str]) -> list[InstanceScoresRow]:
        """Every score of the instances named ("scenario<US>instance id" keys), by model, instance, family, metric
        and perturbation."""
        return self.table.records(
            self._df(
                f"SELECT * FROM instance_scores WHERE version = ? AND {among('scenario', 'instance_id')} "
                "ORDER BY model, instance_id, family, metric, perturbation",
                [version, instances],
            )
        )

    def worse(self, version: str, scenario: str, family: str, metric: str, baseline: str, candidate: str,
              lower_is_better: bool) -> pd.DataFrame:  # fmt: skip
        """instance_id, input, baseline_prediction, candidate_prediction, size: the originals where the candidate
        scored worse than the baseline on an unperturbed metric, and by how much."""
        worse = "c.value > b.value" if lower_is_better else "c.value < b.value"
        return self._df(
            "SELECT i.instance_id, i.input, b.prediction AS baseline_prediction, "
            "c.prediction AS candidate_prediction, abs(c.value - b.value) AS size FROM instance_scores b "
            "JOIN instance_scores c USING (version, scenario, instance_id, family, metric, perturbation) "
            "JOIN instances i USING (version, scenario, instance_id) "
            "WHERE b.version = ? AND b.scenario = ? AND b.family = ? AND b.metric = ? AND b.perturbation = '' "
            f"AND b.model = ? AND c.model = ? AND i.split = 'test' AND i.perturbation = '' AND {worse}",
            [version, scenario, family, metric, baseline, candidate],
        )

    def metrics_of_instance(self, version: str, scenario: str, model: str, instance_id: str) -> list[str]:
        """family/metric of every score a model has on an instance, sorted."""
        frame = self._df(
            "SELECT DISTINCT family || '/' || metric AS m FROM instance_scores WHERE model = ? AND version = ? "
            "AND scenario = ? AND instance_id = ? ORDER BY 1",
            [model, version, scenario, instance_id],
        )
        return [str(m) for m in frame["m"]]

    def on_full_draws(self, version: str, models: list[str] | None = None) -> pd.DataFrame:
        """model, scenario, instance_id, family, metric, perturbation ('' or 'worst'), value: the scores of the
        version's evaluated originals (of the models named, or all), but a model's scenario evaluated in part
        (partial_evaluations: only its anchors, or a sample, answered)."""
        sql = (
            "SELECT s.model, s.scenario, s.instance_id, s.family, s.metric, s.perturbation, s.value "
            "FROM instance_scores s JOIN instances i USING (version, scenario, instance_id) "
            "WHERE s.version = ? AND i.perturbation = '' AND i.split = 'test' AND NOT EXISTS (SELECT 1 FROM "
            "partial_evaluations p WHERE p.model = s.model AND p.version = s.version AND p.scenario = s.scenario)"
        )
        if models is None:
            return self._df(sql, [version])
        return self._df(sql + " AND s.model IN (SELECT unnest(?::VARCHAR[]))", [version, models])

    def on_originals(self, version: str, scenario: str, model: str, family: str, metric: str) -> dict[str, float]:
        """{instance_id: value} of a model's metric (unperturbed) on the scenario's evaluated originals, all it
        answered or part of them (a partial evaluation's rows too)."""
        frame = self._df(
            "SELECT s.instance_id, s.value FROM instance_scores s JOIN instances i USING (version, scenario, "
            "instance_id) WHERE s.model = ? AND s.version = ? AND s.scenario = ? AND s.family = ? AND s.metric = ? "
            "AND s.perturbation = '' AND i.perturbation = '' AND i.split = 'test'",
            [model, version, scenario, family, metric],
        )
        return dict(zip(frame["instance_id"], frame["value"].astype(float)))

    def with_instances(self, version: str, scenario: str, model: str) -> pd.DataFrame:
        """instance_id, metric, family, value, perturbation, instance_perturbation (the scored instance's own)."""
        return self._df(
            "SELECT s.instance_id, s.metric, s.family, s.value, s.perturbation, "
            "i.perturbation AS instance_perturbation "
            "FROM instance_scores s JOIN instances i USING (version, scenario, instance_id) "
            "WHERE s.model = ? AND s.version = ? AND s.scenario = ?",
            [model, version, scenario],
        )


class ScenarioMetrics(Accessor[ScenarioMetricsRow]):
    """`scenario_metrics`: each scenario's aggregate per metric (measured, or estimated from anchors)."""

    table = SCENARIO_METRICS

    def notes(self, version: str) -> pd.DataFrame:
        """model, scenario, family, metric, perturbation, note: why each of the version's aggregates has no value
        (empty where it has one)."""
        return self._df(
            "SELECT model, scenario, family, metric, perturbation, note FROM scenario_metrics WHERE version = ?",
            [version],
        )

    def measured_accuracy(self) -> pd.DataFrame:
        """model, version, scenario, metric, value: every measured (not estimated) unperturbed accuracy aggregate."""
        return self._df(
            "SELECT model, version, scenario, metric, value FROM scenario_metrics WHERE family = 'accuracy' "
            "AND perturbation = '' AND NOT coalesce(estimated, false)",
            [],
        )

    def unperturbed(self, version: str, scenario: str, model: str) -> pd.DataFrame:
        """metric, family, value: a model's unperturbed aggregates on a scenario that have a value."""
        return self._df(
            "SELECT metric, family, value FROM scenario_metrics WHERE version = ? AND scenario = ? AND model = ? "
            "AND perturbation = '' AND value IS NOT NULL",
            [version, scenario, model],
        )

    def provenance(self, version: str, scenario: str, model: str) -> pd.DataFrame:
        """Every column of the provenance rows a model's aggregates on a scenario were made under."""
        return self._df(
            "SELECT p.* FROM provenance p WHERE provenance_id IN (SELECT provenance_id FROM scenario_metrics "
            "WHERE version = ? AND scenario = ? AND model = ?)",
            [version, scenario, model],
        )

    def models(self, version: str) -> set[str]:
        """The models a version has aggregates of."""
        return set(self._df("SELECT DISTINCT model FROM scenario_metrics WHERE version = ?", [version])["model"])

    def scenarios(self, version: str, model: str) -> set[str]:
        """The scenarios a model has aggregates of in a version."""
        frame = self._df(
            "SELECT DISTINCT scenario FROM scenario_metrics WHERE model = ? AND version = ?", [model, version]
        )
        return set(frame["scenario"])

    def defined(self, version: str, scenario: str, model: str) -> pd.DataFrame:
        """metric, value: the aggregates that have a value (an undefined one has its note instead)."""
        return self._df(
            "SELECT metric, value FROM scenario_metrics WHERE model = ? AND version = ? AND scenario = ? "
            "AND value IS NOT NULL",
            [model, version, scenario],
        )

    def per_family(self, version: str, scenario: str, model: str) -> pd.DataFrame:
        """family, num_rows, num_values, num_unexplained (no value and no note): one row per family it has."""
        return self._df(
            "SELECT family, count(*) AS num_rows, count(value) AS num_values, "
            "count(*) FILTER (WHERE value IS NULL AND note = '') AS num_unexplained "
            "FROM scenario_metrics WHERE model = ? AND version = ? AND scenario = ? GROUP BY family",
            [model, version, scenario],
        )

    def undefined_with_note(self, version: str, scenario: str, model: str, family: str, note: str) -> int:
        """How many of a family's aggregates have no value and a note that starts with `note`."""
        frame = self._df(
            "SELECT count(*) AS n FROM scenario_metrics WHERE model = ? AND version = ? AND scenario = ? "
            "AND family = ? AND value IS NULL AND starts_with(note, ?)",
            [model, version, scenario, family, note],
        )
        return int(frame["n"].iat[0])

    def values_per_cell(self, version: str) -> pd.DataFrame:
        """model, scenario, num_values: how many aggregates with a value each model has on each scenario."""
        return self._df(
            "SELECT model, scenario, count(value) AS num_values FROM scenario_metrics WHERE version = ? GROUP BY ALL",
            [version],
        )

    def measured_in_full(self, version: str, scenario: str, model: str) -> bool:
        """Whether the model's aggregates on the scenario were measured on its whole draw (not estimated, and not
        from a partial evaluation)."""
        frame = self._df(
            "SELECT count(*) AS n FROM scenario_metrics m WHERE model = ? AND version = ? AND scenario = ? "
            "AND NOT coalesce(estimated, false) AND NOT EXISTS (SELECT 1 FROM partial_evaluations p WHERE "
            "p.model = m.model AND p.version = m.version AND p.scenario = m.scenario)",
            [model, version, scenario],
        )
        return bool(frame["n"].iat[0])
