"""Anchors and estimates: a new model answers k anchor instances, and its score on the scenario's full draw is
estimated from them, with an interval whose coverage was measured on the population it was fitted on.

How (measured on HELM Classic's per-instance MMLU results: bench/efficient.py):
- Anchors: the items are sorted by how often the population's models got them right and cut into k strata of
  equal size; each stratum gives one anchor, drawn with the seed, the items that tell abilities apart more likely
  (the 2PL's information), which stands for its stratum's share of the draw inversely to its chance of being drawn
  (Horvitz-Thompson weights).
  (k-means on the 2PL's item parameters, tinyBenchmarks' choice, did worse on 20 models: its clusters of rare,
  extreme items get anchors that say little.)
- Estimate: the anchors' answers are counted as they are; every other item gets the probability a 2PL fitted on
  the population gives it at the new model's ability (integrated over that ability's posterior), plus the
  residuals of the population's models that answered the anchors most alike (a tempered likelihood): the 2PL sets
  the level; the neighbours carry what one ability misses (a model strong in one subject, weak in another). A
  model whose anchors score above every model of the population (a new model often is) is estimated as the
  stratified sample its anchors are: there the fit's predictions only pull it back into the population's range.
- Interval: split-conformal over the population itself. Each model of the population is left out in turn, the
  2PL refitted without it, and its score estimated from the same anchors; the errors, divided by the binomial
  standard error of k draws, give the quantile that scales the interval. With n models it covers at least
  `level` and at most level + 1/(n + 1) of exchangeable new models.
- Too few models (fewer than MIN_MODELS with results on the full draw): a uniform random sample of k instances
  and its Wilson interval (finite-population corrected); every estimate says which method made it.
- Scores that are not right-or-wrong but lie in [0, 1] (F1, ROUGE) go the same way: the 2PL takes them as
  fractions of a right answer (irt.py), the neighbours' likelihood likewise, and a sample's interval is the normal
  one on the scores' spread instead of Wilson's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike

from holistic_dagster.efficient.irt import ItemParameters, fit_2pl
from holistic_dagster.efficient.sequential import bounded

# scipy is imported in the functions that use it: a second of import that every command paid, which loads this
# module with the pipeline's definitions and mostly never calls it

MIN_MODELS = 10  # fewer models with full results: the cold start (a random sample and its ordinary interval)
DEFAULT_ANCHORS = 100
DEFAULT_LEVEL = 0.9
BEYOND_Z = 2.326  # a model whose anchors' score is this many standard errors below the population's range (ABOVE_Z
# above it) is estimated as a stratified sample
ABOVE_Z = 0.0  # above the population's range, as soon as the anchors say so (see estimate: 0.5 and 1.0 measured)
INFORMED = 0.25  # the share of an anchor's chance of being drawn that follows its information (_selection_chances)
NEIGHBOUR_TEMPERATURE = 0.05  # how sharply the anchors' likelihood picks neighbours (1 = the plain likelihood)

IRT = "irt"
RANDOM = "random sample"
STRATIFIED = "stratified sample"  # the anchors as the stratified sample they are: a model beyond the population's
# range, or a metric the item response fit is not made for (stratified_mean)


@dataclass(frozen=True)
class Population:
    """The models with results on a scenario's full draw, and what is fitted on them once for any anchors: the
    2PL, each model's residuals from it, and (for the intervals) the 2PL refitted with each model left out."""

    models: tuple[str, ...]
    items: tuple[str, ...]
    matrix: np.ndarray  # models x items, 0/1 or scores in [0, 1]
    params: ItemParameters | None
    residuals: np.ndarray | None
    left_out: tuple[ItemParameters, ...] = field(default=())  # the 2PL without model i, for each i
    left_out_residuals: tuple[np.ndarray, ...] = field(default=())  # the others' residuals from it

    @property
    def fitted(self) -> bool:
        return self.params is not None


