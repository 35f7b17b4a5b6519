"""Metrics: one registered function per metric name, grouped by HELM's metric families."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from holistic_dagster.errors import CatalogError

FAMILIES = ("accuracy", "calibration", "robustness", "fairness", "bias", "toxicity", "efficiency")


@dataclass(frozen=True)
class ReferenceMetric:
    """A per-instance metric comparing one gold reference with one prediction; the instance's value is the
    maximum over its correct references (HELM)."""

    name: str
    family: str
    fn: Callable[[str, str], float]


REFERENCE_METRICS: dict[str, ReferenceMetric] = {}


def reference_metric(name: str, family: str = "accuracy"):
    def register(fn: Callable[[str, str], float]) -> Callable[[str, str], float]:
        if name in REFERENCE_METRICS:
            raise ValueError(f"metric {name!r} registered twice")
        REFERENCE_METRICS[name] = ReferenceMetric(name, family, fn)
        return fn

    return register


def get_reference_metric(name: str) -> ReferenceMetric:
    from holistic_dagster.metrics import accuracy, summarization  # noqa: F401  (register their metrics)

    if name not in REFERENCE_METRICS:
        raise CatalogError(f"unknown metric {name!r} (known: {', '.join(sorted(REFERENCE_METRICS))})")
    return REFERENCE_METRICS[name]
