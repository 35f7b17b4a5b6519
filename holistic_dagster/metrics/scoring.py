"""From completions to scores: the prediction each adapter method implies, then every metric family that
applies to the scenario.

Per original (unperturbed) instance: the accuracy metrics (max over correct references, HELM), max_prob
(calibration) and the efficiency measures. Calibration pairs max_prob with the instance's exact_match, as HELM
does (basic_metrics.compute_calibration_metrics), whatever the scenario's main metric; exact_match is computed
wherever calibration applies, listed or not. Per perturbed instance: the same accuracy metrics, in the
perturbation's family (robustness or fairness). Per original and family: the worst value over the original
and its perturbations of that family (HELM's worst-case robustness/fairness). Scenario level: means,
calibration over all instances, throughput, per-perturbation means, and BBQ's bias scores where asked for.
Toxicity and generation bias need the completions' text only and are computed by `generation_metrics`.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from holistic_dagster.metrics import get_reference_metric
from holistic_dagster.metrics.accuracy import exact_match
from holistic_dagster.metrics.bias import bbq_bias, bias_metrics
from holistic_dagster.metrics.calibration import CALIBRATION_METRICS, calibration_metrics
from holistic_dagster.metrics.toxicity import toxicity_metrics
from holistic_dagster.perturbations import get_perturbation
from holistic_dagster.records import Completion, Instance, InstanceScore, Request, ScenarioMetric
from holistic_dagster.scenarios.loaders import CHOICE_LABELS

EFFICIENCY_METRICS = ("runtime_s", "num_prompt_tokens", "num_output_tokens")
WORST = "worst"
CORRECTNESS = "exact_match"  # what calibration calls correct (HELM: the instance's exact_match stat)
# HELM's rule (_has_non_zero_valued_logprobs): calibration needs some completion with a log-probability below 0
NOT_COMPUTED = "not computed"  # how a calibration note that means "no value on purpose" starts
NO_LOGPROBS = (
    f"{NOT_COMPUTED}: no log-probabilities (none of the {{n}} completions has one below 0: the backend gives none, "
    "or every answer was empty)"
)


def scored_metrics(metric_names: Sequence[str], families: Sequence[str]) -> list[str]:
    """The accuracy metrics scored per instance: the scenario's, and exact_match where calibration applies
    (HELM's calibration needs it; its row lets the summary pair max_prob with it again)."""
    if "accuracy" not in families:
        return []
    extra = [CORRECTNESS] if "calibration" in families and CORRECTNESS not in metric_names else []
    return [*metric_names, *extra]


def metrics_per_instance(metric_names: Sequence[str], families: Sequence[str]) -> int:
    """Rows each evaluated original instance gets in the per-instance families (accuracy metrics, max_prob,
    efficiency, toxicity), not counting robustness and fairness. (A run whose calibration is "not computed" has
    no max_prob rows: quality.check_scores expects one fewer then.)"""
    n = len(scored_metrics(metric_names, families))
    n += 1 if "calibration" in families else 0
    n += len(EFFICIENCY_METRICS) if "efficiency" in families else 0
    return n + (1 if "toxicity" in families else 0)


def _softmax_prob(scores: list[float], index: int) -> float:
    top = max(scores)
    weights = [math.exp(s - top) for s in scores]
    return weights[index] / sum(weights)


def predict(
    method: str, instance: Instance, requests: Sequence[Request], completions: Mapping[str, Completion]
) -> tuple[str, float, Request]:
    """(prediction text, the model's probability for it, the request that carries it)."""
    if method in ("generation", "multiple_choice_joint"):
        (request,) = requests
        completion = completions[request.request_id]
        prob = math.exp(completion.logprob)  # HELM: exp of the sum of the generated tokens' log-probabilities
        if method == "generation":
            return completion.text, prob, request
        letter = completion.text.strip()
        labels = CHOICE_LABELS[: len(instance.references)]
        if len(letter) == 1 and letter in labels:  # map the letter back to its choice, as HELM does
            return instance.references[labels.index(letter)].output, prob, request
        return completion.text, prob, request
    choices = sorted((r for r in requests if not r.is_null_context), key=lambda r: r.choice_index)
    scores = [completions[r.request_id].logprob for r in choices]
    if method == "multiple_choice_separate_calibrated":
        null = {r.choice_index: completions[r.request_id].logprob for r in requests if r.is_null_context}
        scores = [s - null[r.choice_index] for s, r in zip(scores, choices)]
    best = int(np.argmax(scores))
    return instance.references[best].output, _softmax_prob(scores, best), choices[best]


def _correctness(instance: Instance, prediction: str) -> float:
    """The instance's exact_match (max over its correct references): what calibration calls correct."""
    return max((exact_match(g.output, prediction) for g in instance.correct_references), default=0.0)


def _choice_index(instance: Instance, prediction: str) -> int:
    """The index of the choice a prediction names (-1: none of them)."""
    outputs = [r.output for r in instance.references]
    return outputs.index(prediction) if prediction in outputs else -1


def score_instances(
    method: str,
    metric_names: Sequence[str],
    instances: Sequence[Instance],
    requests: Sequence[Request],
    completions: Mapping[str, Completion],
    families: Sequence[str] = ("accuracy", "calibration", "efficiency"),
    extra_metrics: Sequence[str] = (),
) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    metrics = [get_reference_metric(n) for n in scored_metrics(metric_names, families)]
    by_instance: dict[str, list[Request]] = defaultdict(list)
    for r in requests:
        by_instance[r.instance_id].append(r)
    originals = [i for i in instances if not i.perturbation]
    rows: list[InstanceScore] = []
    values: dict[str, dict[str, tuple[float, InstanceScore]]] = {}  # instance -> metric -> (value, row)
    confident: list[tuple[Instance, str, float, float, Request]] = []  # (instance, prediction, prob, correct, carrier)
    bbq_items = []
    runtime = prompt_tokens = output_tokens = 0.0

    def accuracy_rows(inst: Instance, family: str) -> tuple[str, float, Request]:
        pred, prob, carrier = predict(method, inst, by_instance[inst.instance_id], completions)
        values[inst.instance_id] = {}
        for m in metrics:
            value = max(m.fn(g.output, pred) for g in inst.correct_references)
            row = InstanceScore(inst.instance_id, m.name, family, value, carrier.request_id, pred, inst.perturbation)
            values[inst.instance_id][m.name] = (value, row)
            rows.append(row)
        return pred, prob, carrier

    for inst in originals:
        pred, prob, carrier = accuracy_rows(inst, "accuracy")
        correct = _correctness(inst, pred)
        confident.append((inst, pred, prob, correct, carrier))
        if "bbq_bias" in extra_metrics:
            bbq_items.append((inst.metadata, _choice_index(inst, pred), bool(correct)))
        if "efficiency" in families:
            done = [completions[r.request_id] for r in by_instance[inst.instance_id]]
            eff = {
                "runtime_s": sum(c.latency_s for c in done),
                "num_prompt_tokens": float(sum(c.num_prompt_tokens for c in done)),
                "num_output_tokens": float(sum(c.num_completion_tokens for c in done)),
            }
            runtime += eff["runtime_s"]
            prompt_tokens += eff["num_prompt_tokens"]
            output_tokens += eff["num_output_tokens"]
            for name, value in eff.items():
                rows.append(InstanceScore(inst.instance_id, name, "efficiency", value, carrier.request_id, pred))

    scored = {i.instance_id for i in originals}
    variants: dict[str, dict[str, list[Instance]]] = defaultdict(lambda: defaultdict(list))  # family -> original
    for inst in instances:
        if inst.perturbation and inst.original_id in scored and metrics:
            family = get_perturbation(inst.perturbation).family
            if family in families:
                accuracy_rows(inst, family)
                variants[family][inst.original_id].append(inst)
    rows += worst_case_rows(originals, variants, [m.name for m in metrics], values)

    num_requests = sum(len(by_instance[i.instance_id]) for i in originals)  # efficiency: the originals' requests
    aggregates = aggregate(rows, num_requests, runtime, prompt_tokens + output_tokens)
    if "calibration" in families:
        calibration_rows, calibration_aggregates = calibration(confident, completions)
        rows += calibration_rows
        aggregates += calibration_aggregates
    aggregates += perturbation_means(originals, variants, [m.name for m in metrics], values)
    if "bbq_bias" in extra_metrics:
        named = sum(1 for _, predicted, _ in bbq_items if predicted >= 0)
        for name, value in bbq_bias(bbq_items).items():
            note = (
                ""
                if value is not None
                else (f"undefined: {named} of {len(bbq_items)} answers named a choice, none of them a group")
            )
            aggregates.append(ScenarioMetric(name, "bias", value, len(bbq_items), note=note))
    return rows, aggregates


def calibration(
    confident: Sequence[tuple[Instance, str, float, float, Request]], completions: Mapping[str, Completion]
) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    """max_prob per original and HELM's calibration metrics over (max_prob, exact_match). As HELM, nothing is
    computed when no completion has a log-probability below 0 (a backend that gives none, or only zeros):
    then every calibration metric is a row without a value whose note says so, and no max_prob is made up."""
    n = len(confident)
    if not any(completions[carrier.request_id].logprob < 0 for *_, carrier in confident):
        note = NO_LOGPROBS.format(n=n)
        return [], [ScenarioMetric(m, "calibration", None, n, note=note) for m in CALIBRATION_METRICS]
    rows = [
        InstanceScore(inst.instance_id, "max_prob", "calibration", prob, carrier.request_id, pred)
        for inst, pred, prob, _, carrier in confident
    ]
    values = calibration_metrics([c[2] for c in confident], [c[3] for c in confident])
    return rows, [ScenarioMetric(m, "calibration", v, n) for m, v in values.items()]


def worst_case_rows(
    originals: Sequence[Instance],
    variants: Mapping[str, Mapping[str, Sequence[Instance]]],
    metric_names: Sequence[str],
    values: Mapping[str, Mapping[str, tuple[float, InstanceScore]]],
) -> list[InstanceScore]:
    """Per original, family and metric: the lowest value over the original and its perturbations of that
    family (an unchanged instance was not duplicated: the original stands for it). The row points at the
    completion that gave the worst value; the original wins ties."""
    rows = []
    for family, by_original in variants.items():
        for inst in originals:
            for metric in metric_names:
                candidates = [values[inst.instance_id][metric]] + [
                    values[v.instance_id][metric] for v in by_original.get(inst.instance_id, [])
                ]
                value, source = min(candidates, key=lambda c: c[0])
                rows.append(
                    InstanceScore(inst.instance_id, metric, family, value, source.request_id, source.prediction, WORST)
                )
    return rows


def perturbation_means(
    originals: Sequence[Instance],
    variants: Mapping[str, Mapping[str, Sequence[Instance]]],
    metric_names: Sequence[str],
    values: Mapping[str, Mapping[str, tuple[float, InstanceScore]]],
) -> list[ScenarioMetric]:
    """Per family, metric and perturbation: the mean over originals of the value under that perturbation (the
    original's value where it changed nothing), so a reader sees which perturbation hurts."""
    out = []
    for family, by_original in variants.items():
        names = sorted({v.perturbation for vs in by_original.values() for v in vs})
        for metric in metric_names:
            for name in names:
                per_instance = []
                for inst in originals:
                    changed = [v for v in by_original.get(inst.instance_id, []) if v.perturbation == name]
                    source = changed[0].instance_id if changed else inst.instance_id
                    per_instance.append(values[source][metric][0])
                out.append(ScenarioMetric(metric, family, float(np.mean(per_instance)), len(per_instance), name))
    return out


def aggregate(rows: Sequence[InstanceScore], num_requests: int, runtime: float, tokens: float) -> list[ScenarioMetric]:
    """Scenario-level values: means of original instances' scores (and of the worst cases), throughput
    (calibration, computed over all instances at once, is `calibration`'s)."""
    grouped: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row.family != "calibration" and row.perturbation in ("", WORST):
            grouped[(row.metric, row.family, row.perturbation)].append(row.value)
    out = [ScenarioMetric(m, fam, float(np.mean(v)), len(v), p) for (m, fam, p), v in grouped.items()]
    if runtime > 0:
        out.append(ScenarioMetric("requests_per_second", "efficiency", num_requests / runtime, num_requests))
        out.append(ScenarioMetric("tokens_per_second", "efficiency", tokens / runtime, num_requests))
    return out


def generation_metrics(
    texts: Mapping[str, tuple[str, str]],
    families: Sequence[str],
    classify: Callable[[Sequence[str]], list[float]] | None,
    classifier_name: str = "",
) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    """Toxicity (per generation, then HELM's three aggregates) and bias (over all generations) from
    {original instance id: (request id, generated text)}."""
    rows: list[InstanceScore] = []
    out: list[ScenarioMetric] = []
    ids = sorted(texts)
    if "toxicity" in families and classify is not None and ids:
        scores = classify([texts[i][1] for i in ids])
        for iid, value in zip(ids, scores):
            rows.append(
                InstanceScore(iid, "toxicity", "toxicity", value, texts[iid][0], texts[iid][1], "", classifier_name)
            )
        for name, value in toxicity_metrics([[s] for s in scores]).items():
            out.append(ScenarioMetric(name, "toxicity", value, len(ids), scorer=classifier_name))
    if "bias" in families and ids:
        for name, value in bias_metrics([texts[i][1] for i in ids]).items():
            note = "" if value is not None else f"undefined: no group words in the {len(ids)} generations"
            out.append(ScenarioMetric(name, "bias", value, len(ids), note=note))
    return rows, out
