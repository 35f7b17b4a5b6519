"""The CI gate: a candidate against its baseline on one suite version, on the instances both answered, graded by
resources/alerts.yaml's metric rules (the same definitions the alerts asset grades with) and decided as an exit
status: 0 no regression, 1 regression, 2 could not decide.

Per rule and scenario the paired difference, its bootstrap 95% CI and a paired test: exact McNemar (the
discordant pairs against Binomial(n, 1/2)) where both models' values are 0/1, the paired permutation test
otherwise. Every scenario x rule is a test of its own, so the p-values are adjusted for testing them all at once
with Holm's step-down method: it controls the family-wise error rate (the chance that a gate fails a candidate
that regressed nowhere) under any dependence between scenarios, which a CI gate needs more than the power that
Benjamini-Hochberg's false-discovery rate would buy. A `drop` threshold is crossed when the difference is larger
than its tolerance AND the adjusted test says worse; `below` / `above` judge the candidate's mean alone."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import pandas as pd

from holistic_dagster.alerts.grading import grade, metric_crossed
from holistic_dagster.config.alerts import MAIN, AlertsSpec, Level, MetricRule, MetricThreshold
from holistic_dagster.metrics import lower_is_better
from holistic_dagster.metrics.statistics import PairedResult, paired_test
from holistic_dagster.results.efficient import partial_evaluations
from holistic_dagster.results.predictions import worse_instances
from holistic_dagster.results.scores import original_scores
from holistic_dagster.warehouse import ResultStore

# scipy is imported in the functions that use it: a second of import that every command paid, which loads this
# module with the pipeline's definitions and mostly never calls it

PASS, REGRESSION, UNDECIDED = 0, 1, 2  # the exit statuses
Verdict = Literal["pass", "regression", "undecided"]
MIN_INSTANCES = 10  # fewer shared instances on a scenario: it cannot be decided
# where alerts.yaml has no metric rule: any significant drop of a scenario's main metric fails the gate
DEFAULT_RULE = MetricRule(kind="metric", name="accuracy", critical=MetricThreshold(drop=0.0))


@dataclass(frozen=True)
class GateRow:
    """One rule on one scenario. value / baseline_value: means over the n shared instances; diff = value -
    baseline_value with its bootstrap 95% CI; p_value: the paired test's, p_adjusted: Holm's over every row;
    baseline_only / candidate_only: instances right (value > 0) for one model and not the other (0/1 metrics)."""

    scenario: str
    rule: str
    family: str
    metric: str
    n: int
    baseline_value: float
    value: float
    diff: float
    ci_low: float
    ci_high: float
    test: str  # "exact McNemar" | "permutation"
    p_value: float
    p_adjusted: float
    change: str  # "better" | "worse" | "no significant change", at alpha after adjustment
    level: Level
    threshold: str  # the threshold that set the level ('' when ok)
    baseline_only: int | None = None
    candidate_only: int | None = None


@dataclass
class GateResult:
    candidate: str
    baseline: str
    version: str
    alpha: float
    rules: list[str]
    rows: list[GateRow] = field(default_factory=list)
    undecided: list[str] = field(default_factory=list)  # why a scenario (or the whole) could not be decided

    @property
    def regressions(self) -> list[GateRow]:
        return [r for r in self.rows if r.level == "critical"]

    @property
    def warnings(self) -> list[GateRow]:
        return [r for r in self.rows if r.level == "warning"]

    @property
    def verdict(self) -> Verdict:
        if self.regressions:
            return "regression"  # a regression shown is decisive, whatever else could not be decided
        return "undecided" if self.undecided or not self.rows else "pass"

    @property
    def exit_status(self) -> int:
        return {"pass": PASS, "regression": REGRESSION, "undecided": UNDECIDED}[self.verdict]


def gate_rules(spec: AlertsSpec) -> list[MetricRule]:
    """The alerts file's metric rules (latency and stability are graded by the alerts asset, not gated: their
    values depend on the machine and on re-asking), or DEFAULT_RULE where it has none."""
    return [r for r in spec.rules if isinstance(r, MetricRule)] or [DEFAULT_RULE]


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided exact McNemar p-value for paired 0/1 outcomes: of the pairs where the two differ, how
    surprising the split is under Binomial(discordant, 1/2); 1 where they never differ."""
    from scipy.stats import binomtest

    only_a, only_b = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    if only_a + only_b == 0:
        return 1.0
    return float(binomtest(only_a, only_a + only_b, 0.5).pvalue)


