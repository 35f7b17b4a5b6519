"""Evaluation sized to the decision, as stages over the warehouse (the numerics are in efficient/):

- `fit_anchors`: per suite version and scenario, the population (every model with results on the whole draw, not
  an efficient evaluation), the item response fit and the k anchors, with the fit's leave-one-model-out figures
  (tables anchor_fits, anchor_instances). A fit is reused while the population's scores are unchanged.
- `anchors_for`: what the prompts stage of a model evaluated efficiently asks for (the anchors and their perturbed
  copies), and the partial_evaluations row saying so.
- `estimated_metrics`: in the scores stage of such a model, its main accuracy metric estimated for the full draw
  (table estimates, scenario_metrics marked `estimated`), every other mean over instances estimated as the sample's
  mean; the metrics that are not such means say they were not estimated."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from holistic_dagster.efficient.anchors import (
    DEFAULT_LEVEL,
    IRT,
    RANDOM,
    AnchorFit,
    Estimate,
    choose_anchors,
    estimate,
    fit_population,
    sample_estimate,
    stratified_mean,
)
from holistic_dagster.efficient.sequential import bounded, sample_order
from holistic_dagster.efficient.validation import Matrix
from holistic_dagster.errors import HolisticError
from holistic_dagster.metrics import metric
from holistic_dagster.metrics.registry import WORST
from holistic_dagster.records import Instance, InstanceScore, ScenarioMetric, sha256_json
from holistic_dagster.results.efficient import AnchorSet, fit_facts, partial_evaluation, stored_anchors
from holistic_dagster.results.leaderboard import main_metrics
from holistic_dagster.results.matrix import full_draw_results
from holistic_dagster.stages.context import StageContext
from holistic_dagster.warehouse.access import AnchorFits, ScenarioMetrics
from holistic_dagster.warehouse.records import AnchorFitsRow, AnchorInstancesRow, EstimatesRow, PartialEvaluationsRow
from holistic_dagster.warehouse.tables.efficient import ANCHOR_FITS, ANCHOR_INSTANCES, ESTIMATES, PARTIAL_EVALUATIONS

ANCHOR_SEED = 0


def fit_anchors(
    stage: StageContext, version: str, scenario: str, k: int, level: float = DEFAULT_LEVEL
) -> dict[str, Any]:
    """Fits the scenario's anchors on the models with results on its whole draw (unless the stored fit was made
    on the same scores with the same k) and stores them; returns the fit's facts and validation."""
    metric = main_metrics(stage.warehouse, stage.catalog, version)[scenario]
    matrix, draw = full_draw_results(stage.warehouse, version, scenario, metric)
    population_hash = sha256_json([matrix.models, matrix.items, np.nan_to_num(matrix.correct, nan=-1).tolist()])
    stored = AnchorFits(stage.warehouse).where(version=version, scenario=scenario)
    keys = {"version": version, "scenario": scenario}
    if len(stored) and stored["population_hash"].iat[0] == population_hash and int(stored["anchors"].iat[0]) == k:
        return {**fit_facts(stored.iloc[0]), "reused": True}
    fit = _fit(matrix, draw, k, level)
    anchors = [fit.population.items[i] for i in fit.anchors]
    row = AnchorFitsRow(
        **keys, metric=metric, method=fit.method, anchors=len(anchors), n_full=len(draw), seed=ANCHOR_SEED,
        level=level, models=json.dumps(list(fit.population.models)), population_hash=population_hash,
        interval_scale=fit.interval_scale, ability_weight=fit.ability_weight if fit.method == "irt" else None,
        validation=json.dumps(fit.validation), fitted_at=pd.Timestamp.now(tz="UTC").tz_localize(None).to_pydatetime(),
    )  # fmt: skip
    instances = ANCHOR_INSTANCES.frame(
        AnchorInstancesRow(**keys, instance_id=i, position=p, weight=float(w))
        for p, (i, w) in enumerate(zip(anchors, fit.weights))
    )
    stage.warehouse.replace(keys, {"anchor_fits": ANCHOR_FITS.frame([row]), "anchor_instances": instances})
    return {**fit_facts(pd.Series(vars(row))), "reused": False}


def _fit(matrix: Matrix, draw: list[str], k: int, level: float) -> AnchorFit:
    """The fit over the full draw's items (a metric in [0, 1], right-or-wrong or a score such as F1: the 2PL where
    the population allows; otherwise, and for a metric outside [0, 1], a random sample of k)."""
    scored = bounded(matrix.correct[~np.isnan(matrix.correct)])
    rows = matrix.correct if scored and len(matrix.models) else np.empty((0, len(draw)))
    models = matrix.models if scored else []
    population = fit_population(rows, models, draw)
    return choose_anchors(population, min(k, len(draw)), ANCHOR_SEED, level)


