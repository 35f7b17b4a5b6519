"""Graded regression alerts: each model against its baseline (its registry `previous` revision, or one named
model), per rule and scenario, graded critical, warning or ok. No
Dagster here: the alerts asset's checks call these functions; alerts.delivery posts what they find.

resources/alerts.yaml says what is graded (and documents the schema for its users):
- metric rules: the candidate's per-instance values against the baseline's on the same instances
  (metrics.statistics.paired_test at the suite's regression_alpha). `below` / `above` judge the candidate's
  mean alone; `drop` needs both the size (worse by more than x, in the metric's bad direction) and the
  paired test's verdict "worse": a large drop on a handful of instances is noise, not a regression.
- latency rules: p50 or p95 of per-request latency_s on the requests both models answered, as a ratio
  candidate / baseline; significance from the paired permutation test on the per-request differences.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from holistic_dagster.alerts.delivery import Alert
from holistic_dagster.config.alerts import (
    MAIN,
    PERCENTILE,
    PREVIOUS,
    AlertsSpec,
    LatencyRule,
    LatencyThreshold,
    Level,
    MetricRule,
    MetricThreshold,
    StabilityRule,
)
from holistic_dagster.config.models import ModelSpec
from holistic_dagster.errors import CatalogError
from holistic_dagster.metrics import lower_is_better
from holistic_dagster.metrics.statistics import PairedResult, bootstrap_statistic_ci, paired_test
from holistic_dagster.results.requests import latencies as request_latencies
from holistic_dagster.results.requests import stability_agreement
from holistic_dagster.results.scores import original_scores
from holistic_dagster.warehouse import ResultStore


@dataclass(frozen=True)
class Finding:
    """One rule's grade of one model against its baseline on one scenario. Metric rules: value and
    baseline_value are means over the paired instances, diff = value - baseline_value, its bootstrap 95% CI.
    Latency rules: value and baseline_value are the statistic (seconds) over the paired requests, ratio =
    value / baseline_value, its bootstrap 95% CI. p_value: the paired permutation test."""

    level: Level
    rule: str
    model: str
    baseline: str
    scenario: str
    family: str
    metric: str  # a metric's name, or latency_p50 / latency_p95
    value: float
    baseline_value: float
    diff: float | None
    ratio: float | None
    ci_low: float
    ci_high: float
    p_value: float
    n: int  # paired instances (metric rules) or requests (latency rules)
    threshold: str  # the threshold that set the level ('' when ok)
    message: str

    def alert(self) -> Alert:
        return Alert(self.level, f"{self.model} vs {self.baseline} on {self.scenario}: {self.rule}", self.message)


def baselines(spec: AlertsSpec, models: Mapping[str, ModelSpec]) -> dict[str, str]:
    """{candidate: its baseline}: with `previous`, the models that name a previous revision (which need not
    be registered any more: its scores stay in the warehouse); with a named baseline, every other model."""
    if spec.baseline == PREVIOUS:
        return {name: m.previous for name, m in models.items() if m.previous}
    if spec.baseline not in models:
        raise CatalogError(
            f"alerts: baseline {spec.baseline!r} is not in the model registry (known: {', '.join(models)})"
        )
    return {name: spec.baseline for name in models if name != spec.baseline}


def evaluate_alerts(
    warehouse: ResultStore,
    version: str,
    spec: AlertsSpec,
    models: Mapping[str, ModelSpec],
    alpha: float,
    main_metric: Mapping[str, str],
) -> list[Finding]:
    """Every rule's findings for every model with a baseline, on each scenario both have values for (ok ones
    included: they show what was examined), ordered by model, rule and scenario."""
    pairs = baselines(spec, models)
    if not pairs or not spec.rules:
        return []
    involved = sorted(set(pairs) | set(pairs.values()))
    scores: dict = {}
    latencies: dict = {}
    if any(r.kind == "metric" for r in spec.rules):
        rows = original_scores(warehouse, version, involved)
        scores = {k: g for k, g in rows.groupby(["scenario", "family", "metric"])}
    if any(r.kind == "latency" for r in spec.rules):
        latencies = {k: g for k, g in request_latencies(warehouse, version, involved).groupby("scenario")}
    agreement = {}
    if any(r.kind == "stability" for r in spec.rules):
        agreement = {k: g for k, g in stability_agreement(warehouse, version, involved).groupby("scenario")}
    out = []
    for model, base in sorted(pairs.items()):
        for rule in spec.rules:
            if isinstance(rule, MetricRule):
                out += _metric_findings(rule, scores, model, base, alpha, main_metric)
            elif isinstance(rule, StabilityRule):
                out += _stability_findings(rule, agreement, model, base, alpha)
            else:
                out += _latency_findings(rule, latencies, model, base, alpha)
    return out


def _stability_findings(rule: StabilityRule, agreement: dict, model: str, base: str, alpha: float) -> list:
    out = []
    for scenario, part in sorted(agreement.items()):
        wide = _paired(part, "instance_id", "value", model, base) if _wanted(rule, scenario) else None
        if wide is None:
            continue
        result = paired_test(wide[base], wide[model], lower_better=False, alpha=alpha)
        where = (model, base, scenario, "stability", "agreement")
        out.append(_difference_finding(rule, where, "agreement with its stored answers", result, False, alpha))
    return out


def _difference_finding(rule, where: tuple, what: str, result: PairedResult, lower: bool, alpha: float) -> Finding:
    """A rule graded on a paired difference of means: where = (model, baseline, scenario, family, metric)."""
    model, base, scenario, family, metric = where
    level, threshold, note = grade(rule, lambda t: metric_crossed(t, result, lower), alpha)
    numbers = (
        f"{what} {_g(result.mean_b)} vs {_g(result.mean_a)} ({result.diff:+.3g}, "
        f"95% CI [{_g(result.ci_low)}, {_g(result.ci_high)}], p = {_g(result.p_value)})"
    )
    return _finding(rule, where, level, threshold, f"{numbers}: {note}", result, result.mean_b, result.mean_a,
                    diff=result.diff, ci=(result.ci_low, result.ci_high))  # fmt: skip


def _finding(rule, where: tuple, level, threshold, text: str, result, value, baseline_value, *, diff=None, ratio=None,
             ci=(None, None)) -> Finding:  # fmt: skip
    model, base, scenario, family, metric = where
    return Finding(
        level=level, rule=rule.label, model=model, baseline=base, scenario=scenario, family=family, metric=metric,
        value=value, baseline_value=baseline_value, diff=diff, ratio=ratio, ci_low=ci[0], ci_high=ci[1],
        p_value=result.p_value, n=result.n, threshold=threshold, message=f"{model} vs {base} on {scenario}: {text}",
    )  # fmt: skip


def _paired(part: pd.DataFrame, index: str, value: str, model: str, base: str) -> pd.DataFrame | None:
    wide = part.pivot_table(index=index, columns="model", values=value, aggfunc="first")
    if model not in wide or base not in wide:
        return None
    wide = wide[[base, model]].dropna()
    return None if wide.empty else wide


def _wanted(rule: MetricRule | LatencyRule | StabilityRule, scenario: str) -> bool:
    return rule.scenarios is None or scenario in rule.scenarios


def _metric_findings(rule: MetricRule, scores: dict, model: str, base: str, alpha: float, main_metric) -> list:
    out = []
    for scenario in sorted({s for s, _, _ in scores}):
        name = main_metric.get(scenario) if rule.metric == MAIN else rule.metric
        part = scores.get((scenario, rule.family, name))
        if not _wanted(rule, scenario) or part is None:
            continue
        wide = _paired(part, "instance_id", "value", model, base)
        if wide is None:
            continue
        lower = lower_is_better(name)
        result = paired_test(wide[base], wide[model], lower_better=lower, alpha=alpha)
        what = name if rule.family == "accuracy" else f"{rule.family} {name}"
        out.append(_difference_finding(rule, (model, base, scenario, rule.family, name), what, result, lower, alpha))
    return out


def _latency_findings(rule: LatencyRule, latencies: dict, model: str, base: str, alpha: float) -> list:
    q = PERCENTILE[rule.statistic]
    out = []
    for scenario, part in sorted(latencies.items()):
        wide = _paired(part, "request_id", "latency_s", model, base) if _wanted(rule, scenario) else None
        if wide is None:
            continue
        a, b = wide[base].to_numpy(float), wide[model].to_numpy(float)
        value, baseline_value = float(np.percentile(b, q)), float(np.percentile(a, q))
        ratio = _ratio(value, baseline_value)
        low, high = bootstrap_statistic_ci(len(a), lambda i: _ratio(np.percentile(b[i], q), np.percentile(a[i], q)))
        result = paired_test(a, b, lower_better=True, alpha=alpha)
        level, threshold, note = grade(rule, lambda t: _latency_crossed(t, ratio, result), alpha)
        numbers = (
            f"{rule.statistic} latency {_g(value)} s vs {_g(baseline_value)} s (x{_g(ratio)}, "
            f"95% CI [{_g(low)}, {_g(high)}], p = {_g(result.p_value)})"
        )
        where = (model, base, scenario, "efficiency", f"latency_{rule.statistic}")
        text = f"{numbers}: {note}"
        out.append(
            _finding(rule, where, level, threshold, text, result, value, baseline_value, ratio=ratio, ci=(low, high))
        )
    return out


def metric_crossed(t: MetricThreshold, result: PairedResult, lower_better: bool) -> tuple[bool, bool, str]:
    """(crossed, its size passed without significance, the threshold as text)."""
    if t.below is not None:
        return result.mean_b < t.below, False, f"below {t.below:g}"
    if t.above is not None:
        return result.mean_b > t.above, False, f"above {t.above:g}"
    size = (result.diff if lower_better else -result.diff) > t.drop
    return size and result.verdict == "worse", size, f"{'rise' if lower_better else 'drop'} > {t.drop:g}"


def _latency_crossed(t: LatencyThreshold, ratio: float, result: PairedResult) -> tuple[bool, bool, str]:
    return ratio > t.ratio and result.verdict == "worse", ratio > t.ratio, f"ratio > {t.ratio:g}"


def grade(rule: MetricRule | LatencyRule | StabilityRule, crossed, alpha: float) -> tuple[Level, str, str]:
    """(level, the threshold that set it, the message's verdict): critical if its threshold is crossed, else
    warning if its is, else ok, saying so when a threshold's size was passed without significance."""
    passed = ""  # the strictest threshold whose size was passed
    for level in ("critical", "warning"):
        threshold = getattr(rule, level)
        if threshold is not None:
            hit, size, text = crossed(threshold)
            if hit:
                return level, text, f"{level} ({text})"
            passed = passed or (text if size else "")
    return "ok", "", f"ok ({passed}, but not significantly worse at alpha {alpha:g})" if passed else "ok"


def _ratio(value: float, baseline: float) -> float:
    if baseline > 0:
        return float(value / baseline)
    return math.inf if value > 0 else 1.0


def _g(x: float) -> str:
    return f"{x:.3g}"
