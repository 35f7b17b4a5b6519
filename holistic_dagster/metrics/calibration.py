"""Calibration metrics with HELM's definitions (helm/benchmark/metrics/basic_metrics.py,
`compute_calibration_metrics`), which calls Kumar et al.'s uncertainty-calibration library 0.1.4
(p-lambda/verified_calibration, calibration/utils.py): `get_ece_em` (10 equal-mass bins), `get_ece` with one
bin, and `get_selective_stats`.

Inputs per instance: the model's probability for its own prediction (max_prob) and whether the prediction
was correct (HELM: the instance's exact_match).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from holistic_dagster.metrics.registry import declare, scorer
from holistic_dagster.records import InstanceScore, ScenarioMetric

if TYPE_CHECKING:
    from holistic_dagster.metrics.scoring import ScoringInput

SELECTIVE_COVERAGE = 0.1  # selective_acc@10
CALIBRATION_METRICS = ("max_prob", "ece_10_bin", "ece_1_bin", "selective_acc@10", "selective_cov_acc_area")
NOT_COMPUTED = "not computed"  # how a calibration note that means "no value on purpose" starts
# HELM's rule (_has_non_zero_valued_logprobs): calibration needs some completion with a log-probability below 0
NO_LOGPROBS = (
    f"{NOT_COMPUTED}: no log-probabilities (none of the {{n}} completions has one below 0: the backend gives none, "
    "or every answer was empty)"
)

# its scenario value is calibration_metrics' mean, computed with the others; undefined with them when not computed
declare(
    "max_prob", "calibration", "the model's probability for its own prediction", per_instance=True, ci="calibration"
)
declare("ece_10_bin", "calibration", "expected calibration error, 10 equal-mass bins", lower_is_better=True,
        headline=True, ci="calibration")  # fmt: skip
declare("ece_1_bin", "calibration", "|mean confidence - accuracy|", lower_is_better=True, ci="calibration")
declare("selective_acc@10", "calibration", "accuracy on the 10% most confident", ci="calibration")
declare("selective_cov_acc_area", "calibration", "area under the coverage-accuracy curve", ci="calibration")


def equal_mass_bin_edges(probs: np.ndarray, num_bins: int) -> np.ndarray:
    """The library's `get_equal_bins`: split the sorted probabilities into min(num_bins, n) runs of nearly
    equal count (np.array_split), put an upper edge halfway between neighbouring runs, end with 1.0, and drop
    duplicate edges (tied probabilities across a split give the same edge twice)."""
    runs = np.array_split(np.sort(np.asarray(probs, float)), min(num_bins, len(probs)))
    edges = [(low[-1] + high[0]) / 2.0 for low, high in zip(runs, runs[1:])]
    return np.unique(edges + [1.0])


def equal_mass_bins(probs: np.ndarray, correct: np.ndarray, num_bins: int) -> list[tuple[float, float, int]]:
    """(mean confidence, accuracy, size) per non-empty bin, in order of confidence: what ECE averages over,
    and what a reliability diagram plots. As the library's `fast_bin`, a probability goes to the first bin
    whose upper edge is >= it (np.searchsorted, side left), so equal probabilities always share a bin; one
    above 1.0 joins the last bin."""
    probs, correct = np.asarray(probs, float), np.asarray(correct, float)
    if len(probs) == 0:
        return []
    edges = equal_mass_bin_edges(probs, num_bins)
    index = np.minimum(np.searchsorted(edges, probs), len(edges) - 1)
    # sums per bin in one pass each (the bootstrap bins every resample: a mask per bin was most of its time)
    size = np.bincount(index, minlength=len(edges))
    conf, acc = np.bincount(index, probs, len(edges)), np.bincount(index, correct, len(edges))
    return [(float(conf[b] / size[b]), float(acc[b] / size[b]), int(size[b])) for b in np.flatnonzero(size)]


def expected_calibration_error(probs: np.ndarray, correct: np.ndarray, num_bins: int) -> float:
    """The library's plug-in ECE: |mean confidence - accuracy| per bin, weighted by the bin's share of the
    instances (empty bins weigh nothing). One bin: |mean confidence - accuracy| over all instances, which is
    also what HELM's ece_1_bin (`get_ece`, one equal-width bin up to 1.0) computes."""
    if len(probs) == 0:
        return float("nan")
    bins = equal_mass_bins(probs, correct, num_bins)
    return float(sum(n * abs(conf - acc) for conf, acc, n in bins) / len(probs))


def _confidence_order(probs: np.ndarray) -> np.ndarray:
    """Most confident first. The library sorts with np.argsort(-probs) (numpy's default, unstable kind), which
    leaves the order of equal probabilities to the numpy build (insertion sort for small arrays, x86-simd-sort
    on AVX-512 machines). We keep equal probabilities in input order (stable), the same on every machine."""
    return np.argsort(-np.asarray(probs, float), kind="stable")


def selective_accuracy(probs: np.ndarray, correct: np.ndarray, coverage: float = SELECTIVE_COVERAGE) -> float:
    """The library's `get_selective_stats` accuracy: over the int(coverage * n) + 1 most confident instances
    (HELM's selective_acc@10 uses coverage 0.1: 1 instance of 9, 2 of 10, 11 of 100)."""
    correct = np.asarray(correct, float)[_confidence_order(probs)]
    k = int(coverage * len(correct)) + 1
    return float(correct[:k].mean())