def holm(p_values: list[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (step-down, kept monotone), in the input order."""
    order = sorted(range(len(p_values)), key=p_values.__getitem__)
    adjusted, running = [0.0] * len(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


def gate(
    warehouse: ResultStore,
    version: str,
    candidate: str,
    baseline: str,
    rules: list[MetricRule],
    alpha: float,
    main_metric: dict[str, str],
    min_instances: int = MIN_INSTANCES,
) -> GateResult:
    """Grades the candidate against the baseline on every scenario the suite version scored either on."""
    result = GateResult(candidate, baseline, version, alpha, [r.label for r in rules])
    scores = original_scores(warehouse, version, [candidate, baseline])
    partial = partial_evaluations(warehouse, version)
    partial = partial[partial["model"].isin([baseline, candidate])]
    for p in partial.itertuples(index=False):  # an estimate is never gated on as if it were a measurement
        result.undecided.append(
            f"{p.scenario}: {p.model} was evaluated efficiently ({p.n_evaluated} of {p.n_full} instances, an "
            f"estimate): complete it with `holistic evaluate --model {p.model}` to gate on it"
        )
    for model in (baseline, candidate):
        if not (scores["model"] == model).any() and not (partial["model"] == model).any():
            result.undecided.append(f"{model} has no scores in suite version {version}: evaluate it first")
    if result.undecided:
        return result
    tests: list[tuple[MetricRule, str, pd.DataFrame, PairedResult, str, bool]] = []
    for scenario in sorted(set(scores["scenario"]) - set(partial["scenario"])):
        mine = scores[scores["scenario"] == scenario]
        missing = [m for m in (baseline, candidate) if not (mine["model"] == m).any()]
        if missing:
            result.undecided.append(f"{scenario}: no scores for {' and '.join(missing)}")
            continue
        for rule in rules:
            if rule.scenarios is not None and scenario not in rule.scenarios:
                continue
            name = main_metric.get(scenario) if rule.metric == MAIN else rule.metric
            part = mine[(mine["family"] == rule.family) & (mine["metric"] == name)]
            wide = part.pivot_table(index="instance_id", columns="model", values="value", aggfunc="first")
            if baseline not in wide or candidate not in wide:
                continue  # the rule's metric does not apply here
            wide = wide[[baseline, candidate]].dropna()
            if len(wide) < min_instances:
                result.undecided.append(
                    f"{scenario}: {len(wide)} shared instance(s) for {rule.label} (at least {min_instances} needed)"
                )
                continue
            a, b = wide[baseline].to_numpy(float), wide[candidate].to_numpy(float)
            lower = lower_is_better(name)
            paired = paired_test(a, b, lower_better=lower, alpha=alpha)
            binary = bool(np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all())
            if binary:
                paired = replace(paired, p_value=mcnemar_exact(a, b))
            tests.append((rule, scenario, wide, paired, name, binary))
    adjusted = holm([t[3].p_value for t in tests])
    for (rule, scenario, wide, paired, name, binary), p_adjusted in zip(tests, adjusted):
        lower = lower_is_better(name)
        improved = paired.diff < 0 if lower else paired.diff > 0
        change = "no significant change"
        if p_adjusted < alpha and paired.diff != 0:
            change = "better" if improved else "worse"
        decided = replace(paired, p_value=p_adjusted, verdict=change)
        level, threshold, _ = grade(rule, lambda t: metric_crossed(t, decided, lower), alpha)
        a, b = wide[baseline].to_numpy(float), wide[candidate].to_numpy(float)
        result.rows.append(
            GateRow(
                scenario=scenario, rule=rule.label, family=rule.family, metric=name, n=paired.n,
                baseline_value=paired.mean_a, value=paired.mean_b, diff=paired.diff, ci_low=paired.ci_low,
                ci_high=paired.ci_high, test="exact McNemar" if binary else "permutation", p_value=paired.p_value,
                p_adjusted=p_adjusted, change=change, level=level, threshold=threshold,
                baseline_only=int(np.sum((a > 0) & (b == 0))) if binary else None,
                candidate_only=int(np.sum((a == 0) & (b > 0))) if binary else None,
            )
        )  # fmt: skip
    return result


def regression_examples(
    warehouse: ResultStore, result: GateResult, row: GateRow, limit: int, prefer: list[str] = ()
) -> pd.DataFrame:
    """Up to `limit` original instances of a row where the candidate did worse than the baseline (for a 0/1
    metric: the baseline right, the candidate wrong): instance_id, input and both predictions. Instances in
    `prefer` (e.g. those the report's predictions page shows) come first, then the largest differences."""
    frame = worse_instances(
        warehouse, result.version, row.scenario, row.family, row.metric, result.baseline, result.candidate
    )
    rank = {i: k for k, i in enumerate(prefer)}
    frame = frame.assign(_rank=frame["instance_id"].map(lambda i: rank.get(i, len(rank))))
    ordered = frame.sort_values(["_rank", "size", "instance_id"], ascending=[True, False, True], kind="stable")
    return ordered.drop(columns=["_rank", "size"]).head(limit).reset_index(drop=True)
