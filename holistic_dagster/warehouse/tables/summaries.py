"""Cross-model summaries of a suite version: leaderboard statistics, win rates, comparisons, stability and
graded alerts."""

from __future__ import annotations

from holistic_dagster.warehouse.tables.base import Column, Table, glossed

LEADERBOARD_STATS = Table(
    "leaderboard_stats",
    "Cross-model summaries of a suite version (written by the leaderboard and regressions assets). Every "
    "leaderboard cell with n and a seeded percentile-bootstrap 95% CI over its instances.",
    key=("version", "family", "scenario", "metric", "perturbation", "model"),
    columns=(
        *glossed("VARCHAR", "version", "family", "scenario", "metric", "perturbation", "model"),
        Column("value", "DOUBLE", null=True),
        Column("n", "INTEGER"),
        Column("ci_low", "DOUBLE", "ci_note: why a cell has no CI", null=True),
        Column("ci_high", "DOUBLE", "ci_note: why a cell has no CI", null=True),
        Column("ci_note", "VARCHAR", "ci_note: why a cell has no CI"),
        *glossed("INTEGER", "bootstrap_seed", "bootstrap_samples"),
        Column(
            "estimated",
            "BOOLEAN",
            "an estimated cell: value and CI from the anchors (table estimates), n the instances answered",
            default="false",
            added=True,
        ),
        Column("n_full", "INTEGER", "estimated: the full draw's instances", added=True),
    ),
)

WIN_RATES = Table(
    "win_rates",
    "HELM's mean win rate per family (never across families): one headline column per scenario.",
    key=("version", "family", "model"),
    columns=(
        *glossed("VARCHAR", "version", "family", "model"),
        Column("mean_win_rate", "DOUBLE"),
        Column("num_columns", "INTEGER"),
    ),
)

COMPARISONS = Table(
    "comparisons",
    "Model B against model A (e.g. a new revision against its predecessor) on the same instances: paired difference "
    "of means (b - a), bootstrap CI, permutation-test p-value, verdict at alpha.",
    key=("version", "model_a", "model_b", "scenario", "family", "metric", "perturbation"),
    columns=(
        *glossed("VARCHAR", "version", "model_a", "model_b", "scenario", "family", "metric", "perturbation"),
        Column("n", "INTEGER"),
        *glossed("DOUBLE", "mean_a", "mean_b", "diff"),
        Column("ci_low", "DOUBLE", null=True),
        Column("ci_high", "DOUBLE", null=True),
        Column("p_value", "DOUBLE"),
        Column("verdict", "VARCHAR"),
        Column("alpha", "DOUBLE"),
        Column("seed", "INTEGER"),
    ),
)

STABILITY = Table(
    "stability",
    "Output stability (asset `stability`): a seeded sample of a model's generation requests asked again past the "
    "completion cache, `repeats` times; agrees: the answer equals the stored completion's text.",
    key=("version", "model", "request_id", "repeat"),
    columns=(
        *glossed("VARCHAR", "version", "model", "scenario", "instance_id", "request_id"),
        Column("repeat", "INTEGER"),
        Column("text", "VARCHAR"),
        Column("agrees", "BOOLEAN"),
        Column("error", "VARCHAR"),
        Column("temperature", "DOUBLE"),
    ),
)

ALERTS = Table(
    "alerts",
    "Graded regression alerts (resources/alerts.yaml, asset `alerts`): each rule's grade of each model against its "
    "baseline per scenario: critical | warning | ok, with the paired test behind it.",
    key=("version", "rule", "model", "scenario", "metric"),
    columns=(
        *glossed("VARCHAR", "version", "level", "rule", "model", "baseline", "scenario", "family", "metric"),
        Column("value", "DOUBLE", null=True),
        Column("baseline_value", "DOUBLE", null=True),
        Column("diff", "DOUBLE", null=True),
        Column("ratio", "DOUBLE", null=True),
        Column("ci_low", "DOUBLE", null=True),
        Column("ci_high", "DOUBLE", null=True),
        Column("p_value", "DOUBLE", null=True),
        Column("n", "INTEGER"),
        *glossed("VARCHAR", "threshold", "message"),
    ),
)
