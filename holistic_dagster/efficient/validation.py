"""Validation on a models x items matrix: fit on some models, estimate the others from k anchors, and compare with
their full-draw scores and with uniform random samples of the same k; run the sequential gate on every pair of
models and compare its verdicts with the full draw's. What `holistic efficient validate` prints and writes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from holistic_dagster.efficient.anchors import (
    DEFAULT_ANCHORS,
    DEFAULT_LEVEL,
    MIN_MODELS,
    choose_anchors,
    estimate,
    fit_population,
)
from holistic_dagster.efficient.sequential import DEFAULT_LOOK, sequential_gate, sign_flip_p_value
from holistic_dagster.errors import HolisticError

# scipy is imported in the functions that use it: a second of import that every command paid, which loads this
# module with the pipeline's definitions and mostly never calls it

SEPARATED = 0.05  # pairs of held-out models this far apart on the full draw should be ordered as the full draw does


@dataclass(frozen=True)
class Matrix:
    """Per-instance results, 0/1 or scores in [0, 1]: models x items (NaN where a model has no result for an
    item)."""

    models: list[str]
    items: list[str]
    correct: np.ndarray
    source: str = ""

    def rows(self, names: list[str]) -> np.ndarray:
        return self.correct[[self.models.index(m) for m in names]]


def read_matrix(path: Path) -> Matrix:
    """Reads a matrix in the format of ../shared/data/helm_classic_responses (JSON: models, items, correct[model]
    [item] in {0, 1, null}, or a score in [0, 1] such as F1), refusing anything else with the file, the record and
    the problem named."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise HolisticError(f"{path}: not a readable JSON matrix: {e}") from None
    if not isinstance(data, dict) or not all(k in data for k in ("models", "items", "correct")):
        raise HolisticError(f"{path}: a matrix is a JSON object with `models`, `items` and `correct`")
    models, items, correct = data["models"], data["items"], data["correct"]
    for name, value in (("models", models), ("items", items)):
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise HolisticError(f"{path}: `{name}` must be a list of non-empty names")
        if len(set(value)) != len(value):
            raise HolisticError(f"{path}: `{name}` names {sorted({v for v in value if value.count(v) > 1})} twice")
    if not isinstance(correct, list) or len(correct) != len(models):
        raise HolisticError(f"{path}: `correct` must have one row per model ({len(models)})")
    rows = []
    for model, row in zip(models, correct):
        if not isinstance(row, list) or len(row) != len(items):
            raise HolisticError(f"{path}: the row of model {model!r} must have one value per item ({len(items)})")
        bad = [items[j] for j, v in enumerate(row) if v is not None and not _score(v)]
        if bad:
            raise HolisticError(
                f"{path}: model {model!r} has values other than a score in [0, 1] or null (items {bad[:3]})"
            )
        rows.append([np.nan if v is None else float(v) for v in row])
    return Matrix(list(models), list(items), np.array(rows, float).reshape(len(models), len(items)), str(path))


