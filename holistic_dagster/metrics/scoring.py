"""From completions to scores: the prediction each adapter method implies, then every metric family that
applies to the scenario.

Per original (unperturbed) instance: the reference (accuracy) metrics, the maximum over correct references as
in HELM. exact_match is scored wherever calibration applies, listed or not: HELM's calibration pairs the
model's probability with the instance's exact_match whatever the scenario's main metric. Per perturbed
instance: the same metrics, in the perturbation's family (robustness or fairness); per original and family the
worst value over the original and its perturbations (HELM's worst case), and per perturbation the mean, so a
reader sees which one hurts. Every other family (calibration, efficiency, toxicity, bias) is computed by the
scorers registered for it (see holistic_dagster.metrics), from the same predictions.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from holistic_dagster.adaptation.methods import adapter_method
from holistic_dagster.metrics import (
    PERTURBATION_FAMILIES,
    WORST,
    ReferenceMetric,
    Scorer,
    get_reference_metric,
    metric,
    scorers,
)
from holistic_dagster.metrics.accuracy import exact_match
from holistic_dagster.perturbations import get_perturbation
from holistic_dagster.records import (
    Completion,
    Instance,
    InstanceScore,
    Price,
    Request,
    SafetyJudgement,
    ScenarioMetric,
)

CORRECTNESS = "exact_match"  # what calibration calls correct (HELM: the instance's exact_match stat)


def scored_metrics(metric_names: Sequence[str], families: Sequence[str]) -> list[str]:
    """The reference metrics scored per instance: the scenario's (those a scorer computes, such as a ranking's
    RR@10, come from their scorer), and exact_match where calibration applies (HELM's calibration needs it; its
    row lets the summary pair max_prob with it again)."""
    if "accuracy" not in families:
        return []
    listed = [n for n in metric_names if isinstance(metric(n), ReferenceMetric)]
    extra = [CORRECTNESS] if "calibration" in families and CORRECTNESS not in listed else []
    return [*listed, *extra]


def on_every_original(name: str, family: str = "") -> bool:
    """A metric with a row for every evaluated original instance (a robustness or fairness row is a perturbation's)."""
    m = metric(name)
    return m.per_instance and m.on_every_instance and family not in PERTURBATION_FAMILIES


def metrics_per_instance(
    metric_names: Sequence[str],
    families: Sequence[str],
    method: str = "generation",
    extra_metrics: Sequence[str] = (),
    priced: bool = False,
) -> int:
    """Rows each evaluated original instance gets outside robustness and fairness: its reference metrics and the
    per-instance metrics of the scorers that run on it (accuracy scorers such as ranking's; calibration,
    efficiency, toxicity; cost only for a model with a price). (A run whose calibration is "not computed" has no
    max_prob rows: quality.check_scores expects one fewer then.)"""
    n = len(scored_metrics(metric_names, families))
    for s in applicable_scorers(method, families, extra_metrics):
        n += sum(on_every_original(m) and (priced or not metric(m).priced_only) for m in s.metrics)
    return n


def predict(
    method: str, instance: Instance, requests: Sequence[Request], completions: Mapping[str, Completion]
) -> tuple[str, float, Request]:
    """(prediction text, the model's probability for it, the request that carries it), as the adapter method reads
    its answers (adaptation.methods)."""
    return adapter_method(method).predict(instance, requests, completions)


def _by_instance(requests: Sequence[Request]) -> dict[str, list[Request]]:
    by_instance: dict[str, list[Request]] = defaultdict(list)
    for r in requests:
        by_instance[r.instance_id].append(r)
    return by_instance


def _correctness(instance: Instance, prediction: str) -> float:
    """The instance's exact_match (max over its correct references): what calibration calls correct."""
    return max((exact_match(g.output, prediction) for g in instance.correct_references), default=0.0)


@dataclass(frozen=True)
class Prediction:
    """What the model answered on one evaluated original: the prediction, its probability, the instance's
    exact_match (what calibration calls correct), the request carrying it and all the instance's requests."""

    instance: Instance
    text: str
    prob: float
    correct: float
    carrier: Request
    requests: tuple[Request, ...]

    @property
    def choice_index(self) -> int:
        """The index of the choice the prediction names (-1: none of them)."""
        outputs = [r.output for r in self.instance.references]
        return outputs.index(self.text) if self.text in outputs else -1


def predictions_of(
    method: str, instances: Sequence[Instance], requests: Sequence[Request], completions: Mapping[str, Completion]
) -> list[Prediction]:
    """What the model answered on each original (unperturbed) instance, in order: what every scorer reads, and
    what safety's judges judge before scoring."""
    by_instance = _by_instance(requests)
    out = []
    for inst in (i for i in instances if not i.perturbation):
        mine = by_instance[inst.instance_id]
        text, prob, carrier = predict(method, inst, mine, completions)
        out.append(Prediction(inst, text, prob, _correctness(inst, text), carrier, tuple(mine)))
    return out


@dataclass(frozen=True)
class ScoringInput:
    """What a family's scorer receives (see metrics.scorer)."""

    method: str
    predictions: Sequence[Prediction]  # one per evaluated original, in instance order
    completions: Mapping[str, Completion]
    classify: Callable[[Sequence[str]], list[float]] | None = None  # the suite's toxicity classifier
    classifier_name: str = ""
    price: Price | None = None  # what the model's provider charges (none: a local model)
    # {judge: {instance_id: judgement}} of the answers' safety, by the judges whose agreement with people qualified
    safety_judgements: Mapping[str, Mapping[str, SafetyJudgement]] = field(default_factory=dict)


def score_instances(
    method: str,
    metric_names: Sequence[str],
    instances: Sequence[Instance],
    requests: Sequence[Request],
    completions: Mapping[str, Completion],
    families: Sequence[str] = ("accuracy", "calibration", "efficiency"),
    extra_metrics: Sequence[str] = (),
    classify: Callable[[Sequence[str]], list[float]] | None = None,
    classifier_name: str = "",
    price: Price | None = None,
    safety_judgements: Mapping[str, Mapping[str, SafetyJudgement]] | None = None,
) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    """Every metric of the families that apply: the reference metrics per instance (and per perturbed instance,
    with worst cases and per-perturbation means), then each registered scorer of an applying family."""
    metrics = [get_reference_metric(n) for n in scored_metrics(metric_names, families)]
    by_instance = _by_instance(requests)
    originals = [i for i in instances if not i.perturbation]
    rows: list[InstanceScore] = []
    values: dict[str, dict[str, tuple[float, InstanceScore]]] = {}  # instance -> metric -> (value, row)

    def accuracy_rows(inst: Instance, family: str, pred: str, carrier: Request) -> None:
        values[inst.instance_id] = {}
        for m in metrics:
            value = max(m.fn(g.output, pred) for g in inst.correct_references)
            row = InstanceScore(inst.instance_id, m.name, family, value, carrier.request_id, pred, inst.perturbation)
            values[inst.instance_id][m.name] = (value, row)
            rows.append(row)

    predictions = predictions_of(method, originals, requests, completions)
    for p in predictions:
        accuracy_rows(p.instance, "accuracy", p.text, p.carrier)

    scored = {i.instance_id for i in originals}
    variants: dict[str, dict[str, list[Instance]]] = defaultdict(lambda: defaultdict(list))  # family -> original
    for inst in instances:
        if inst.perturbation and inst.original_id in scored and metrics:
            family = get_perturbation(inst.perturbation).family
            if family in families:
                pred, _, carrier = predict(method, inst, by_instance[inst.instance_id], completions)
                accuracy_rows(inst, family, pred, carrier)
                variants[family][inst.original_id].append(inst)
    rows += worst_case_rows(originals, variants, [m.name for m in metrics], values)

    given = ScoringInput(method, predictions, completions, classify, classifier_name, price, safety_judgements or {})
    aggregates: list[ScenarioMetric] = []
    for s in applicable_scorers(method, families, extra_metrics):
        more_rows, more = s.fn(given)
        undeclared = {x.metric for x in [*more_rows, *more]} - set(s.metrics)
        if undeclared:
            raise ValueError(f"scorer {s.name!r} produced undeclared metrics {sorted(undeclared)}")
        rows += more_rows
        aggregates += more
    aggregates = means(rows) + aggregates
    aggregates += perturbation_means(originals, variants, [m.name for m in metrics], values)
    return rows, aggregates


def applicable_scorers(method: str, families: Sequence[str], extra_metrics: Sequence[str] = ()) -> list[Scorer]:
    """The registered scorers that run on a scenario: those of its families (an opt-in one only when named in
    its extra_metrics; one limited to some adapter methods, or to open-ended ones, only for those)."""
    return [
        s
        for s in scorers().values()
        if s.family in families
        and (not s.extra or s.name in extra_metrics)
        and (s.methods is None or method in s.methods)
        and (not s.open_ended or adapter_method(method).open_ended)
    ]


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
            for m in metric_names:
                candidates = [values[inst.instance_id][m]] + [
                    values[v.instance_id][m] for v in by_original.get(inst.instance_id, [])
                ]
                value, source = min(candidates, key=lambda c: c[0])
                rows.append(
                    InstanceScore(inst.instance_id, m, family, value, source.request_id, source.prediction, WORST)
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
        for m in metric_names:
            for name in names:
                per_instance = []
                for inst in originals:
                    changed = [v for v in by_original.get(inst.instance_id, []) if v.perturbation == name]
                    source = changed[0].instance_id if changed else inst.instance_id
                    per_instance.append(values[source][m][0])
                out.append(ScenarioMetric(m, family, float(np.mean(per_instance)), len(per_instance), name))
    return out


def means(rows: Sequence[InstanceScore]) -> list[ScenarioMetric]:
    """Scenario values of the metrics declared as means of their per-instance rows, over the original instances
    (and over the worst cases)."""
    grouped: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        if row.perturbation in ("", WORST) and metric(row.metric).mean_of_instances:
            grouped[(row.metric, row.family, row.perturbation)].append(row.value)
    return [ScenarioMetric(m, fam, float(np.mean(v)), len(v), p) for (m, fam, p), v in grouped.items()]
