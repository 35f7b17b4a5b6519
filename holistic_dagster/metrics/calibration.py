"""Calibration metrics (HELM, after Kumar et al. 2019's uncertainty-calibration library).

Inputs per instance: the model's probability for its own prediction (max_prob) and whether the
prediction was correct.
"""

from __future__ import annotations

import numpy as np


def equal_mass_bins(probs: np.ndarray, correct: np.ndarray, num_bins: int) -> list[tuple[float, float, int]]:
    """Sort by probability and split into `num_bins` bins of (nearly) equal count: (mean confidence,
    accuracy, size) per bin. What ECE averages over, and what a reliability diagram plots."""
    probs, correct = np.asarray(probs, float), np.asarray(correct, float)
    order = np.argsort(probs, kind="stable")
    return [
        (float(probs[b].mean()), float(correct[b].mean()), len(b))
        for b in np.array_split(order, min(num_bins, len(probs)))
    ]


def expected_calibration_error(probs: np.ndarray, correct: np.ndarray, num_bins: int) -> float:
    """ECE with equal-mass bins: |mean confidence - accuracy| averaged over bins, weighted by bin size."""
    if len(probs) == 0:
        return float("nan")
    bins = equal_mass_bins(probs, correct, num_bins)
    return float(sum(n * abs(conf - acc) for conf, acc, n in bins) / len(probs))


def selective_accuracy(probs: np.ndarray, correct: np.ndarray, coverage: float) -> float:
    """Accuracy on the `coverage` fraction of instances the model is most confident about (HELM's
    selective_acc@10 uses coverage 0.1)."""
    probs, correct = np.asarray(probs, float), np.asarray(correct, float)
    k = max(1, int(round(coverage * len(probs))))
    order = np.argsort(-probs, kind="stable")
    return float(correct[order[:k]].mean())


def selective_coverage_accuracy_area(probs: np.ndarray, correct: np.ndarray) -> float:
    """Area under the coverage-accuracy curve: the mean, over k = 1..n, of the accuracy on the k most
    confident instances."""
    probs, correct = np.asarray(probs, float), np.asarray(correct, float)
    order = np.argsort(-probs, kind="stable")
    running = np.cumsum(correct[order]) / np.arange(1, len(probs) + 1)
    return float(running.mean())


def calibration_metrics(probs: list[float], correct: list[float]) -> dict[str, float]:
    p, c = np.asarray(probs, float), np.asarray(correct, float)
    if len(p) == 0:
        return {}
    return {
        "max_prob": float(p.mean()),
        "ece_10_bin": expected_calibration_error(p, c, 10),
        "ece_1_bin": expected_calibration_error(p, c, 1),
        "selective_acc@10": selective_accuracy(p, c, 0.1),
        "selective_cov_acc_area": selective_coverage_accuracy_area(p, c),
    }
