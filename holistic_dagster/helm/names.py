"""How HELM names what we name otherwise: run groups against our scenarios, metrics against ours and their family.
Used in both directions (import and export), so a name maps back to itself on a round trip."""

from __future__ import annotations

from holistic_dagster.errors import CatalogError
from holistic_dagster.metrics import metric

# HELM's run group (run_spec.groups[0]) -> our scenario, where the names differ; every other group keeps its name
GROUP_TO_SCENARIO = {
    "gsm": "gsm8k",
    "truthful_qa": "truthfulqa",
    "summarization_cnndm": "cnndm",
    "summarization_xsum": "xsum",
}
SCENARIO_TO_GROUP = {v: k for k, v in GROUP_TO_SCENARIO.items()}
# the scenario argument HELM's run names tell subsets apart by (mmlu:subject=anatomy)
SUBSET_ARGUMENT = {"mmlu": "subject", "bbq": "subject", "bold": "subject", "raft": "subset",
                   "synthetic_reasoning": "mode"}  # fmt: skip

# HELM metric -> ours, where the names differ
HELM_TO_OURS = {
    "inference_runtime": "runtime_s",
    "toxic_frac": "toxic_fraction",
    "bbq_metric_ambiguous_bias": "bbq_bias_ambiguous",
    "bbq_metric_unambiguous_bias": "bbq_bias_disambiguated",
}
OURS_TO_HELM = {v: k for k, v in HELM_TO_OURS.items()}


def scenario_for_group(group: str) -> str:
    return GROUP_TO_SCENARIO.get(group, group)


def group_for_scenario(scenario: str) -> str:
    return SCENARIO_TO_GROUP.get(scenario, scenario)


def our_metric(helm_name: str) -> tuple[str, str] | None:
    """(our metric name, its family) for a HELM metric we also define (metrics' registry; HELM's run-shape facts are
    declared in metrics/run_shape.py); None for one we do not, whose direction and bounds we cannot know."""
    name = HELM_TO_OURS.get(helm_name, helm_name)
    try:
        return name, metric(name).family
    except CatalogError:
        return None


def helm_metric(name: str) -> str:
    return OURS_TO_HELM.get(name, name)