def anchors_for(
    stage: StageContext, version: str, scenario: str, model: str, instances: list[Instance]
) -> tuple[list[Instance], pd.DataFrame]:
    """The instances a model evaluated on part of the draw is asked, with its partial_evaluations row: the few-shot
    pool and, of the test instances, the anchors (stage.efficient) or the first n of the seeded order
    (stage.sample, a sequential gate's batch), with their perturbed copies. The whole dataset (and no row) when
    neither is asked for, when the part would be the whole draw, or when the model already has results on the whole
    draw (a partial run never replaces a measurement with an estimate)."""
    keys = {"model": model, "version": version, "scenario": scenario}
    none = PARTIAL_EVALUATIONS.frame([])
    draw = sorted(i.instance_id for i in instances if i.split == "test" and not i.perturbation)
    part = stage.sample or stage.efficient
    if not part or part >= len(draw) or ScenarioMetrics(stage.warehouse).measured_in_full(version, scenario, model):
        return instances, none
    if stage.sample:
        keep, models, how = set(sample_order(draw)[: stage.sample]), [], "sample"
    else:
        fit_anchors(stage, version, scenario, part)
        chosen = stored_anchors(stage.warehouse, version, scenario)
        if chosen is None:  # fit_anchors has just stored them
            raise HolisticError(f"{scenario} ({version}): no anchors stored after fitting them")
        keep, models, how = set(chosen.instance_ids), list(chosen.models), "anchors"
    asked = [i for i in instances if i.split != "test" or (i.original_id or i.instance_id) in keep]
    row = PartialEvaluationsRow(**keys, n_evaluated=len(keep), n_full=len(draw), fit_models=json.dumps(models), how=how)
    return asked, PARTIAL_EVALUATIONS.frame([row])


def estimated_metrics(
    stage: StageContext,
    version: str,
    scenario: str,
    model: str,
    main_metric: str,
    rows: list[InstanceScore],
    aggregates: list[ScenarioMetric],
) -> tuple[list[ScenarioMetric], pd.DataFrame, Estimate]:
    """The scenario metrics of a model that answered part of the draw (the anchors, or a sequential gate's sample),
    from its per-instance `rows`: its main accuracy metric estimated for the full draw (the item response fit), every
    other mean of per-instance values (the other families' headline cells, runtimes, token counts) estimated as the
    sample's mean, and what is not such a mean (calibration error, bias, a per-perturbation mean) without a value and
    a note saying why; and the estimates rows. Returns the main metric's estimate too."""
    partial = partial_evaluation(stage.warehouse, version, scenario, model)
    if partial is None:  # the completions step recorded it
        raise HolisticError(f"{model} on {scenario} ({version}): no partial evaluation recorded to estimate from")
    n_full, fitted = int(partial["n_full"]), partial["how"] == "anchors"
    chosen = stored_anchors(stage.warehouse, version, scenario) if fitted else None
    weight = dict(zip(chosen.instance_ids, chosen.weights)) if chosen else {}
    out, found, estimates = [], {}, []
    for m in aggregates:
        values = _instance_values(rows, m)
        if m.family == "accuracy" and m.metric == main_metric and not m.perturbation:
            if chosen is None:
                found[m] = sample_estimate(list(values.values()), n_full)
            else:
                answered = [i for i in chosen.instance_ids if i in values]
                found[m] = _estimate(stage, chosen, answered, values)
        elif values and metric(m.metric).mean_of_instances and m.perturbation in ("", WORST):
            ids = [i for i in values if not fitted or i in weight]
            level = chosen.level if chosen else DEFAULT_LEVEL
            weights = [weight[i] if fitted else 1.0 for i in ids]
            found[m] = stratified_mean([values[i] for i in ids], weights, n_full, level, metric(m.metric).bounds)
            if not fitted:
                found[m] = replace(found[m], method=RANDOM)
        if m in found:
            out.append(replace(m, value=found[m].value, count=found[m].n_evaluated, note=""))
            estimates.append(_estimate_row(model, version, scenario, m, found[m], chosen))
        else:
            how = "an efficient evaluation" if fitted else "a sequential gate's sample"
            note = (
                f"not estimated for a partial evaluation: {model} answered part of the draw ({how}); "
                f"`holistic evaluate --model {model}` completes it"
            )
            out.append(replace(m, value=None, note=note))
    main = next(e for m, e in found.items() if m.family == "accuracy" and m.metric == main_metric)
    return out, ESTIMATES.frame(estimates), main


def _instance_values(rows: list[InstanceScore], m: ScenarioMetric) -> dict[str, float]:
    return {
        r.instance_id: r.value
        for r in rows
        if r.family == m.family and r.metric == m.metric and r.perturbation == m.perturbation
    }


def _estimate_row(
    model: str, version: str, scenario: str, m: ScenarioMetric, found: Estimate, chosen: AnchorSet | None
) -> EstimatesRow:
    return EstimatesRow(
        model=model, version=version, scenario=scenario, family=m.family, metric=m.metric, value=found.value,
        ci_low=found.low, ci_high=found.high, level=found.level, n_evaluated=found.n_evaluated, n_full=found.n_full,
        method=found.method, fit_models=json.dumps(list(chosen.models) if chosen and found.method == IRT else []),
    )  # fmt: skip


def _estimate(stage: StageContext, chosen: AnchorSet, answered: list[str], per_instance: dict[str, float]) -> Estimate:
    values = np.array([per_instance[i] for i in answered], float)
    if len(answered) < len(chosen.instance_ids) or not bounded(values) or chosen.method != IRT:
        # a failed request leaves an anchor unanswered, or the metric is not a score in [0, 1], or the population was
        # too small to fit: the answered anchors as the sample they are
        return sample_estimate(values, chosen.n_full, chosen.level)
    matrix, draw = full_draw_results(stage.warehouse, chosen.version, chosen.scenario, chosen.metric, chosen.models)
    fit = _fit(matrix, draw, len(chosen.instance_ids), chosen.level)
    assert [fit.population.items[i] for i in fit.anchors] == list(chosen.instance_ids), "the anchors changed"
    return estimate(fit, values)


def efficient_metadata(found: Estimate) -> dict[str, Any]:
    """How the Dagster UI shows an estimated cell."""
    return {"estimated": f"{found} ({found.method}, {found.level:.0%} interval)"}
