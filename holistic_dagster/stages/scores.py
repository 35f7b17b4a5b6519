"""The scores stage: every metric family that applies to the scenario, per instance (with the completion each
score came from) and for the scenario as a whole."""

from __future__ import annotations

from typing import Any

from holistic_dagster.errors import HolisticError
from holistic_dagster.metrics import is_headline
from holistic_dagster.metrics.scoring import applicable_scorers, predictions_of, score_instances
from holistic_dagster.results.efficient import partial_evaluation
from holistic_dagster.stages.context import StageContext
from holistic_dagster.stages.efficient import efficient_metadata, estimated_metrics
from holistic_dagster.stages.safety import (
    SafetyJudging,
    judge_answers,
    judge_summary,
    safety_tables,
    with_judging_notes,
)
from holistic_dagster.warehouse.access import Completions, Instances, Prompts
from holistic_dagster.warehouse.rows import instance_score_row, scenario_metric_row
from holistic_dagster.warehouse.tables.core import INSTANCE_SCORES, SCENARIO_METRICS
from holistic_dagster.warehouse.tables.efficient import ESTIMATES


def compute_scores(stage: StageContext, version: str, scenario: str, model: str) -> dict[str, Any]:
    spec, _ = stage.catalog.resolved_scenario(version, scenario)
    instances = [i for i in Instances(stage.warehouse).records(version, scenario) if i.split == "test"]
    requests = Prompts(stage.warehouse).requests(version, scenario, model)
    partial = partial_evaluation(stage.warehouse, version, scenario, model)
    if partial is not None:  # an efficient evaluation: the anchors it asked, and their perturbed copies
        asked = {r.instance_id for r in requests}
        instances = [i for i in instances if i.instance_id in asked]
    loaded = Completions(stage.warehouse).answers(version, scenario, model)
    missing = {r.request_id for r in requests} - set(loaded)
    if missing:
        raise HolisticError(
            f"{len(missing)} request(s) of {scenario!r} for model {model!r} have no completion: "
            f"materialize [{scenario}, completions] first"
        )
    completions = {rid: c for rid, (c, _) in loaded.items()}
    # a failed request never becomes a score: its instance is left out (and counted)
    failed = {r.instance_id for r in requests if completions[r.request_id].error}
    instances = [i for i in instances if i.instance_id not in failed]
    if not any(not i.perturbation for i in instances):
        raise HolisticError(f"every request of {scenario!r} for model {model!r} failed: nothing to score")
    method = Prompts(stage.warehouse).method(version, scenario, model)
    classifier = None
    applicable = applicable_scorers(method, spec.families, spec.extra_metrics)
    if any(s.uses_classifier for s in applicable):
        classifier = stage.toxicity(stage.catalog.suite(version).toxicity)
    judged = any(s.family == "safety" for s in applicable)  # its answers are judged before they are scored
    judging, judgements = (
        judge_answers(stage, version, predictions_of(method, instances, requests, completions))
        if judged
        else (SafetyJudging(), {})
    )
    rows, aggregates = score_instances(
        method,
        spec.metrics,
        instances,
        requests,
        completions,
        spec.families,
        spec.extra_metrics,
        classify=classifier.score if classifier else None,
        classifier_name=classifier.name if classifier else "",
        price=registered.price if (registered := stage.deployment.models().get(model)) else None,
        safety_judgements=judgements,
    )
    aggregates = with_judging_notes(aggregates, judging) if judged else aggregates
    keys = {"model": model, "version": version, "scenario": scenario}
    estimates, efficient = ESTIMATES.frame([]), {}
    if partial is not None:  # estimated for the full draw from the instances answered
        aggregates, estimates, found = estimated_metrics(
            stage, version, scenario, model, spec.main_metric, rows, aggregates
        )
        efficient = efficient_metadata(found)
    scores = INSTANCE_SCORES.frame(instance_score_row(s, loaded[s.request_id][1], **keys) for s in rows)
    main_provenance = scores["provenance_id"].mode().iat[0]
    n_full = int(partial["n_full"]) if partial is not None else None
    metrics = SCENARIO_METRICS.frame(scenario_metric_row(m, main_provenance, **keys, n_full=n_full) for m in aggregates)
    metrics["n_full"] = metrics["n_full"].astype("Int64")  # NULL when measured in full, not NaN
    safety = safety_tables(keys, judgements, judging) if judged else {}
    tables = {"instance_scores": scores, "scenario_metrics": metrics, "estimates": estimates, **safety}
    stage.warehouse.replace(keys, tables)
    originals = [i for i in instances if not i.perturbation]
    min_kappa = stage.catalog.suite(version).safety.min_kappa
    headline = {
        f"{m.metric}{'/' + m.perturbation if m.perturbation else ''} ({m.family})": round(m.value, 4)
        for m in aggregates
        if m.value is not None and is_headline(m.family, m.metric, m.perturbation, spec.main_metric)
    }
    return {
        **efficient,
        "num_instances": len(originals),
        "num_perturbed_instances": len(instances) - len(originals),
        "num_failed_instances": len(failed),
        "num_scores": len(scores),
        **headline,
        **({"safety_judges": judge_summary(judging, min_kappa)} if judged else {}),
    }