@dataclass(frozen=True)
class AnchorFit:
    """The anchors of a scenario's full draw and how to turn a model's answers on them into an estimate."""

    population: Population
    anchors: np.ndarray  # item indices into population.items
    weights: np.ndarray  # each anchor's share of the full draw
    method: str  # IRT | RANDOM (the estimates of a model beyond the population's range are STRATIFIED)
    level: float
    interval_scale: float  # conformal quantile of |error| / standard error (IRT); the normal quantile (RANDOM)
    seed: int
    ability_weight: float = 1.0  # how much of the 2PL's ability difference to the neighbours is kept (IRT)
    # IRT: each model of the population estimated as a new one (refitted without it): models, mae, coverage
    validation: dict[str, float] = field(default_factory=dict)

    @property
    def anchor_items(self) -> list[str]:
        return [self.population.items[i] for i in self.anchors]

    @property
    def n_full(self) -> int:
        return len(self.population.items)


@dataclass(frozen=True)
class Estimate:
    """A full-draw score estimated from n_evaluated of n_full instances: value, and an interval at `level`."""

    value: float
    low: float
    high: float
    level: float
    n_evaluated: int
    n_full: int
    method: str

    def __str__(self) -> str:
        half = (self.high - self.low) / 2
        return f"≈{self.value:.3f} ±{half:.3f}, {self.n_evaluated}/{self.n_full}"


def fit_population(
    matrix: np.ndarray,
    models: list[str],
    items: list[str],
    min_models: int = MIN_MODELS,
    guessing: float = 0.0,
) -> Population:
    """Fits the population: a 2PL on every model with an answer on every item (rows with a missing cell are left
    out: they were evaluated on another draw), and the refits with each of them left out. Fewer than `min_models`
    such rows: no fit (the estimates will be a random sample's)."""
    y = np.asarray(matrix, float)
    if y.shape != (len(models), len(items)):
        raise ValueError(f"the matrix is {y.shape}, but {len(models)} models x {len(items)} items were named")
    complete = ~np.isnan(y).any(axis=1)
    kept = tuple(m for m, c in zip(models, complete) if c)
    y = y[complete]
    if len(kept) < max(min_models, 2):
        return Population(kept, tuple(items), y, None, None)
    params = fit_2pl(y, guessing)
    left_out = tuple(fit_2pl(np.delete(y, i, axis=0), guessing, start=params) for i in range(len(kept)))
    residuals = tuple(_residuals(p, np.delete(y, i, axis=0)) for i, p in enumerate(left_out))
    return Population(kept, tuple(items), y, params, _residuals(params, y), left_out, residuals)


def _residuals(params: ItemParameters, y: np.ndarray) -> np.ndarray:
    every = np.arange(y.shape[1])
    return np.asarray(y - np.array([params.expected_score(every, row) for row in y]))


def choose_anchors(
    population: Population, k: int = DEFAULT_ANCHORS, seed: int = 0, level: float = DEFAULT_LEVEL
) -> AnchorFit:
    """k anchors for the population (stratified on the items' rate of right answers), or a uniform random sample
    of k where the population is too small to fit; with the interval's scale measured on the population."""
    from scipy.stats import norm

    n = len(population.items)
    if not 1 <= k <= n:
        raise ValueError(f"anchors: k must be between 1 and the {n} items of the full draw; got {k}")
    if not 0 < level < 1:
        raise ValueError(f"the interval's level is in (0, 1); got {level}")
    rng = np.random.default_rng(seed)
    if population.params is None:  # not fitted
        anchors = np.sort(rng.choice(n, size=k, replace=False))
        return AnchorFit(population, anchors, np.full(k, 1 / k), RANDOM, level, float(norm.ppf(0.5 + level / 2)), seed)
    rate = population.matrix.mean(axis=0)
    order = np.lexsort((rng.random(n), rate))  # ties in random order
    strata = np.array_split(order, k)
    chance = _selection_chances(population.params, population.matrix, strata)
    anchors = np.array([rng.choice(s, p=chance[s]) for s in strata])
    weights = 1 / (chance[anchors] * n)  # Horvitz-Thompson: the share of the draw each anchor stands for
    fit = AnchorFit(population, anchors, weights, IRT, level, math.inf, seed)
    weight, scale, validation = _left_out_calibration(fit)
    return AnchorFit(population, anchors, weights, IRT, level, scale, seed, weight, validation)


