"""From completions to scores: the prediction each adapter method implies, then every metric family."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

from holistic_dagster.metrics import get_reference_metric
from holistic_dagster.metrics.calibration import calibration_metrics
from holistic_dagster.records import Completion, Instance, InstanceScore, Request, ScenarioMetric
from holistic_dagster.scenarios.loaders import CHOICE_LABELS

EFFICIENCY_METRICS = ("runtime_s", "num_prompt_tokens", "num_output_tokens")


def metrics_per_instance(metric_names: Sequence[str]) -> int:
    """Rows each evaluated instance gets: its accuracy metrics, max_prob, and the efficiency metrics."""
    return len(metric_names) + 1 + len(EFFICIENCY_METRICS)


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
        prob = math.exp(completion.logprob) if completion.logprobs else 0.0
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


def score_instances(
    method: str,
    metric_names: Sequence[str],
    instances: Sequence[Instance],
    requests: Sequence[Request],
    completions: Mapping[str, Completion],
) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    metrics = [get_reference_metric(n) for n in metric_names]
    by_instance: dict[str, list[Request]] = defaultdict(list)
    for r in requests:
        by_instance[r.instance_id].append(r)
    rows: list[InstanceScore] = []
    probs, correct = [], []
    runtime = prompt_tokens = output_tokens = 0.0
    for inst in instances:
        reqs = by_instance[inst.instance_id]
        pred, prob, carrier = predict(method, inst, reqs, completions)
        golds = inst.correct_references
        values = {m.name: max(m.fn(g.output, pred) for g in golds) for m in metrics}
        for m in metrics:
            rows.append(InstanceScore(inst.instance_id, m.name, m.family, values[m.name], carrier.request_id, pred))
        probs.append(prob)
        correct.append(values[metrics[0].name])
        rows.append(InstanceScore(inst.instance_id, "max_prob", "calibration", prob, carrier.request_id, pred))
        done = [completions[r.request_id] for r in reqs]
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
    return rows, aggregate(rows, probs, correct, len(requests), runtime, prompt_tokens + output_tokens)


def aggregate(
    rows: Sequence[InstanceScore],
    probs: list[float],
    correct: list[float],
    num_requests: int,
    runtime: float,
    tokens: float,
) -> list[ScenarioMetric]:
    """Scenario-level values: means of instance scores, calibration over all instances, throughput."""
    grouped: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row.metric != "max_prob":
            grouped[(row.metric, row.family)].append(row.value)
    out = [ScenarioMetric(m, fam, float(np.mean(v)), len(v)) for (m, fam), v in grouped.items()]
    out += [ScenarioMetric(m, "calibration", v, len(probs)) for m, v in calibration_metrics(probs, correct).items()]
    if runtime > 0:
        out.append(ScenarioMetric("requests_per_second", "efficiency", num_requests / runtime, num_requests))
        out.append(ScenarioMetric("tokens_per_second", "efficiency", tokens / runtime, num_requests))
    return out
