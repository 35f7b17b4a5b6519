"""resources/alerts.yaml: what graded regression alerts grade (rules with warning and critical thresholds against a
baseline) and where they are posted (the webhook's environment variable, never its URL). The file documents the
schema for its users; holistic_dagster.alerts grades and delivers."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from holistic_dagster.config.schema import read_yaml, validate
from holistic_dagster.errors import CatalogError
from holistic_dagster.metrics import FAMILIES, NOT_COMPARED, REFERENCE_FAMILIES, metric
from holistic_dagster.records import SLUG, Strict
from holistic_dagster.scenarios.spec import Family

Level = Literal["ok", "warning", "critical"]
LEVELS: tuple[Level, ...] = ("ok", "warning", "critical")  # in rising order
PREVIOUS = "previous"  # baseline: each model against its registry `previous` revision
MAIN = "main"  # metric: each scenario's main accuracy metric
DEFAULT_URL_ENV = "HOLISTIC_ALERT_WEBHOOK"
COMPARED_FAMILIES = tuple(f for f in FAMILIES if f not in NOT_COMPARED)  # families with paired per-instance values
PERCENTILE = {"p50": 50, "p95": 95}
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MetricThreshold(Strict):
    """Exactly one of: below / above (the candidate's mean), drop (worse than the baseline by more than x,
    and significantly so)."""

    # NaN would never be crossed (every comparison with it is false): a rule that cannot fire is refused
    below: float | None = Field(None, allow_inf_nan=False)
    # the candidate's mean above this (for a lower-is-better metric)
    above: float | None = Field(None, allow_inf_nan=False)
    # worse than the baseline by more than this, and significantly so
    drop: float | None = Field(None, ge=0.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _exactly_one(self) -> MetricThreshold:
        given = [k for k in ("below", "above", "drop") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of below, above, drop (found {', '.join(given) or 'none'})")
        return self


class LatencyThreshold(Strict):
    """The candidate's latency statistic over the baseline's is above `ratio`, and significantly slower."""

    # the candidate's statistic over the baseline's
    ratio: float = Field(ge=1.0)


def _check_thresholds(warning, critical) -> None:
    """A rule gives at least one threshold, and a critical one is at least as strict as the warning one (else the
    warning could never show)."""
    if warning is None and critical is None:
        raise ValueError("give a warning or a critical threshold (or both)")
    if warning is None or critical is None:
        return
    for key, stricter in (("below", min), ("above", max), ("drop", max), ("ratio", max)):
        w, c = getattr(warning, key, None), getattr(critical, key, None)
        if w is not None and c is not None and stricter(w, c) != c:
            raise ValueError(f"critical {key} {c:g} is less strict than warning {key} {w:g}")


class MetricRule(Strict):
    # a rule on a metric's value
    kind: Literal["metric"]
    name: str | None = None  # a short label; default "<family> <metric>"
    # the metric's family
    family: Family = "accuracy"
    # a metric's name, or `main`: each scenario's main accuracy metric
    metric: str = MAIN
    scenarios: tuple[str, ...] | None = None  # default: every scenario
    warning: MetricThreshold | None = None
    critical: MetricThreshold | None = None

    @model_validator(mode="after")
    def _valid(self) -> MetricRule:
        if self.family not in COMPARED_FAMILIES:
            raise ValueError(
                f"family {self.family} has no paired per-instance values to compare "
                f"(metric rules take: {', '.join(COMPARED_FAMILIES)})"
            )
        wanted = "accuracy" if self.family in REFERENCE_FAMILIES else self.family
        if self.metric == MAIN:
            if self.family not in REFERENCE_FAMILIES:
                raise ValueError(f"metric `main` is a scenario's main accuracy metric: name a {self.family} metric")
        else:
            try:
                spec = metric(self.metric)
            except CatalogError as e:
                raise ValueError(str(e)) from None
            if spec.family != wanted or not spec.per_instance:
                raise ValueError(f"metric {self.metric!r} has no per-instance {wanted} values to compare")
        _check_thresholds(self.warning, self.critical)
        return self

    @property
    def label(self) -> str:
        return self.name or f"{self.family} {self.metric}"


class LatencyRule(Strict):
    # a rule on request latency
    kind: Literal["latency"]
    name: str | None = None  # a short label; default "latency <statistic>"
    # the latency percentile compared
    statistic: Literal["p50", "p95"] = "p95"
    # default: every scenario
    scenarios: tuple[str, ...] | None = None
    warning: LatencyThreshold | None = None
    critical: LatencyThreshold | None = None

    @model_validator(mode="after")
    def _valid(self) -> LatencyRule:
        _check_thresholds(self.warning, self.critical)
        return self

    @property
    def label(self) -> str:
        return self.name or f"latency {self.statistic}"


class StabilityRule(Strict):
    """Output stability: the share of re-asked requests (asset `stability`) whose answer is the stored one,
    per instance, paired between candidate and baseline on the instances both were re-asked."""

    # a rule on output stability (the `stability` asset's re-asked requests)
    kind: Literal["stability"]
    name: str | None = None  # a short label; default "stability"
    # default: every scenario
    scenarios: tuple[str, ...] | None = None
    warning: MetricThreshold | None = None
    critical: MetricThreshold | None = None

    @model_validator(mode="after")
    def _valid(self) -> StabilityRule:
        if any(t is not None and t.above is not None for t in (self.warning, self.critical)):
            raise ValueError("agreement is better when higher: use below or drop, not above")
        _check_thresholds(self.warning, self.critical)
        return self

    @property
    def label(self) -> str:
        return self.name or "stability"


Rule = Annotated[MetricRule | LatencyRule | StabilityRule, Field(discriminator="kind")]


class WebhookSpec(Strict):
    url_env: str = DEFAULT_URL_ENV  # the NAME of the variable holding the URL, never the URL
    # the least severe finding that is posted
    min_level: Literal["warning", "critical"] = "warning"
    # seconds one post may take, as a whole
    timeout_s: float = Field(10.0, gt=0)

    @field_validator("url_env")
    @classmethod
    def _a_name(cls, v: str) -> str:
        if not ENV_NAME.match(v):  # the message never repeats the value: it may be the URL itself
            raise ValueError(
                "url_env is the NAME of the environment variable that holds the webhook URL (e.g. "
                f"{DEFAULT_URL_ENV}), never the URL itself: webhook URLs carry a token"
            )
        return v


class AlertsSpec(Strict):
    baseline: str = PREVIOUS  # `previous`, or a model's name
    # the rules each model is graded by (kind: metric, latency or stability)
    rules: tuple[Rule, ...] = ()
    # where failed checks are posted
    webhook: WebhookSpec = WebhookSpec()

    @field_validator("rules")
    @classmethod
    def _distinct_labels(cls, rules: tuple) -> tuple:
        labels = [r.label for r in rules]
        twice = sorted({x for x in labels if labels.count(x) > 1})
        if twice:
            raise ValueError(f"rules {twice} share a label: give them different `name`s (findings are keyed by it)")
        return rules

    @field_validator("baseline")
    @classmethod
    def _slug(cls, v: str) -> str:
        if not SLUG.match(v):
            raise ValueError(f"baseline {v!r} is neither `previous` nor a model name (a lower-case slug)")
        return v


def load_alerts(path: Path, optional: bool = False) -> AlertsSpec:
    """The alerts file, validated. A file that is named must exist; the deployment's default one is optional
    (`optional`: without it, baseline `previous`, no rules, the default webhook variable)."""
    path = Path(path)
    if optional and not path.exists():
        return AlertsSpec()
    data = read_yaml(path)  # names the file when it is missing or not YAML
    if data is not None and not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping with baseline, rules, webhook")
    return validate(AlertsSpec, data or {}, path)