def _selection_chances(params: ItemParameters, matrix: np.ndarray, strata: list[np.ndarray]) -> np.ndarray:
    """Per item, its chance of being its stratum's anchor: INFORMED of it in proportion to the square root of the
    2PL's information about ability, averaged from a step below the population's weakest model to a step above its
    strongest; the rest uniform, so no anchor stands for more than 1 / (1 - INFORMED) of its stratum's even share.
    Informative anchors tell models of near abilities apart. Measured on HELM Classic's MMLU (bench/efficient.py's
    folds, 40-150 seeds) at 0, 0.25 and 0.5: one model held out in turn, error 1.92, 1.86, 1.80 points and Kendall
    tau 0.800, 0.808, 0.810; the 4 strongest held out, error 4.66, 4.55, 4.75 (beyond the population, informative
    for it is not informative for them): 0.25."""
    n = matrix.shape[1]
    every = np.arange(n)
    abilities = [params.ability(every, row) for row in matrix]
    p = params.probability(np.linspace(min(abilities) - 1, max(abilities) + 1, 25))
    root_information = np.sqrt((params.discrimination**2 * p * (1 - p)).mean(axis=0))
    chance = np.empty(n)
    for s in strata:
        chance[s] = (1 - INFORMED) / len(s) + INFORMED * root_information[s] / root_information[s].sum()
    return chance


ABILITY_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _left_out_calibration(fit: AnchorFit) -> tuple[float, float, dict[str, float]]:
    """Each model of the population estimated as a new one (the 2PL refitted without it): the ability weight with
    the smallest mean error, the conformal quantile of that weight's errors over their standard errors, and the
    figures (mean absolute error against a random sample's expected one, the share the interval covers)."""
    pop = fit.population
    k, n = len(fit.anchors), fit.n_full
    errors: dict[float, list[tuple[float, float]]] = {w: [] for w in ABILITY_WEIGHTS}
    for i, params in enumerate(pop.left_out):
        others = pop.matrix[np.delete(np.arange(len(pop.models)), i)]
        parts = _irt_parts(fit, params, others, pop.left_out_residuals[i], pop.matrix[i, fit.anchors])
        for w in ABILITY_WEIGHTS:
            value = _combine(fit, pop.matrix[i, fit.anchors], *parts, w)
            errors[w].append((abs(value - pop.matrix[i].mean()), _standard_error(value, k, n)))
    best = min(ABILITY_WEIGHTS, key=lambda w: (np.mean([e for e, _ in errors[w]]), -w))
    scores = np.sort([e / se for e, se in errors[best]])
    rank = math.ceil((len(scores) + 1) * fit.level)
    scale = float(scores[rank - 1]) if rank <= len(scores) else float(scores[-1] * 1.5)
    random_mae = [math.sqrt(2 / math.pi) * _sample_error(row, k, n) for row in pop.matrix]  # E|normal error|
    validation = {
        "models": len(pop.models),
        "mae": float(np.mean([e for e, _ in errors[best]])),
        "mae_random": float(np.mean(random_mae)),
        "coverage": float(np.mean(scores <= scale)),
    }
    return best, scale, validation


def _standard_error(p: float, k: int, n: int) -> float:
    p = min(max(p, 0.02), 0.98)
    return math.sqrt(p * (1 - p) / k * max(1 - k / n, 1 / n))


def _sample_error(row: np.ndarray, k: int, n: int) -> float:
    """The standard error of a uniform random sample of k of a model's n results: binomial for 0/1, else from
    the results' own spread."""
    if np.isin(row, (0.0, 1.0)).all():
        return _standard_error(float(row.mean()), k, n)
    return math.sqrt(float(row.var()) / k * max(1 - k / n, 1 / n))


def _irt_parts(
    fit: AnchorFit, params: ItemParameters, matrix: np.ndarray, residuals: np.ndarray, answers: ArrayLike
) -> tuple[np.ndarray, np.ndarray]:
    """Per item: what the neighbours answered (the population's models weighted by how alike they answered the
    anchors, a tempered likelihood), and what the 2PL expects of this model minus what it expects of them."""
    y = np.asarray(answers, float)
    expected = params.expected_score(fit.anchors, y)
    smoothed = np.clip((matrix * len(matrix) + matrix.mean(axis=0)) / (len(matrix) + 1), 0.02, 0.98)[:, fit.anchors]
    log_like = (y * np.log(smoothed) + (1 - y) * np.log1p(-smoothed)).sum(axis=1)
    weight = np.exp(NEIGHBOUR_TEMPERATURE * (log_like - log_like.max()))
    weight /= weight.sum()
    neighbours = weight @ matrix
    return neighbours, expected - (neighbours - weight @ residuals)