def selective_coverage_accuracy_area(probs: np.ndarray, correct: np.ndarray) -> float:
    """Area under the coverage-accuracy curve (`get_selective_stats`): the mean, over k = 1..n, of the
    accuracy on the k most confident instances."""
    correct = np.asarray(correct, float)[_confidence_order(probs)]
    running = np.cumsum(correct) / np.arange(1, len(correct) + 1)
    return float(running.mean())


def calibration_metrics(probs: list[float], correct: list[float]) -> dict[str, float]:
    """CALIBRATION_METRICS over (max_prob, correct) pairs ({} for none). HELM's platt_* recalibration metrics
    are not computed."""
    p, c = np.asarray(probs, float), np.asarray(correct, float)
    if len(p) == 0:
        return {}
    values = (
        float(p.mean()),
        expected_calibration_error(p, c, 10),
        expected_calibration_error(p, c, 1),
        selective_accuracy(p, c),
        selective_coverage_accuracy_area(p, c),
    )
    return dict(zip(CALIBRATION_METRICS, values))


def calibration_metrics_per_row(probs: np.ndarray, correct: np.ndarray) -> dict[str, np.ndarray]:
    """calibration_metrics of every row of two (rows, n) arrays at once, as calling it row by row would give
    (the bootstrap's resamples: 1,000 resamples of 639 pairs took 0.46-0.54 s one call each, 0.19 s here).
    Probabilities outside [0, 1] (none come from log-probabilities) take the row-by-row path."""
    p, c = np.asarray(probs, float), np.asarray(correct, float)
    if p.shape[1] == 0 or not ((p >= 0) & (p <= 1)).all():
        rows = [calibration_metrics(pr, cr) for pr, cr in zip(p, c)]
        return {m: np.array([r[m] for r in rows]) for m in CALIBRATION_METRICS} if p.shape[1] else {}
    n = p.shape[1]
    ranked = np.take_along_axis(c, np.argsort(-p, axis=1, kind="stable"), axis=1)  # _confidence_order per row
    return dict(
        zip(
            CALIBRATION_METRICS,
            (
                p.mean(axis=1),
                _ece_per_row(p, c, 10),
                _ece_per_row(p, c, 1),
                ranked[:, : int(SELECTIVE_COVERAGE * n) + 1].mean(axis=1),
                (np.cumsum(ranked, axis=1) / np.arange(1, n + 1)).mean(axis=1),
            ),
        )
    )


def _ece_per_row(p: np.ndarray, c: np.ndarray, num_bins: int) -> np.ndarray:
    """expected_calibration_error of each row (probabilities within [0, 1]): equal_mass_bins' edges and bins,
    found for all rows at once. A probability's bin is the number of edges below it (searchsorted, side left);
    a repeated edge counts as its first copy (np.unique); one above the last edge joins the last bin."""
    rows, n = p.shape
    m = min(num_bins, n)
    run_sizes = np.full(m, n // m)
    run_sizes[: n % m] += 1  # np.array_split: the first n % m runs hold one more
    starts = np.cumsum(run_sizes)[:-1]  # where runs 2..m start in the sorted row
    ordered = np.sort(p, axis=1)
    edges = np.concatenate([(ordered[:, starts - 1] + ordered[:, starts]) / 2.0, np.ones((rows, 1))], axis=1)
    below = np.zeros((rows, n), dtype=np.intp)
    first_copy = np.zeros((rows, m), dtype=np.intp)  # edges ascend: the index of each edge's first copy
    for k in range(m):
        below += p > edges[:, k : k + 1]
        first_copy += edges > edges[:, k : k + 1]
    index = np.take_along_axis(first_copy, np.minimum(below, m - 1), axis=1)
    flat = (index + m * np.arange(rows)[:, None]).ravel()
    size = np.bincount(flat, minlength=rows * m).reshape(rows, m)
    conf = np.bincount(flat, p.ravel(), rows * m).reshape(rows, m)
    acc = np.bincount(flat, c.ravel(), rows * m).reshape(rows, m)
    with np.errstate(invalid="ignore", divide="ignore"):
        gaps = np.where(size > 0, size * np.abs(conf / size - acc / size), 0.0)
    return gaps.sum(axis=1) / n


@scorer("calibration", "calibration", CALIBRATION_METRICS)
def calibration(given: ScoringInput) -> tuple[list[InstanceScore], list[ScenarioMetric]]:
    """max_prob per original and HELM's calibration metrics over (max_prob, exact_match). As HELM, nothing is
    computed when no completion has a log-probability below 0 (a backend that gives none, or only zeros):
    then every calibration metric is a row without a value whose note says so, and no max_prob is made up."""
    predictions = given.predictions
    n = len(predictions)
    if not any(given.completions[p.carrier.request_id].logprob < 0 for p in predictions):
        note = NO_LOGPROBS.format(n=n)
        return [], [ScenarioMetric(m, "calibration", None, n, note=note) for m in CALIBRATION_METRICS]
    rows = [
        InstanceScore(p.instance.instance_id, "max_prob", "calibration", p.prob, p.carrier.request_id, p.text)
        for p in predictions
    ]
    values = calibration_metrics([p.prob for p in predictions], [p.correct for p in predictions])
    return rows, [ScenarioMetric(m, "calibration", v, n) for m, v in values.items()]
