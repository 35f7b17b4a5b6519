"""The gate's sequential mode (`holistic gate --sequential`): per scenario, the candidate's and the baseline's 0/1
results on the instances both answered, read in a seeded random order a batch at a time, stopped as soon as the
group-sequential exact McNemar test (efficient/sequential.py) establishes a regression beyond the tolerance or
rules one out. Every scenario is tested at alpha divided by the number of scenarios (Bonferroni: the family-wise
false-alarm rate stays at most alpha at every look of every scenario). Each row states the instances used against
the full draw and the smallest drop those instances could have found, so that a pass on 50 instances is never read
as "no half-point regression"."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from holistic_dagster.alerts.gate import PASS, REGRESSION, UNDECIDED, Verdict
from holistic_dagster.config.alerts import MAIN, MetricRule
from holistic_dagster.efficient.sequential import DEFAULT_LOOK, SequentialVerdict, sequential_gate
from holistic_dagster.results.efficient import partial_evaluations
from holistic_dagster.results.scores import original_scores
from holistic_dagster.warehouse import Warehouse


@dataclass(frozen=True)
class SequentialRow:
    scenario: str
    metric: str
    tolerance: float
    alpha: float  # this scenario's level (alpha / scenarios)
    result: SequentialVerdict


@dataclass
class SequentialGate:
    candidate: str
    baseline: str
    version: str
    alpha: float
    look: int
    rows: list[SequentialRow] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        if any(r.result.verdict == "regression" for r in self.rows):
            return "regression"
        return "undecided" if self.undecided or not self.rows else "pass"

    @property
    def exit_status(self) -> int:
        return {"pass": PASS, "regression": REGRESSION, "undecided": UNDECIDED}[self.verdict]

    @property
    def instances_used(self) -> tuple[int, int]:
        return sum(r.result.stopped_at for r in self.rows), sum(r.result.n_full for r in self.rows)


def sequential_gate_of(
    warehouse: Warehouse,
    version: str,
    candidate: str,
    baseline: str,
    rule: MetricRule,
    alpha: float,
    main_metric: dict[str, str],
    look: int = DEFAULT_LOOK,
    seed: int = 0,
) -> SequentialGate:
    """The sequential gate of one metric rule (its critical `drop` is the tolerance; 0 without one) on every
    scenario both models answered in full with a 0/1 metric."""
    result = SequentialGate(candidate, baseline, version, alpha, look)
    scores = original_scores(warehouse, version, [candidate, baseline])
    partial = partial_evaluations(warehouse, version)
    for p in partial[partial["model"].isin([candidate, baseline])].itertuples(index=False):
        result.undecided.append(f"{p.scenario}: {p.model} was evaluated efficiently (an estimate): complete it first")
    tolerance = rule.critical.drop if rule.critical is not None and rule.critical.drop is not None else 0.0
    pairs = {}
    for scenario in sorted(set(scores["scenario"])):
        name = main_metric.get(scenario) if rule.metric == MAIN else rule.metric
        part = scores[(scores["scenario"] == scenario) & (scores["family"] == rule.family)]
        part = part[(part["metric"] == name) & (part["perturbation"] == "")]
        wide = part.pivot_table(index="instance_id", columns="model", values="value", aggfunc="first")
        if baseline not in wide or candidate not in wide:
            result.undecided.append(f"{scenario}: no {name} results for both models")
            continue
        wide = wide[[baseline, candidate]].dropna().sort_index()
        values = wide.to_numpy(float)
        if not np.isin(values, (0.0, 1.0)).all():
            result.undecided.append(f"{scenario}: {name} is not right-or-wrong (the sequential test needs 0/1)")
            continue
        pairs[scenario] = (name, values[:, 0], values[:, 1])
    level = alpha / max(len(pairs), 1)
    for scenario, (name, base, cand) in pairs.items():
        verdict = sequential_gate(base, cand, level, tolerance, look, seed=seed)
        result.rows.append(SequentialRow(scenario, name, tolerance, level, verdict))
    return result