def _combine(
    fit: AnchorFit, answers: np.ndarray, neighbours: np.ndarray, ability_gap: np.ndarray, ability_weight: float
) -> float:
    predicted = np.clip(neighbours + ability_weight * ability_gap, 0.0, 1.0)
    rest = np.ones(fit.n_full, bool)
    rest[fit.anchors] = False
    return float((np.sum(answers) + predicted[rest].sum()) / fit.n_full)


def estimate(fit: AnchorFit, answers: ArrayLike) -> Estimate:
    """The full-draw score of a model that gave `answers` (0/1, or scores in [0, 1] such as F1, in the order of
    fit.anchors) on the anchors."""
    y = np.asarray(answers, float)
    k, n = len(fit.anchors), fit.n_full
    if y.shape != (k,) or not bounded(y):
        raise ValueError(f"an estimate needs the model's score in [0, 1] on each of the {k} anchors, in their order")
    if fit.method == RANDOM:
        return sample_estimate(y, n, fit.level)
    pop = fit.population
    sampled = float(fit.weights @ y / fit.weights.sum())  # the anchors as a stratified sample, whatever the population
    low, high = pop.matrix.mean(axis=1).min(), pop.matrix.mean(axis=1).max()
    above = sampled - high > ABOVE_Z * _standard_error(high, k, n)
    if above or low - sampled > BEYOND_Z * _standard_error(low, k, n):
        # beyond every model the 2PL and the neighbours were fitted on: their predictions would pull the estimate
        # back into the population's range. Above it (where a new model mostly is) as soon as the anchors say so:
        # the 4 strongest of 20 held out, 1.31x a random sample's error -> 1.02x (ABOVE_Z 0.5: 1.08x, 1.0: 1.18x),
        # at 1.86 -> 1.99 points with one held out in turn (the strongest of them, now and then); below only
        # clearly, as a sample's own noise takes a model at chance past the weakest now and then, where the 2PL
        # does well
        return _sampled(fit, STRATIFIED, y)
    if pop.params is None or pop.residuals is None:
        raise ValueError("an item response fit's estimate needs its population's 2PL")  # never: method is IRT
    value = _combine(fit, y, *_irt_parts(fit, pop.params, pop.matrix, pop.residuals, y), fit.ability_weight)
    half = fit.interval_scale * _standard_error(value, k, n)
    lower, upper = max(0.0, value - half), min(1.0, value + half)
    if not low <= sampled <= high:
        # past the range's end, if not clearly: the left-out models the interval was measured on were inside it, so
        # the interval also holds what the anchors say as a sample
        beyond = _sampled(fit, STRATIFIED, y)
        lower, upper = min(lower, beyond.low), max(upper, beyond.high)
    return Estimate(value, lower, upper, fit.level, k, n, IRT)


def _sampled(fit: AnchorFit, method: str, answers: np.ndarray) -> Estimate:
    """The anchors as the stratified sample they are (stratified_mean, on the fit's weights)."""
    return replace(stratified_mean(answers, fit.weights, fit.n_full, fit.level, (0.0, 1.0)), method=method)


def sample_estimate(values: ArrayLike, n_full: int, level: float = DEFAULT_LEVEL) -> Estimate:
    """The full-draw mean from a uniform random sample of it: Wilson's interval (finite-population corrected) for
    0/1 values, the normal one otherwise."""
    x = np.asarray(values, float)
    k = len(x)
    if not 0 < k <= n_full:
        raise ValueError(f"a sample of 1 to {n_full} values is needed; got {k}")
    if not np.isin(x, (0.0, 1.0)).all():
        return estimate_mean(x, n_full, level)
    value = float(x.mean())
    low, high = wilson(value, k / max(1 - k / n_full, 1 / n_full), level) if k < n_full else (value, value)
    return Estimate(value, low, high, level, k, n_full, RANDOM)


