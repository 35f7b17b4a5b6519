"""Row records of the tables in warehouse/tables/summaries.py. Generated from the declarations in warehouse/tables/ by
`python -m holistic_dagster.cli.reference`: do not edit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class LeaderboardStatsRow:
    """A row of `leaderboard_stats`: Cross-model summaries of a suite version (written by the leaderboard and
    regressions assets). Every leaderboard cell with n and a seeded percentile-bootstrap 95% CI over its instances."""

    version: str
    family: str
    scenario: str
    metric: str
    perturbation: str
    model: str
    value: float | None
    n: int
    ci_low: float | None
    ci_high: float | None
    ci_note: str
    bootstrap_seed: int
    bootstrap_samples: int
    estimated: bool | None
    n_full: int | None


@dataclass(frozen=True, kw_only=True)
class WinRatesRow:
    """A row of `win_rates`: HELM's mean win rate per family (never across families): one headline column per
    scenario."""

    version: str
    family: str
    model: str
    mean_win_rate: float
    num_columns: int


@dataclass(frozen=True, kw_only=True)
class ComparisonsRow:
    """A row of `comparisons`: Model B against model A (e.g. a new revision against its predecessor) on the same
    instances: paired difference of means (b - a), bootstrap CI, permutation-test p-value, verdict at alpha."""

    version: str
    model_a: str
    model_b: str
    scenario: str
    family: str
    metric: str
    perturbation: str
    n: int
    mean_a: float
    mean_b: float
    diff: float
    ci_low: float | None
    ci_high: float | None
    p_value: float
    verdict: str
    alpha: float
    seed: int


@dataclass(frozen=True, kw_only=True)
class StabilityRow:
    """A row of `stability`: Output stability (asset `stability`): a seeded sample of a model's generation requests
    asked again past the completion cache, `repeats` times; agrees: the answer equals the stored completion's text."""

    version: str
    model: str
    scenario: str
    instance_id: str
    request_id: str
    repeat: int
    text: str
    agrees: bool
    error: str
    temperature: float


@dataclass(frozen=True, kw_only=True)
class AlertsRow:
    """A row of `alerts`: Graded regression alerts (resources/alerts.yaml, asset `alerts`): each rule's grade of each
    model against its baseline per scenario: critical | warning | ok, with the paired test behind it."""

    version: str
    level: str
    rule: str
    model: str
    baseline: str
    scenario: str
    family: str
    metric: str
    value: float | None
    baseline_value: float | None
    diff: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n: int
    threshold: str
    message: str
