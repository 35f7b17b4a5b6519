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

from holistic_dagster.errors import CatalogError

# the modules that declare metrics register them on import: every one, before any lookup below
from holistic_dagster.metrics import (  # noqa: F401
    accuracy,
    bias,
    calibration,
    chain_of_thought,
    efficiency,
    ifeval,
    language_modeling,
    math_equiv,
    ranking,
    run_shape,
    safety,
    summarization,
    toxicity,
)
from holistic_dagster.metrics.registry import (
    FAMILIES,
    METRICS,
    NO_CI,
    NOT_COMPARED,
    PERTURBATION_FAMILIES,
    REFERENCE_FAMILIES,
    SCORERS,
    WORST,
    CiMethod,
    Metric,
    ReferenceMetric,
    Scorer,
    declare,
    reference_metric,
    scorer,
)

__all__ = [
    "FAMILIES",
    "METRICS",
    "NO_CI",
    "NOT_COMPARED",
    "PERTURBATION_FAMILIES",
    "REFERENCE_FAMILIES",
    "SCORERS",
    "WORST",
    "CiMethod",
    "Metric",
    "ReferenceMetric",
    "Scorer",
    "accuracy_metric",
    "declare",
    "extra_metric_names",
    "get_reference_metric",
    "is_headline",
    "lower_is_better",
    "metric",
    "per_instance_metrics",
    "reference_metric",
    "scorer",
    "scorers",
]


def metric(name: str) -> Metric:
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
    found = METRICS.get(name)
    if isinstance(found, ReferenceMetric) or (found and found.family == "accuracy" and found.mean_of_instances):
        return found
    known = sorted(m for m, s in METRICS.items() if s.family == "accuracy" and s.mean_of_instances)
    raise CatalogError(f"unknown accuracy metric {name!r} (known: {', '.join(known)})")


def scorers() -> dict[str, Scorer]:
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
    if family in REFERENCE_FAMILIES:
        return name == main_metric and perturbation in ("", WORST)
    return perturbation == "" and name in METRICS and metric(name).headline


def per_instance_metrics(family: str) -> list[str]:
    """The per-instance metrics a scorer of `family` writes for every original instance."""
    return [
        m for s in scorers().values() if s.family == family and not s.extra for m in s.metrics if metric(m).per_instance
    ]
