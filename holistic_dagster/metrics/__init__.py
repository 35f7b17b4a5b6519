"""The metric registry: every metric the pipeline reports is declared once, where it is computed, with what the
rest of the system needs to know about it (its family, direction, bounds, whether it heads its family, how its
confidence interval is computed). Scoring, quality checks, statistics, win rates, the CLI and the report read
these declarations; none of them lists metric names of its own.

Two kinds of computation register here:
- reference metrics (`@reference_metric`): compare one gold reference with one prediction; an instance's value
  is the maximum over its correct references (HELM). They are the accuracy metrics a scenario lists, and are
  reported again under robustness and fairness for perturbed instances.
- scorers (`@scorer`): compute the metrics of a family from a scenario's predictions (calibration, efficiency,
  toxicity, bias, BBQ's bias scores), per instance and/or for the scenario as a whole.
Adding a metric = one function and its declaration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from holistic_dagster.errors import CatalogError

FAMILIES = ("accuracy", "calibration", "robustness", "fairness", "bias", "toxicity", "efficiency")
PERTURBATION_FAMILIES = ("robustness", "fairness")  # families measured on perturbed copies of the instances
REFERENCE_FAMILIES = ("accuracy", *PERTURBATION_FAMILIES)  # families whose metrics are the reference metrics
WORST = "worst"  # the perturbation label of a worst-case row (HELM's robustness / fairness)

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

    def in_bounds(self, value: float) -> bool:
        return self.bounds[0] <= value <= self.bounds[1]


@dataclass(frozen=True)
class ReferenceMetric(Metric):
    fn: Callable[[str, str], float] = lambda gold, pred: math.nan


@dataclass(frozen=True)
class Scorer:
    """Computes a family's metrics from a scenario's predictions: fn(ScoringInput) -> (instance rows, scenario
    metrics). It runs when `family` applies to the scenario and, for an opt-in scorer (`extra`), when the
    scenario lists its name in `extra_metrics`; `methods` limits it to some adapter methods."""

    name: str
    family: str
    metrics: tuple[str, ...]
    fn: Callable
    extra: bool = False
    methods: tuple[str, ...] | None = None
    uses_classifier: bool = False  # needs the suite's toxicity classifier (ScoringInput.classify)


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
    uses_classifier: bool = False,
):
    """Registers a family's scorer; its metrics must be declared (with `declare`) where it is defined."""

    def register(fn: Callable) -> Callable:
        if name in SCORERS:
            raise ValueError(f"scorer {name!r} registered twice")
        undeclared = [m for m in metrics if m not in METRICS]
        if undeclared:
            raise ValueError(f"scorer {name!r}: declare its metrics first: {undeclared}")
        SCORERS[name] = Scorer(
            name, family, tuple(metrics), fn, extra, tuple(methods) if methods else None, uses_classifier
        )
        return fn

    return register


_loaded = False


def _load() -> None:
    """Imports the modules that declare metrics (they register themselves on import); once, as lookups run per
    score row."""
    global _loaded
    if _loaded:
        return
    from holistic_dagster.metrics import (  # noqa: F401
        accuracy,
        bias,
        calibration,
        efficiency,
        language_modeling,
        ranking,
        run_shape,
        summarization,
        toxicity,
    )

    _loaded = True


def metric(name: str) -> Metric:
    _load()
    if name not in METRICS:
        base, at, k = name.rpartition("@")
        if at and k.isdigit() and base in METRICS and METRICS[base].per_instance:
            return _best_of_k(METRICS[base], name)
        raise CatalogError(f"unknown metric {name!r} (known: {', '.join(sorted(METRICS))})")
    return METRICS[name]


def _best_of_k(base: Metric, name: str) -> Metric:
    """HELM's `<metric>@k` (the best of k samples per instance, in runs imported from HELM): the base metric's
    family, direction and bounds; never a headline."""
    facts = {f: getattr(base, f) for f in ("lower_is_better", "absolute", "bounds", "ci", "no_ci", "mean_of_instances")}
    what = f"{base.name}, the best of {name.rpartition('@')[2]} samples (HELM)"
    return Metric(name, base.family, what, headline=False, per_instance=True, **facts)


def get_reference_metric(name: str) -> ReferenceMetric:
    _load()
    found = METRICS.get(name)
    if not isinstance(found, ReferenceMetric):
        known = sorted(m for m, spec in METRICS.items() if isinstance(spec, ReferenceMetric))
        raise CatalogError(f"unknown accuracy metric {name!r} (known: {', '.join(known)})")
    return found


def accuracy_metric(name: str) -> Metric:
    """A metric a scenario may list as an accuracy metric: a reference metric, or a per-instance accuracy metric a
    scorer computes (RR@10 of a ranking, a document's logprob): the first listed is the headline. (A suite pin
    `method: language_modeling` sets its own list, headed by bits_per_byte, a ratio of sums: catalog.Catalog.
    resolved_scenario.)"""
    _load()
    found = METRICS.get(name)
    if isinstance(found, ReferenceMetric) or (found and found.family == "accuracy" and found.mean_of_instances):
        return found
    known = sorted(m for m, s in METRICS.items() if s.family == "accuracy" and s.mean_of_instances)
    raise CatalogError(f"unknown accuracy metric {name!r} (known: {', '.join(known)})")


def scorers() -> dict[str, Scorer]:
    _load()
    return SCORERS


def extra_metric_names() -> list[str]:
    """The opt-in scorers a scenario can name in `extra_metrics`."""
    return sorted(name for name, s in scorers().items() if s.extra)


def lower_is_better(name: str) -> bool:
    return metric(name).lower_is_better


def is_headline(family: str, name: str, perturbation: str, main_metric: str) -> bool:
    """Whether a leaderboard cell is its scenario's headline in `family` (the column it adds to the family's win
    rate, the short leaderboard's row): in accuracy, robustness and fairness the scenario's main metric
    (unperturbed or worst case); elsewhere the metrics declared headline (every bias metric)."""
    _load()
    if family in REFERENCE_FAMILIES:
        return name == main_metric and perturbation in ("", WORST)
    return perturbation == "" and name in METRICS and metric(name).headline


def per_instance_metrics(family: str) -> list[str]:
    """The per-instance metrics a scorer of `family` writes for every original instance."""
    return [
        m for s in scorers().values() if s.family == family and not s.extra for m in s.metrics if metric(m).per_instance
    ]