def stratified_mean(
    values: ArrayLike,
    weights: ArrayLike,
    n_full: int,
    level: float = DEFAULT_LEVEL,
    bounds: tuple[float, float] = (-math.inf, math.inf),
) -> Estimate:
    """Any per-instance metric's full-draw mean from the anchors as the stratified sample they are (each anchor
    weighed by the share of the draw it stands for: the weighted mean), with the normal interval on the values'
    weighted spread over Kish's effective sample size (the anchors' unequal weights count as fewer draws;
    stratifying only lowers the variance), kept within the metric's bounds. What an efficient evaluation says of
    the metrics the item response fit is not made for (other families, runtimes)."""
    from scipy.stats import norm

    x, w = np.asarray(values, float), np.asarray(weights, float)
    if len(x) == 0 or x.shape != w.shape or len(x) > n_full or (w <= 0).any():
        raise ValueError(f"a stratified mean needs 1 to {n_full} values, each with a positive weight")
    value = float(w @ x / w.sum())
    k = len(x)
    if k == n_full:
        return Estimate(value, value, value, level, k, n_full, STRATIFIED)
    effective = float(w.sum() ** 2 / (w**2).sum()) / max(1 - k / n_full, 1 / n_full)  # finite-population corrected
    if _proportion_like(x, bounds):
        # right-or-wrong values, or values in [0, 1] that all came out the same: their spread says nothing of the
        # draw's (20 zeros would give a zero-width interval); Wilson's on the share is conservative for any value in
        # [0, 1], whose variance is at most p (1 - p)
        low, high = wilson(value, effective, level)
        return Estimate(value, max(bounds[0], low), min(bounds[1], high), level, k, n_full, STRATIFIED)
    spread = float(w @ (x - value) ** 2 / w.sum() * k / (k - 1)) if k > 1 else 0.0
    half = float(norm.ppf(0.5 + level / 2)) * math.sqrt(spread / effective)
    low, high = max(bounds[0], value - half), min(bounds[1], value + half)
    return Estimate(value, low, high, level, k, n_full, STRATIFIED)


def _proportion_like(x: np.ndarray, bounds: tuple[float, float] = (0.0, 1.0)) -> bool:
    """Values whose interval is Wilson's: a metric bounded in [0, 1] whose values are 0/1, or all one value."""
    within = bounds[0] >= 0.0 and bounds[1] <= 1.0 and bounded(x)
    return within and (bool(np.isin(x, (0.0, 1.0)).all()) or len(set(x.tolist())) == 1)


def estimate_mean(values: ArrayLike, n_full: int, level: float = DEFAULT_LEVEL) -> Estimate:
    """A metric that is not right-or-wrong (F1, ROUGE) averaged over a random sample of the full draw: the mean
    with a normal interval (finite-population corrected)."""
    from scipy.stats import norm

    x = np.asarray(values, float)
    k = len(x)
    if k == 0 or k > n_full:
        raise ValueError(f"a sample of 1 to {n_full} values is needed; got {k}")
    if k < n_full and bounded(x) and len(set(x.tolist())) == 1:  # all one score in [0, 1]: see stratified_mean
        low, high = wilson(float(x[0]), k / max(1 - k / n_full, 1 / n_full), level)
        return Estimate(float(x[0]), low, high, level, k, n_full, RANDOM)
    sd = float(x.std(ddof=1)) if k > 1 else 0.0
    half = float(norm.ppf(0.5 + level / 2)) * sd / math.sqrt(k) * math.sqrt(max(1 - k / n_full, 0.0))
    return Estimate(float(x.mean()), float(x.mean()) - half, float(x.mean()) + half, level, k, n_full, RANDOM)


def wilson(p: float, n: float, level: float) -> tuple[float, float]:
    """Wilson's score interval for a proportion p seen on n draws (n may be an effective size)."""
    from scipy.stats import norm

    z = norm.ppf(0.5 + level / 2)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at p = 0 (or 1) the interval's end is p itself: exactly, not the 1e-17 that rounding leaves (which an interval
    # check then reads as not covering a full-draw value of 0)
    return (0.0 if p <= 0 else max(0.0, centre - half)), (1.0 if p >= 1 else min(1.0, centre + half))
