"""The gate's sequential mode (`holistic gate --sequential`): per scenario, the candidate's and the baseline's
results on the instances both answered, read in a seeded random order a batch at a time, stopped as soon as the
group-sequential test (efficient/sequential.py: exact McNemar for 0/1 results, the exact sign-flip test for other
scores in [0, 1] such as F1; a lower-is-better metric as 1 - value) establishes a regression beyond the tolerance
or rules one out. Every scenario is tested at alpha divided by the number of scenarios (Bonferroni: the family-wise
false-alarm rate stays at most alpha at every look of every scenario). Each row states the instances used against
the full draw and the smallest drop those instances could have found, so that a pass on 50 instances is never read
as "no half-point regression".

Over results already stored, the pairs are read in that order (sequential_gate_of); with BatchedGate the candidate
is evaluated a batch at a time (defs/runner.gate_in_batches), each scenario stopping where its test stops."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from holistic_dagster.alerts.gate import PASS, REGRESSION, UNDECIDED, Verdict
from holistic_dagster.config.alerts import MAIN, MetricRule
from holistic_dagster.efficient.sequential import (
    DEFAULT_LOOK,
    SequentialMcNemar,
    SequentialSignFlip,
    SequentialVerdict,
    bounded,
    sample_order,
    sequential_gate,
)
from holistic_dagster.metrics import lower_is_better, metric
from holistic_dagster.results.efficient import draw_ids, instance_values, partial_evaluations
from holistic_dagster.results.scores import original_scores
from holistic_dagster.warehouse import ResultStore


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


def tolerance_of(rule: MetricRule) -> float:
    """The drop a sequential test tolerates: the rule's critical `drop` (0 without one)."""
    return rule.critical.drop if rule.critical is not None and rule.critical.drop is not None else 0.0


