"""The check of a scenario's anchors (stages/efficient.fit_anchors): the estimates' intervals were validated on the
population they were fitted on, and the figures say how well."""

from __future__ import annotations

from holistic_dagster.quality.base import CheckOutcome, declare, runs_checks
from holistic_dagster.results.efficient import anchor_fit_facts

ANCHORS_VALIDATED = declare(
    "anchors",
    "anchors_validated",
    "Each model of the population, left out and estimated from the anchors as a new model, fell inside the stated "
    "interval at least as often as its level says; the details give the mean absolute error against a random "
    "sample's of as many instances. A fit on fewer than 10 models is a random sample: its interval is Wilson's.",
)


@runs_checks("anchors")
def anchors_checks(stage, version: str, scenario: str, model: str | None = None) -> list[CheckOutcome]:
    return [check_anchors(anchor_fit_facts(stage.warehouse, version, scenario))]


def check_anchors(facts: dict) -> CheckOutcome:
    validation, level = facts["validation"], facts["level"]
    details = {"method": facts["method"], "anchors": facts["anchors"], "n_full": facts["n_full"], **validation}
    if facts["method"] != "irt":
        why = f"{len(facts['models'])} model(s) with full results: a random sample of {facts['anchors']} instances"
        return ANCHORS_VALIDATED.result(True, f"{ANCHORS_VALIDATED.description} Here: {why}.", details)
    coverage = validation["coverage"]
    summary = (
        f"Here: {validation['models']} models left out in turn, interval coverage {coverage:.0%} (level "
        f"{level:.0%}), mean absolute error {validation['mae'] * 100:.2f} points against a random sample's "
        f"{validation['mae_random'] * 100:.2f}."
    )
    return ANCHORS_VALIDATED.result(coverage >= level, f"{ANCHORS_VALIDATED.description} {summary}", details)