def _score(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


@dataclass(frozen=True)
class Validation:
    anchors: int
    n_full: int
    seeds: int
    level: float
    folds: list[list[str]]  # the models held out together, fold by fold
    method: str  # the anchors' method ("irt" or, below MIN_MODELS fitted models, "random sample")
    estimate_methods: dict[str, int]  # how many estimates each method made (a model beyond the population's range:
    # "stratified sample")
    mae: float
    mae_random: float
    mae_ratio: float
    max_error: float
    kendall_tau: float
    kendall_tau_random: float  # random samples drawn as the anchors are: one per fold and seed
    kendall_tau_random_common: float  # one random sample per seed shared by every model (held out or not)
    pairs_ordered: float  # share of (pair, seed) ordered as the full draw, for pairs SEPARATED apart or more
    pairs_ordered_random: float
    separated_pairs: int
    interval_coverage: float
    interval_width: float
    per_model: dict[str, dict[str, float]]
    verdict_agreement: float | None = None
    false_alarm_rate: float | None = None
    missed_regression_rate: float | None = None
    mean_fraction_used: float | None = None
    pairs: int | None = None
    alpha: float | None = None
    look: int | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def validate_estimates(
    matrix: Matrix,
    test_models: list[str] | None = None,
    anchors: int = DEFAULT_ANCHORS,
    seeds: int = 20,
    level: float = DEFAULT_LEVEL,
    min_models: int = MIN_MODELS,
) -> Validation:
    """Holds `test_models` out together (or, without them, every model in turn), fits on the rest, and for each
    seed estimates every held-out model from `anchors` anchors and from a uniform random sample of as many."""
    complete = [m for m, row in zip(matrix.models, matrix.correct) if not np.isnan(row).any()]
    if test_models:
        unknown = [m for m in test_models if m not in matrix.models]
        if unknown:
            raise HolisticError(f"{matrix.source}: no model named {unknown} (it has {matrix.models})")
        incomplete = [m for m in test_models if m not in complete]
        if incomplete:
            raise HolisticError(f"{matrix.source}: {incomplete} lack results on some items: a test model needs all")
        folds = [list(test_models)]
    else:
        folds = [[m] for m in complete]
    if len(complete) < 3:
        raise HolisticError(f"{matrix.source}: validation needs at least 3 models with results on every item")
    n = len(matrix.items)
    full = {m: float(np.nanmean(matrix.rows([m])[0])) for m in complete}
    # per model, per seed: estimate, random sample's estimate, low, high, the common random sample's estimate
    found: dict[str, list[tuple[float, float, float, float, float]]] = {m: [] for f in folds for m in f}
    method, methods = "", dict[str, int]()
    for fold in folds:
        train = [m for m in matrix.models if m not in fold]
        population = fit_population(matrix.rows(train), train, matrix.items, min_models)
        for seed in range(seeds):
            fit = choose_anchors(population, anchors, seed, level)
            method = fit.method
            # the random baseline as the anchors are drawn: one sample per fold and seed, shared by the fold's models
            # (and one shared by every model, as a ranking from one common random sample would be)
            in_fold = np.random.default_rng([10_000 + seed, folds.index(fold)]).choice(n, size=anchors, replace=False)
            common = np.random.default_rng(10_000 + seed).choice(n, size=anchors, replace=False)
            for model in fold:
                row = matrix.rows([model])[0]
                est = estimate(fit, row[fit.anchors])
                found[model].append(
                    (est.value, float(row[in_fold].mean()), est.low, est.high, float(row[common].mean()))
                )
                methods[est.method] = methods.get(est.method, 0) + 1
    tested = list(found)
    values = np.array([[e[0] for e in found[m]] for m in tested])  # models x seeds
    randoms = np.array([[e[1] for e in found[m]] for m in tested])
    lows, highs = (
        np.array([[e[2] for e in found[m]] for m in tested]),
        np.array([[e[3] for e in found[m]] for m in tested]),
    )
    truth = np.array([full[m] for m in tested])[:, None]
    errors, random_errors = np.abs(values - truth), np.abs(randoms - truth)
    commons = np.array([[e[4] for e in found[m]] for m in tested])
    truths = truth[:, 0]
    taus, taus_random, taus_common = (_taus(x, truths) for x in (values, randoms, commons))
    (ordered, separated), (ordered_random, _) = _ordered(values, truths), _ordered(randoms, truths)
    mae, mae_random = float(errors.mean()), float(random_errors.mean())
    return Validation(
        anchors=anchors, n_full=n, seeds=seeds, level=level, folds=folds, method=method, estimate_methods=methods,
        mae=mae, mae_random=mae_random, mae_ratio=mae / mae_random if mae_random else float("nan"),
        max_error=float(errors.max()),
        kendall_tau=_mean(taus), kendall_tau_random=_mean(taus_random),
        kendall_tau_random_common=_mean(taus_common),
        pairs_ordered=_mean(ordered), pairs_ordered_random=_mean(ordered_random), separated_pairs=separated,
        interval_coverage=float(((lows <= truth) & (truth <= highs)).mean()),
        interval_width=float((highs - lows).mean()),
        per_model={
            m: {"full": full[m], "mean_estimate": float(values[k].mean()), "mae": float(errors[k].mean()),
                "mae_random": float(random_errors[k].mean())}
            for k, m in enumerate(tested)
        },
    )  # fmt: skip


def validate_gate(
    matrix: Matrix, alpha: float = 0.05, tolerance: float = 0.0, look: int = DEFAULT_LOOK, seeds: int = 1
) -> dict[str, Any]:
    """The sequential gate on every ordered pair (baseline, candidate) of models with results on every item,
    against the full-draw exact McNemar verdict (two-sided at alpha, a regression when the candidate is worse by
    more than the tolerance): the share of verdicts reproduced, false alarms (a regression the full draw does not
    show, among the pairs it passes), missed regressions, and the mean share of instances used."""
    complete = [m for m, row in zip(matrix.models, matrix.correct) if not np.isnan(row).any()]
    agree: list[bool] = []
    used: list[float] = []
    alarms: list[bool] = []
    misses: list[bool] = []
    for (i, base), (j, cand) in itertools.permutations(enumerate(complete), 2):
        a, b = matrix.rows([base])[0], matrix.rows([cand])[0]
        full = full_draw_verdict(a, b, alpha, tolerance)
        for seed in range(seeds):
            verdict = sequential_gate(a, b, alpha, tolerance, look, seed=seed * 1_000_003 + i * 1_000 + j)
            agree.append(verdict.verdict == full)
            used.append(verdict.fraction_used)
            (alarms if full == "pass" else misses).append(verdict.verdict != full)
    return {
        "verdict_agreement": _mean(agree),
        "false_alarm_rate": _mean(alarms),
        "missed_regression_rate": _mean(misses),
        "mean_fraction_used": _mean(used),
        "pairs": len(agree) // max(seeds, 1),
        "alpha": alpha,
        "look": look,
    }


def full_draw_verdict(baseline: np.ndarray, candidate: np.ndarray, alpha: float, tolerance: float) -> str:
    """The gate's verdict on the full draw: exact McNemar (0/1; the exact sign-flip test for other scores, on the
    sequential test's lattice), two-sided at alpha, worse by more than the tolerance."""
    from scipy.stats import binomtest

    if not (np.isin(baseline, (0, 1)).all() and np.isin(candidate, (0, 1)).all()):
        p = sign_flip_p_value(candidate - baseline)
        drop = float(np.mean(baseline - candidate))
        return "regression" if p < alpha and drop > tolerance else "pass"
    base_only = int(np.sum((baseline == 1) & (candidate == 0)))
    cand_only = int(np.sum((baseline == 0) & (candidate == 1)))
    if base_only + cand_only == 0:
        return "pass"
    p = binomtest(base_only, base_only + cand_only, 0.5).pvalue
    drop = (base_only - cand_only) / len(baseline)
    return "regression" if p < alpha and drop > tolerance else "pass"


def _taus(estimates: np.ndarray, truth: np.ndarray) -> list[float]:
    """Per seed (a column of models x seeds), Kendall's tau between the estimates and the full-draw values."""
    from scipy.stats import kendalltau

    if len(truth) < 2:
        return []
    return [kendalltau(estimates[:, s], truth).statistic for s in range(estimates.shape[1])]


def _ordered(estimates: np.ndarray, truth: np.ndarray) -> tuple[list[bool], int]:
    """For every pair of models SEPARATED apart or more on the full draw, whether each seed's estimates order them
    as the full draw does; and how many such pairs there are."""
    ordered, separated = [], 0
    for i, j in itertools.combinations(range(len(truth)), 2):
        gap = truth[i] - truth[j]
        if abs(gap) >= SEPARATED:
            separated += 1
            ordered.extend(np.sign(estimates[i] - estimates[j]) == np.sign(gap))
    return ordered, separated


def _mean(values: Sequence[float] | np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else float("nan")
