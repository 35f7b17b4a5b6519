"""A regression verdict with the fewest paired instances: a group-sequential exact McNemar test.

The candidate and the baseline answer the same instances in a seeded random order; every `look` instances the
test looks at the discordant pairs so far (one right, the other wrong). Under "no difference" each discordant
pair is the baseline's or the candidate's with probability 1/2, so, given how many there were at each look, the
count of the baseline's is a simple random walk: its exact distribution, and the chance of crossing each look's
boundary without having crossed an earlier one, follow by dynamic programming. The boundaries spend the one-sided
level alpha/2 over the looks with Lan and DeMets' O'Brien-Fleming-type function of the share of the full draw seen
(almost nothing early, almost all of it at the full draw, so that a test that runs to the end decides as the
full-draw McNemar test does): the chance of a false alarm over all looks together is at most alpha/2 one-sided,
which is the regression half of the full-draw two-sided test at alpha. The test stops early for a regression when
the boundary is crossed and the drop exceeds the tolerance (and, projected over the instances left, will still
exceed it at the full draw with at least 1 - `futility` probability); it stops early for "no regression"
(futility) when, projecting the discordance seen so far over the instances left, a regression at the full draw has
less than `futility` probability. Stopping for futility never raises the false-alarm rate (it only ever passes)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

# scipy is imported in the functions that use it: a second of import that every command paid, which loads this
# module with the pipeline's definitions and mostly never calls it

DEFAULT_LOOK = 25  # instances between looks
DEFAULT_FUTILITY = 0.02  # stop for "no regression" below this predictive probability of a full-draw regression


def obrien_fleming_spending(fraction: float, alpha: float) -> float:
    """Lan-DeMets' O'Brien-Fleming-type alpha spent by the time `fraction` of the information is seen."""
    from scipy.stats import norm

    if fraction <= 0:
        return 0.0
    return float(min(alpha, 2 * (1 - norm.cdf(norm.ppf(1 - alpha / 2) / np.sqrt(min(fraction, 1.0))))))


@dataclass(frozen=True)
class SequentialVerdict:
    """verdict: "regression" | "pass"; stopped_at: instances used; n_full: the full draw; looks: looks made;
    reason: why it stopped; diff: the candidate's mean minus the baseline's on the instances used;
    baseline_only / candidate_only: discordant pairs so far; detectable: the smallest drop the instances used
    would find with 80% power in a one-sided test at alpha/2 (a pass rules out nothing smaller)."""

    verdict: str
    stopped_at: int
    n_full: int
    looks: int
    reason: str
    diff: float
    baseline_only: int
    candidate_only: int
    detectable: float

    @property
    def fraction_used(self) -> float:
        return self.stopped_at / self.n_full


class SequentialMcNemar:
    """The test as an evaluation reveals the pairs: `look(baseline_only, candidate_only, n)` after each batch (the
    counts so far, over the first n pairs of the seeded order) gives a SequentialVerdict once it can stop, else
    None. The last look is the one at n == n_full."""

    def __init__(
        self,
        n_full: int,
        alpha: float = 0.05,
        tolerance: float = 0.0,
        futility: float = DEFAULT_FUTILITY,
        seed: int = 0,
        simulations: int = 4000,
    ):
        if n_full < 1 or not 0 < alpha < 1:
            raise ValueError(
                f"a sequential test needs a full draw of at least 1 and alpha in (0, 1); got {n_full}, {alpha}"
            )
        self.n_full, self.alpha, self.tolerance, self.futility = n_full, alpha, tolerance, futility
        self.simulations, self.rng = simulations, np.random.default_rng(seed)
        self.alive = np.array([1.0])  # null probability of the baseline-only count's walk, paths not yet stopped
        self.discordant, self.spent, self.looks, self.n = 0, 0.0, 0, 0

    def look(self, bo: int, co: int, n: int) -> SequentialVerdict | None:
        if not self.n < n <= self.n_full or bo + co < self.discordant:
            raise ValueError(f"looks go forward: {n} pairs after {self.n}, of {self.n_full}")
        self.looks, self.n = self.looks + 1, n
        self.alive = _advance(self.alive, bo + co - self.discordant)
        self.discordant = bo + co
        target = obrien_fleming_spending(n / self.n_full, self.alpha / 2)
        critical, mass = _critical(self.alive, target - self.spent)
        self.spent += mass
        self.alive[critical:] = 0.0
        diff, level = (co - bo) / n, self.alpha / 2  # the detectable drop is stated at the full draw's level
        worse = bo >= critical and -diff > self.tolerance
        if n == self.n_full:
            if worse:
                return _verdict(
                    "regression", n, n, self.looks, "boundary crossed at the full draw", diff, bo, co, level
                )
            return _verdict("pass", n, n, self.looks, "full draw: no regression", diff, bo, co, level)
        chance = _regression_chance(bo, co, n, self.n_full, self.alpha, self.tolerance, self.rng, self.simulations)
        # an early regression also needs the drop beyond the tolerance to hold up over the rest of the draw
        if worse and chance >= 1 - self.futility:
            return _verdict("regression", n, self.n_full, self.looks, "boundary crossed", diff, bo, co, level)
        if chance < self.futility:
            why = "futility: a full-draw regression is unlikely"
            return _verdict("pass", n, self.n_full, self.looks, why, diff, bo, co, level)
        return None


RESOLUTION = 100  # a score difference's size counted in hundredths (its sign exact): the sign-flip test's lattice


class SequentialSignFlip:
    """The same test for scores in [0, 1] that are not right-or-wrong (F1, ROUGE, a judge's grade): the paired
    differences d = candidate - baseline. Under "no difference" each pair's sign is + or - with probability 1/2
    given its size (the permutation test the fixed-sample gate runs), so the baseline's share, the sum of |d| over
    the pairs where the baseline is ahead, is given the sizes seen a sum of independent halves: its exact
    distribution on a lattice of hundredths follows by the same dynamic programming as McNemar's, which is the
    case |d| in {0, 1}. `look(differences)` after each batch: d over the first n pairs of the seeded order."""

    def __init__(
        self,
        n_full: int,
        alpha: float = 0.05,
        tolerance: float = 0.0,
        futility: float = DEFAULT_FUTILITY,
    ):
        if n_full < 1 or not 0 < alpha < 1:
            raise ValueError(
                f"a sequential test needs a full draw of at least 1 and alpha in (0, 1); got {n_full}, {alpha}"
            )
        self.n_full, self.alpha, self.tolerance, self.futility = n_full, alpha, tolerance, futility
        self.alive = np.array([1.0])  # null distribution of the baseline's share (in hundredths), paths not stopped
        self.spent, self.looks, self.n = 0.0, 0, 0

    def look(self, differences: ArrayLike) -> SequentialVerdict | None:
        d = np.asarray(differences, float)
        n = len(d)
        if not self.n < n <= self.n_full:
            raise ValueError(f"looks go forward: {n} pairs after {self.n}, of {self.n_full}")
        if np.isnan(d).any() or (np.abs(d) > 1).any():
            raise ValueError("the sign-flip test needs differences of scores in [0, 1]")
        sizes = np.rint(np.abs(d) * RESOLUTION).astype(int)
        self.alive = _advance_sizes(self.alive, sizes[self.n :])
        self.looks, self.n = self.looks + 1, n
        target = obrien_fleming_spending(n / self.n_full, self.alpha / 2)
        critical, mass = _critical(self.alive, target - self.spent)
        self.spent += mass
        self.alive[critical:] = 0.0
        share = int(sizes[d < 0].sum())
        diff, level = float(d.mean()), self.alpha / 2
        bo, co = int((d < 0).sum()), int((d > 0).sum())
        worse = share >= critical and -diff > self.tolerance
        spread = float(np.mean(d**2))  # McNemar's discordance, for scores: the detectable drop's variance
        if n == self.n_full:
            why, verdict = ("boundary crossed at the full draw", "regression") if worse else ("full draw", "pass")
            return _verdict(verdict, n, n, self.looks, why, diff, bo, co, level, spread)
        chance = _regression_chance_scores(d, self.n_full, self.alpha, self.tolerance)
        if worse and chance >= 1 - self.futility:
            return _verdict("regression", n, self.n_full, self.looks, "boundary crossed", diff, bo, co, level, spread)
        if chance < self.futility:
            why = "futility: a full-draw regression is unlikely"
            return _verdict("pass", n, self.n_full, self.looks, why, diff, bo, co, level, spread)
        return None


def _advance_sizes(dist: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The baseline's share after pairs of these sizes: each adds its size or nothing, with probability 1/2."""
    out = dist.copy()
    for size in sizes[sizes > 0]:
        grown = np.zeros(len(out) + size)
        grown[: len(out)] += 0.5 * out
        grown[size:] += 0.5 * out
        out = grown
    return out


def sign_flip_p_value(differences: ArrayLike) -> float:
    """The exact two-sided sign-flip p-value of paired differences in [-1, 1] (sizes on the lattice of
    hundredths): what the fixed-sample gate's permutation test estimates by sampling signs."""
    d = np.asarray(differences, float)
    sizes = np.rint(np.abs(d) * RESOLUTION).astype(int)
    if not sizes.any():
        return 1.0
    null = _advance_sizes(np.array([1.0]), sizes)
    share = int(sizes[d < 0].sum())
    lower, upper = null[: share + 1].sum(), null[share:].sum()
    return float(min(1.0, 2 * min(lower, upper)))


def _regression_chance_scores(d: np.ndarray, n_full: int, alpha: float, tolerance: float) -> float:
    """Predictive probability of a full-draw regression (the sign-flip test at alpha, two-sided, in its normal
    form, worse by more than the tolerance): the sum over the pairs left is normal around what those seen say,
    widened by the uncertainty of their mean (the central limit over the hundreds of pairs left)."""
    from scipy.stats import norm

    left = n_full - len(d)
    # what the pairs left are expected to be: those seen and one pseudo-pair each way (as McNemar's predictive keeps
    # a prior), so that a run of ties seen first never makes a regression look impossible
    seen = np.concatenate([d, [-1.0, 1.0]])
    n, variance = len(seen), float(seen.var(ddof=1))
    mean_total = d.sum() + left * seen.mean()
    sd_total = np.sqrt(variance * (left + left**2 / n))
    squares = (d**2).sum() + left * np.mean(seen**2)
    if squares == 0:
        return 0.0
    threshold = min(norm.ppf(alpha / 2) * np.sqrt(squares), -tolerance * n_full)  # a regression ends below both
    if sd_total == 0:
        return float(mean_total < threshold)
    return float(norm.cdf((threshold - mean_total) / sd_total))


def sequential_gate(
    baseline: np.ndarray,
    candidate: np.ndarray,
    alpha: float = 0.05,
    tolerance: float = 0.0,
    look: int = DEFAULT_LOOK,
    futility: float = DEFAULT_FUTILITY,
    seed: int = 0,
    simulations: int = 4000,
) -> SequentialVerdict:
    """Runs the sequential test over paired results already evaluated, read in the seeded order (`order_of(n,
    seed)`) a batch of `look` at a time, as an evaluation would reveal them: exact McNemar for 0/1 outcomes, the
    sign-flip test for other scores in [0, 1] (higher is better: give a lower-is-better metric as 1 - value)."""
    a, b = np.asarray(baseline, float), np.asarray(candidate, float)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError("the sequential gate needs two equally long, non-empty vectors of paired outcomes")
    if not (bounded(a) and bounded(b)):
        raise ValueError("the sequential gate needs scores in [0, 1] (0/1 for a correct / incorrect metric)")
    if not 0 < alpha < 1 or look < 1:
        raise ValueError(f"alpha must be in (0, 1) and look at least 1; got {alpha}, {look}")
    order = order_of(len(a), seed)
    a, b = a[order], b[order]
    if not (np.isin(a, (0, 1)).all() and np.isin(b, (0, 1)).all()):
        scores = SequentialSignFlip(len(a), alpha, tolerance, futility)
        for n in looks_of(len(a), look):
            if (verdict := scores.look(b[:n] - a[:n])) is not None:
                return verdict
        raise AssertionError("the last look decides")
    base_only, cand_only = np.cumsum((a == 1) & (b == 0)), np.cumsum((a == 0) & (b == 1))
    test = SequentialMcNemar(len(a), alpha, tolerance, futility, seed, simulations)
    for n in looks_of(len(a), look):
        if (verdict := test.look(int(base_only[n - 1]), int(cand_only[n - 1]), n)) is not None:
            return verdict
    raise AssertionError("the last look decides")


def bounded(values: np.ndarray) -> bool:
    """Whether every value is a score in [0, 1] (what the item response fit and the sequential tests take)."""
    v = np.asarray(values, float)
    return bool(np.all((v >= 0) & (v <= 1)))


def looks_of(n_full: int, look: int) -> list[int]:
    """The pairs seen at each look: look, 2 look, ..., n_full."""
    return [min(n, n_full) for n in range(look, n_full + look, look)]


def order_of(n: int, seed: int) -> np.ndarray:
    """The seeded order in which a sequential evaluation asks for the n paired instances."""
    return np.random.default_rng(seed).permutation(n)


SAMPLE_SEED = 0  # the order in which the gate's batches ask a scenario's instances


def sample_order(ids: Sequence[str], seed: int = SAMPLE_SEED) -> list[str]:
    """A scenario's instance ids in the seeded order a sequential gate's batches ask them (sorted first, so that
    the order depends on the draw alone)."""
    ordered = sorted(ids)
    return [ordered[i] for i in order_of(len(ordered), seed)]


def _advance(dist: np.ndarray, steps: int) -> np.ndarray:
    from scipy.stats import binom

    if steps == 0:
        return dist.copy()
    return np.convolve(dist, binom.pmf(np.arange(steps + 1), steps, 0.5))


def _critical(dist: np.ndarray, budget: float) -> tuple[int, float]:
    """The smallest count whose upper tail (of the paths still alive) fits the budget, and that tail's mass."""
    tail = np.cumsum(dist[::-1])[::-1]  # tail[k] = P(count >= k, alive)
    ok = np.nonzero(tail <= budget + 1e-15)[0]
    critical = int(ok[0]) if len(ok) else len(dist)
    return critical, float(tail[critical]) if critical < len(dist) else 0.0


def _regression_chance(
    bo: int, co: int, n: int, n_full: int, alpha: float, tolerance: float, rng: np.random.Generator, simulations: int
) -> float:
    """Predictive probability that the full draw ends in a regression (the fixed-sample exact McNemar test at
    alpha, two-sided, worse by more than the tolerance), drawing the pairs left from the rates seen so far."""
    from scipy.stats import binom

    rates = rng.dirichlet([bo + 0.5, co + 0.5, n - bo - co + 0.5], size=simulations)
    left = rng.multinomial(n_full - n, rates)
    final_bo, final_co = bo + left[:, 0], co + left[:, 1]
    discordant = final_bo + final_co
    significant = binom.sf(final_bo - 1, np.maximum(discordant, 1), 0.5) < alpha / 2
    return float(np.mean(significant & ((final_bo - final_co) / n_full > tolerance) & (discordant > 0)))


def detectable_drop(n: int, discordance: float, alpha: float, power: float = 0.8) -> float:
    """The smallest drop in accuracy a one-sided McNemar test at `alpha` finds with `power` on n paired instances
    whose discordance rate (share of instances on which the two models differ) is `discordance` (normal
    approximation, Connor 1987)."""
    from scipy.stats import norm

    if n <= 0 or discordance <= 0:
        return float("nan")
    return float((norm.ppf(1 - alpha) + norm.ppf(power)) * np.sqrt(discordance / n))


def instances_needed(tolerance: float, discordance: float, alpha: float, power: float = 0.8) -> int:
    """Paired instances a McNemar test at `alpha` (one-sided) needs to find a drop of `tolerance` with `power`,
    when the models differ on a share `discordance` of instances (Connor 1987's formula)."""
    from scipy.stats import norm

    if tolerance <= 0:
        raise ValueError(f"a tolerance is a positive drop in accuracy (0.005 = half a point); got {tolerance}")
    z_a, z_b = norm.ppf(1 - alpha), norm.ppf(power)
    d = max(discordance, tolerance)
    return int(np.ceil((z_a * np.sqrt(d) + z_b * np.sqrt(max(d - tolerance**2, 1e-12))) ** 2 / tolerance**2))


def _verdict(
    verdict: str, n: int, n_full: int, looks: int, reason: str, diff: float, bo: int, co: int, level: float,
    spread: float | None = None,
) -> SequentialVerdict:  # fmt: skip
    disc = spread if spread is not None else (bo + co) / n if n else 0.0
    return SequentialVerdict(verdict, n, n_full, looks, reason, diff, bo, co, detectable_drop(n, disc, level))
