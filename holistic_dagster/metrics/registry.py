"""The metric registry's declarations: what a metric is (its family, direction, bounds, headline flag, CI method)
and the decorators that register metric functions and scorers. The modules that compute metrics register through
these; holistic_dagster.metrics imports every such module and answers lookups."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

FAMILIES = ("accuracy", "calibration", "robustness", "fairness", "bias", "toxicity", "safety", "efficiency")
PERTURBATION_FAMILIES = ("robustness", "fairness")  # families measured on perturbed copies of the instances
REFERENCE_FAMILIES = ("accuracy", *PERTURBATION_FAMILIES)  # families whose metrics are the reference metrics
WORST = "worst"  # the perturbation label of a worst-case row (HELM's robustness / fairness)
# families whose per-instance values a paired test does not compare: a higher max_prob is not better, and timings
# are noise between runs
NOT_COMPARED = ("calibration", "efficiency")

CiMethod = Literal["mean", "calibration", "toxicity", "none"]
NO_CI = {
    "per_perturbation": "no bootstrap: a per-perturbation mean (the worst case carries the CI)",
    "undefined": "no bootstrap: the value itself is undefined (its note says why)",
    "no_rows": "no bootstrap: no per-instance rows to resample",
    # not a missing CI: one that does not hold its estimate (a percentile interval need not, for a biased statistic)
    "outside": "the estimate lies outside its bootstrap interval: the statistic is biased under resampling (ECE: "
    "duplicated instances crowd its bins), so the interval is the spread of resampled values, not a range around "
    "the estimate",
}


@dataclass(frozen=True)
class Metric:
    """What a metric is. `ci`: how a leaderboard cell's 95% CI is computed: `mean` (bootstrap over the cell's
    per-instance rows), `calibration` (recomputed from resampled (max_prob, exact_match) pairs), `toxicity`
    (recomputed from resampled per-instance toxicity), `none` (no CI; `no_ci` says why)."""

    name: str
    family: str
    description: str
    lower_is_better: bool = False
    absolute: bool = False  # compared by |value| (0 is best either way: BBQ's bias scores)
    bounds: tuple[float, float] = (0.0, 1.0)
    headline: bool = False  # enters its family's mean win rate (reference metrics: the scenario's first listed)
    ci: CiMethod = "mean"
    no_ci: str = ""
    per_instance: bool = False  # has one row per instance in instance_scores
    mean_of_instances: bool = False  # its scenario value is the mean of its per-instance rows
    priced_only: bool = False  # only a model with a price gets it (cost)
    # a per-instance metric with a row for every evaluated original (safety's: only the answers its judges judged)
    on_every_instance: bool = True

    def in_bounds(self, value: float) -> bool:
        return self.bounds[0] <= value <= self.bounds[1]


@dataclass(frozen=True)
class ReferenceMetric(Metric):
    fn: Callable[[str, str], float] = lambda gold, pred: math.nan


@dataclass(frozen=True)
class Scorer:
    """Computes a family's metrics from a scenario's predictions: fn(ScoringInput) -> (instance rows, scenario
    metrics). It runs when `family` applies to the scenario and, for an opt-in scorer (`extra`), when the
    scenario lists its name in `extra_metrics`; `methods` limits it to some adapter methods, `open_ended` to the
    methods whose answers are free text (AdapterMethod.open_ended: generation, and any such method added)."""

    name: str
    family: str
    metrics: tuple[str, ...]
    fn: Callable
    extra: bool = False
    methods: tuple[str, ...] | None = None
    open_ended: bool = False  # needs free-text answers
    uses_classifier: bool = False  # needs the suite's toxicity classifier (ScoringInput.classify)
    # what the scorer needs of an instance's metadata, checked when the data is read (before any request is sent):
    # validate(metadata) -> the problem, "" when there is none
    validate: Callable[[dict], str] | None = None


METRICS: dict[str, Metric] = {}
SCORERS: dict[str, Scorer] = {}


def declare(name: str, family: str, description: str, **facts) -> Metric:
    """Registers a metric computed by a scorer (or another metric's machinery)."""
    return _register(Metric(name, family, description, **facts))


def _register(metric: Metric) -> Metric:
    if metric.name in METRICS:
        raise ValueError(f"metric {metric.name!r} registered twice")
    if metric.family not in FAMILIES:
        raise ValueError(f"metric {metric.name!r}: unknown family {metric.family!r}")
    if metric.ci == "none" and not metric.no_ci:
        raise ValueError(f"metric {metric.name!r}: say why it has no CI (no_ci)")
    METRICS[metric.name] = metric
    return metric


def reference_metric(name: str, description: str = ""):
    """Registers fn(gold, pred) -> [0, 1] as an accuracy metric (per instance, mean over instances, bootstrap CI)."""

    def register(fn: Callable[[str, str], float]) -> Callable[[str, str], float]:
        _register(
            ReferenceMetric(
                name,
                "accuracy",
                description or (fn.__doc__ or name).strip().splitlines()[0],
                per_instance=True,
                mean_of_instances=True,
                fn=fn,
            )
        )
        return fn

    return register


def scorer(
    name: str,
    family: str,
    metrics: Sequence[str],
    *,
    extra: bool = False,
    methods: Sequence[str] | None = None,
    open_ended: bool = False,
    uses_classifier: bool = False,
    validate: Callable[[dict], str] | None = None,
):
    """Registers a family's scorer; its metrics must be declared (with `declare`) where it is defined."""

    def register(fn: Callable) -> Callable:
        if name in SCORERS:
            raise ValueError(f"scorer {name!r} registered twice")
        undeclared = [m for m in metrics if m not in METRICS]
        if undeclared:
            raise ValueError(f"scorer {name!r}: declare its metrics first: {undeclared}")
        SCORERS[name] = Scorer(
            name,
            family,
            tuple(metrics),
            fn,
            extra,
            tuple(methods) if methods else None,
            open_ended,
            uses_classifier,
            validate,
        )
        return fn

    return register