def sequential_gate_of(
    warehouse: ResultStore,
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
    scenario both models answered in full with a metric in [0, 1]."""
    result = SequentialGate(candidate, baseline, version, alpha, look)
    scores = original_scores(warehouse, version, [candidate, baseline])
    partial = partial_evaluations(warehouse, version)
    for p in partial[partial["model"].isin([candidate, baseline])].itertuples(index=False):
        result.undecided.append(f"{p.scenario}: {p.model} was evaluated efficiently (an estimate): complete it first")
    tolerance = tolerance_of(rule)
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
        if not _a_score(name, values):
            result.undecided.append(f"{scenario}: {name} is not a score in [0, 1] (the sequential test needs one)")
            continue
        values = 1 - values if lower_is_better(name) else values  # the tests take higher as better
        pairs[scenario] = (name, values[:, 0], values[:, 1])
    level = alpha / max(len(pairs), 1)
    for scenario, (name, base, cand) in pairs.items():
        verdict = sequential_gate(base, cand, level, tolerance, look, seed=seed)
        result.rows.append(SequentialRow(scenario, name, tolerance, level, verdict))
    return result


class BatchedGate:
    """The sequential gate driving the candidate's evaluation: `batch()` says how many instances of the seeded
    order each undecided scenario should have answered next (None: every scenario is decided), the caller has the
    candidate answer them, and `observe()` reads the pairs and looks. Needs the baseline's results on each
    scenario's whole draw (a metric in [0, 1])."""

    def __init__(
        self,
        warehouse: ResultStore,
        version: str,
        candidate: str,
        baseline: str,
        rule: MetricRule,
        alpha: float,
        main_metric: dict[str, str],
        scenarios: list[str],
        look: int = DEFAULT_LOOK,
    ):
        self.result = SequentialGate(candidate, baseline, version, alpha, look)
        self.rule, self.n = rule, 0
        self.tolerance = tolerance_of(rule)
        baseline_ready = {}
        for scenario in scenarios:
            name = main_metric.get(scenario) if rule.metric == MAIN else rule.metric
            draw = draw_ids(warehouse, version, scenario)
            values = instance_values(warehouse, version, scenario, baseline, rule.family, name)
            if not draw or set(values) != set(draw):
                self.result.undecided.append(f"{scenario}: {baseline} has no {name} results on its whole draw")
            elif not _a_score(name, np.array(list(values.values()))):
                self.result.undecided.append(f"{scenario}: {name} is not a score in [0, 1] (the test needs one)")
            else:
                baseline_ready[scenario] = (name, sample_order(draw), values)
        level = alpha / max(len(baseline_ready), 1)
        self.open = {
            s: (name, order, values, _test_for(values.values(), len(order), level, self.tolerance))
            for s, (name, order, values) in baseline_ready.items()
        }
        self.level = level

    def _sign_flip_from_the_start(
        self, d: np.ndarray, n_full: int
    ) -> tuple[SequentialSignFlip, SequentialVerdict | None]:
        """The sign-flip test replayed over this scenario's looks so far (d: its differences up to now); the first
        verdict it reaches is the gate's, at the look where it reached it."""
        test = SequentialSignFlip(n_full, self.level, self.tolerance)
        for m in _looks_so_far(len(d), self.result.look, n_full):
            if (verdict := test.look(d[:m])) is not None:
                return test, verdict
        return test, None

    def batch(self) -> dict[str, int] | None:
        if not self.open:
            return None
        self.n += self.result.look
        return {s: min(self.n, len(order)) for s, (_, order, _, _) in self.open.items()}

    def observe(self, warehouse: ResultStore) -> None:
        for scenario, (name, order, base, test) in list(self.open.items()):
            n = min(self.n, len(order))
            mine = instance_values(
                warehouse, self.result.version, scenario, self.result.candidate, self.rule.family, name
            )
            asked = order[:n]
            if any(i not in mine for i in asked):  # a failed request is never a pair
                self.result.undecided.append(f"{scenario}: the candidate has no {name} for some of its first {n}")
                del self.open[scenario]
                continue
            d = np.array([mine[i] - base[i] for i in asked]) * (-1 if lower_is_better(name) else 1)
            if not bounded(np.abs(d)):
                self.result.undecided.append(f"{scenario}: the candidate's {name} is not a score in [0, 1]")
                del self.open[scenario]
                continue
            mcnemar = isinstance(test, SequentialMcNemar)
            if mcnemar and not np.isin(d, (-1, 0, 1)).all():
                # right-or-wrong baseline, scores from the candidate (an F1 whose baseline happened to be 0 or 1):
                # the sign-flip test, of which McNemar's is the 0/1 case, as if it had run from the first look
                test, verdict = self._sign_flip_from_the_start(d, len(order))
                self.open[scenario] = (name, order, base, test)
            elif mcnemar:
                verdict = test.look(int((d < 0).sum()), int((d > 0).sum()), n)
            else:
                verdict = test.look(d)
            if verdict is not None:
                self.result.rows.append(SequentialRow(scenario, name, self.tolerance, self.level, verdict))
                del self.open[scenario]


def _looks_so_far(n: int, look: int, n_full: int) -> list[int]:
    """The pairs each look of a batched gate has seen up to n: look, 2 look, ..., n (the full draw at most)."""
    return sorted({min(m, n_full) for m in range(look, n + 1, look)} | {n})


def _a_score(metric_name: str, values: np.ndarray) -> bool:
    """A metric the sequential tests take: declared in [0, 1] and with its values there (runtimes are not)."""
    return tuple(metric(metric_name).bounds) == (0.0, 1.0) and bounded(values)


def _test_for(baseline_values, n_full: int, level: float, tolerance: float) -> SequentialMcNemar | SequentialSignFlip:
    """Exact McNemar where the baseline's results are right-or-wrong, the sign-flip test for other scores."""
    if np.isin(list(baseline_values), (0.0, 1.0)).all():
        return SequentialMcNemar(n_full, level, tolerance)
    return SequentialSignFlip(n_full, level, tolerance)
